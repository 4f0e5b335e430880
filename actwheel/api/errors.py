"""Map actwheel errors to HTTP answers that name the field and the value."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from actwheel.errors import (
    ActwheelError,
    Conflict,
    InvalidInput,
    NotAvailable,
    NotFound,
    PermissionDenied,
    StorageUnavailable,
    Unsupported,
)

__all__ = ["error_response", "json_response"]


#: HTTP status by error class; subclasses answer like their parents.
_STATUS: tuple[tuple[type[ActwheelError], int], ...] = (
    (NotFound, 404), (Conflict, 409), (PermissionDenied, 403), (NotAvailable, 501), (StorageUnavailable, 503))


def _default(value: Any) -> Any:
    return str(value)


def json_response(payload: Any, status: int = 200) -> Response:
    body = orjson.dumps(payload, default=_default, option=orjson.OPT_NON_STR_KEYS)
    return Response(body, status_code=status, media_type="application/json")


def error_response(exc: ActwheelError) -> Response:
    """The HTTP answer for an error raised while handling a request."""
    if isinstance(exc, InvalidInput):
        return json_response({"error": {
            "type": type(exc).__name__, "message": str(exc), "field": exc.field, "value": exc.value,
            "expected": exc.expected, "errors": [e.as_dict() for e in exc.errors]}}, 422)
    if isinstance(exc, Unsupported):  # the client's request, refused for good: a 4xx, unlike NotAvailable's 501
        return json_response({"error": {
            "type": type(exc).__name__, "code": "unsupported", "message": str(exc), "field": exc.field,
            "value": exc.value, "expected": exc.expected}}, 422)
    status = next((code for kind, code in _STATUS if isinstance(exc, kind)), 500)
    return json_response({"error": {"type": type(exc).__name__, "message": str(exc)}}, status)


async def handle_actwheel_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, ActwheelError)
    return error_response(exc)
