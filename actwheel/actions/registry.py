"""The action registry: one definition per type, reachable by its dotted type or an alias.

Registration is explicit (:meth:`ActionRegistry.register`); :func:`actwheel.actions.defaults.default_registry`
builds the built-ins by name. This module depends on the action port alone, so an executor
(the composite) can take a registry without an import cycle. Adding an action type is one new definition and one
``register`` call: no scheduler, worker or pipeline code changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from actwheel.actions.base import ActionDefinition
from actwheel.errors import DuplicateActionType, InvalidAction

__all__ = ["ActionRegistry"]

_TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


class ActionRegistry:
    """Action definitions by type and alias. Lookups are case-sensitive and exact."""

    def __init__(self) -> None:
        self._by_type: dict[str, ActionDefinition] = {}
        self._aliases: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"ActionRegistry({', '.join(self._by_type)})"

    def __contains__(self, name: object) -> bool:
        return name in self._by_type or name in self._aliases

    def __iter__(self) -> Iterator[ActionDefinition]:
        return iter(self._by_type.values())

    def __len__(self) -> int:
        return len(self._by_type)

    def register(self, definition: ActionDefinition) -> ActionDefinition:
        """Add ``definition`` under its type and aliases, atomically (all names or none).

        :raises InvalidAction: the type is not dotted lower-case
        :raises DuplicateActionType: the type or an alias is already taken
        """
        if not _TYPE_PATTERN.match(definition.type):
            raise InvalidAction("type", definition.type, "a dotted lower-case name such as 'webhook.call'")
        names = [("type", definition.type), *(("alias", a) for a in definition.aliases)]
        seen: set[str] = set()
        for field, name in names:
            if name in self or name in seen:
                raise DuplicateActionType(field, name, "a name not registered yet")
            seen.add(name)
        self._by_type[definition.type] = definition
        self._aliases.update(dict.fromkeys(definition.aliases, definition.type))
        return definition

    def get(self, type_or_alias: str) -> ActionDefinition:
        """The definition for a type or alias.

        :raises InvalidAction: unknown; field ``type``, listing the known types
        """
        name = self._aliases.get(type_or_alias, type_or_alias)
        definition = self._by_type.get(name) if isinstance(name, str) else None
        if definition is None:
            raise InvalidAction("type", type_or_alias, "one of " + ", ".join(self.types()))
        return definition

    def canonical(self, type_or_alias: str) -> str:
        """The dotted type for a type or alias. :raises InvalidAction: unknown"""
        return self.get(type_or_alias).type

    def types(self) -> list[str]:
        """Every registered type, sorted."""
        return sorted(self._by_type)

    def aliases(self) -> dict[str, str]:
        """Alias → dotted type."""
        return dict(self._aliases)
