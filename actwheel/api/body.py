"""Reading a request's JSON body: size-bounded, an object, and never echoed back.

A body that fails to parse may hold a secret (``POST /v1/secrets``), so the error
names its size and where parsing stopped, never its bytes. A string holding U+0000 is refused
here (Schemathesis found a 500 on PostgreSQL, whose jsonb and text cannot store it).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from actwheel.errors import InvalidInput

__all__ = ["MAX_BODY", "read_object"]

MAX_BODY = 1 << 20


async def read_object(request: Request, *, max_bytes: int = MAX_BODY) -> dict[str, Any]:
    """The body as a JSON object (``{}`` when empty).

    :raises InvalidInput: ``field="body"``: larger than ``max_bytes``, not JSON, or not an object;
        the path of a string holding U+0000
    """
    raw = await request.body()
    if len(raw) > max_bytes:
        raise InvalidInput("body", f"{len(raw)} bytes", f"at most {max_bytes} bytes")
    try:
        body = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError as exc:
        raise InvalidInput("body", f"{len(raw)} bytes (not shown)", f"valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidInput("body", type(body).__name__, "a JSON object")
    where = _nul_at(body, "")
    if where is not None:  # PostgreSQL's jsonb and text cannot hold U+0000: refused here on both stores alike
        raise InvalidInput(where or "body", "a string with U+0000 (not shown)", "text without NUL characters (U+0000)")
    return body


def _nul_at(value: Any, path: str) -> str | None:
    """The dotted path of the first key or string holding U+0000, else None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            field = f"{path}.{key}" if path else str(key)
            if "\x00" in key:
                return path or "body"
            found = _nul_at(item, field)
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _nul_at(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None
