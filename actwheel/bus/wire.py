"""Message headers as they travel, shared by both adapters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actwheel.bus.envelope import SCHEMA_VERSION, SCHEMA_VERSION_HEADER
from actwheel.errors import InvalidInput

__all__ = ["headers_per_item", "message_headers"]

_SCALARS = (str, int, float, bool, type(None))


def message_headers(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The headers of an envelope message: the caller's scalars plus ``x-schema-version``.

    :raises InvalidInput: a header name is not a string or a value is not a scalar
    """
    headers: dict[str, Any] = {}
    for name, value in (extra or {}).items():
        if not isinstance(name, str) or not name:
            raise InvalidInput("headers", name, "non-empty string header names")
        if not isinstance(value, _SCALARS):
            raise InvalidInput(f"headers.{name}", value, "a string, number, boolean or None")
        headers[name] = value
    headers[SCHEMA_VERSION_HEADER] = SCHEMA_VERSION
    return headers


def headers_per_item(items: Sequence[Any],
                     headers: Sequence[Mapping[str, Any] | None] | None) -> Sequence[Mapping[str, Any] | None]:
    """``publish_many``'s headers, one per item (``None``: none for any).

    :raises InvalidInput: ``headers`` is not as long as ``items``
    """
    if headers is None:
        return [None] * len(items)
    if len(headers) != len(items):
        raise InvalidInput("headers", len(headers), f"one per item ({len(items)})")
    return headers
