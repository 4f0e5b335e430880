"""Configs that passed validation, remembered: the one memo the pipeline and the create path share.

A run of an automation repeats its config every time, and a batch of creates often repeats one
config a thousand times; a JSON-Schema validation costs ≈ 50 µs of CPU, a look-up here ≈ 2 µs.

Speed only: only successes are remembered, so removing this memo changes no outcome. Validation
is a pure function of the definition and the config because the registries a definition's
``check``/``schema`` consult (functions, channels, action types) only ever grow: a config valid
once stays valid. Keyed by the definition object itself (held, so its identity cannot be reused)
and the config's canonical JSON. Bounded; cleared when full.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from actwheel.actions.base import ActionDefinition
from actwheel.errors import FieldError

__all__ = ["ValidConfigs"]


class ValidConfigs:
    """``errors(definition, config)`` = ``definition.validate(config)``, remembered when empty."""

    __slots__ = ("_capacity", "_valid")

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._valid: set[tuple[ActionDefinition, bytes]] = set()

    def errors(self, definition: ActionDefinition, config: Mapping[str, Any]) -> list[FieldError]:
        try:
            key = (definition, orjson.dumps(config, option=orjson.OPT_SORT_KEYS))
        except TypeError:  # not JSON (cannot come from storage, the bus or HTTP): validate every time
            return definition.validate(config)
        if key in self._valid:
            return []
        errors = definition.validate(config)
        if not errors:
            if len(self._valid) >= self._capacity:
                self._valid.clear()
            self._valid.add(key)
        return errors
