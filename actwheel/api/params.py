"""Query-string parameters, parsed once for every route: each bad one names itself and its value."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from actwheel.errors import InvalidInput

__all__ = ["MAX_LIMIT", "enum_param", "flag_param", "instant_param", "limit_param"]

#: The largest page any list route answers.
MAX_LIMIT = 1000
_DEFAULT_LIMIT = 100
_FLAGS = {"true": True, "1": True, "false": False, "0": False}

E = TypeVar("E", bound=Enum)


def limit_param(value: str | None) -> int:
    if value is None:
        return _DEFAULT_LIMIT
    if not value.isdigit() or not 0 < int(value) <= MAX_LIMIT:
        raise InvalidInput("limit", value, f"an integer from 1 to {MAX_LIMIT}")
    return int(value)


def enum_param(kind: type[E], value: str | None, name: str) -> E | None:
    if value is None:
        return None
    for candidate in (value, value.upper(), value.lower()):
        try:
            return kind(candidate)
        except ValueError:
            continue
    raise InvalidInput(name, value, "one of " + ", ".join(str(m.value) for m in kind))


def flag_param(value: str | None, name: str) -> bool:
    if value is None:
        return False
    if value.lower() not in _FLAGS:
        raise InvalidInput(name, value, "true or false")
    return _FLAGS[value.lower()]


def instant_param(value: Any, name: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InvalidInput(name, value, "an ISO-8601 instant with an offset")
    return parsed
