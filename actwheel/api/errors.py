"""Map actwheel errors to HTTP answers that name the field and the value."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from actwheel.errors import (
    ActwheelError,
    Busy,
    Conflict,
    InvalidInput,
    NotAvailable,
    NotFound,
    PermissionDenied,
    StorageFull,
    StorageUnavailable,
    Unauthenticated,
    Unsupported,
)

__all__ = ["RETRY_AFTER_S", "error_response", "json_response"]

#: ``Retry-After`` (seconds) of every 503: the database is away, or the instance is at a limit or stopping.
RETRY_AFTER_S = 5


#: HTTP status by error class; subclasses answer like their parents.
_STATUS: tuple[tuple[type[ActwheelError], int], ...] = (
    (NotFound, 404), (Conflict, 409), (PermissionDenied, 403), (NotAvailable, 501), (StorageFull, 507),
    (StorageUnavailable, 503), (Busy, 503))


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
    if isinstance(exc, Unauthenticated):
        return _unauthenticated(exc)
    if isinstance(exc, PermissionDenied):
        return _forbidden(exc)
    status = next((code for kind, code in _STATUS if isinstance(exc, kind)), 500)
    if isinstance(exc, StorageFull):  # the operator's fix is on the machine: say so in a searchable code
        return json_response({"error": {"type": "StorageFull", "code": "storage_full", "message": str(exc)}}, status)
    response = json_response({"error": {"type": type(exc).__name__, "message": str(exc)}}, status)
    if status == 503:  # refused for now, not for good (RFC 9110 §10.2.3): say when to come back
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


_REALM = 'Bearer realm="actwheel"'


def _unauthenticated(exc: Unauthenticated) -> Response:
    """RFC 6750: 401 with a challenge; ``invalid_token`` when a credential was sent and refused."""
    code = "invalid_token" if exc.token_sent else "missing_token"
    response = json_response({"error": {"type": type(exc).__name__, "code": code, "message": str(exc)}}, 401)
    challenge = _REALM + (', error="invalid_token"' if exc.token_sent else "")
    response.headers["WWW-Authenticate"] = challenge
    return response


def _forbidden(exc: PermissionDenied) -> Response:
    """RFC 6750: 403 ``insufficient_scope`` naming every missing scope."""
    code = "insufficient_scope" if exc.missing else "forbidden"
    response = json_response({"error": {"type": type(exc).__name__, "code": code, "message": str(exc),
                                        "missing_scopes": list(exc.missing)}}, 403)
    if exc.missing:
        response.headers["WWW-Authenticate"] = (_REALM + ', error="insufficient_scope", scope="'
                                                + " ".join(exc.missing) + '"')
    return response


async def handle_actwheel_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, ActwheelError)
    return error_response(exc)
