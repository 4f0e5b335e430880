"""Configs that passed validation, remembered: the one memo the pipeline and the create path share.

A run of an automation repeats its config every time, and a batch of creates often repeats one
config a thousand times; a JSON-Schema validation costs ≈ 50 µs of CPU, a look-up here ≈ 2 µs.

Speed only: only successes are remembered, so removing this memo changes no outcome. Validation
is a pure function of the definition and the config because the registries a definition's
``check``/``schema`` consult (functions, channels, action types) only ever grow: a config valid
once stays valid. Keyed by the definition object itself (held, so its identity cannot be reused)
and the config's canonical JSON. Only a config that *is* its JSON (it reads back equal: no tuple
standing for a list, no ``datetime`` for its ISO text, no NaN) uses the memo, so two configs that
validate differently never share a key. Bounded by count, and a config whose JSON is over
:data:`REMEMBERED_BYTES_MAX` is never remembered (a create's config may be up to 1 MiB).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from actwheel.actions.base import ActionDefinition
from actwheel.errors import FieldError

__all__ = ["REMEMBERED_BYTES_MAX", "ValidConfigs"]

#: The largest config (canonical JSON bytes) the memo keeps: the memo holds at most capacity × this.
REMEMBERED_BYTES_MAX = 16 * 1024


class ValidConfigs:
    """``errors(definition, config)`` = ``definition.validate(config)``, remembered when empty."""

    __slots__ = ("_capacity", "_valid")

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._valid: set[tuple[ActionDefinition, bytes]] = set()

    def errors(self, definition: ActionDefinition, config: Mapping[str, Any]) -> list[FieldError]:
        blob = _plain_json(config)
        if blob is None:  # not plain JSON (cannot come from storage, the bus or HTTP): validate every time
            return definition.validate(config)
        key = (definition, blob)
        if key in self._valid:
            return []
        errors = definition.validate(config)
        if not errors:
            if len(self._valid) >= self._capacity:
                self._valid.clear()
            self._valid.add(key)
        return errors


def _plain_json(config: Mapping[str, Any]) -> bytes | None:
    """The config's canonical JSON when it is small enough to remember and reading it back gives the
    config itself, else None. An ``IntEnum``/``StrEnum`` member reads back equal to its value and so
    shares its key: JSON Schema and every ``check`` here treat them alike."""
    try:
        blob = orjson.dumps(config, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None
    if len(blob) > REMEMBERED_BYTES_MAX:  # never remembered: no read-back for it
        return None
    return blob if orjson.loads(blob) == config else None
