"""Reading a request's JSON body: size-bounded, an object, and never echoed back.

A body that fails to parse may hold a secret (``POST /v1/secrets``), so the error
names its size and where parsing stopped, never its bytes.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from actwheel.errors import InvalidInput

__all__ = ["MAX_BODY", "read_object"]

MAX_BODY = 1 << 20


async def read_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object (``{}`` when empty).

    :raises InvalidInput: ``field="body"``: too large, not JSON, or not an object
    """
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise InvalidInput("body", f"{len(raw)} bytes", f"at most {MAX_BODY} bytes")
    try:
        body = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError as exc:
        raise InvalidInput("body", f"{len(raw)} bytes (not shown)", f"valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidInput("body", type(body).__name__, "a JSON object")
    return body
