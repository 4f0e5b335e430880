"""``POST /v1/automations/batch``: up to 1,000 automations in one call, all or none.

Body ``{"items": [<create payload>, ...]}``; answer 201 ``{"items": [<automation>, ...]}`` in the
order given. Every bad item is named (``items[3].trigger.expression``) in one 422 and nothing is
stored; each item is checked as ``POST /v1/automations`` checks one (the double-scope rule
included); the caller owns them all. The rules live in
:meth:`~actwheel.service.AutomationService.create_many`.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from actwheel.api.errors import json_response
from actwheel.api.guard import caller_of
from actwheel.errors import InvalidInput
from actwheel.service import ControlPlane
from actwheel.service.automations import MAX_BATCH

__all__ = ["MAX_BATCH_BODY", "batch_routes"]

#: A batch body's limit: 1,000 payloads of up to ~8 KiB each.
MAX_BATCH_BODY = 8 << 20


def batch_routes(control: ControlPlane) -> list[tuple[str, str, Any]]:
    """``(method, path, handler)`` of this module's route, for :func:`~actwheel.api.app.create_app`."""
    automations = control.automations

    async def create_batch(request: Request) -> Response:
        body = await _read_batch(request)
        created = await automations.create_many(caller_of(request), body.get("items"))
        return json_response({"items": created}, 201)

    return [("POST", "/v1/automations/batch", create_batch)]


async def _read_batch(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BATCH_BODY:
        raise InvalidInput("body", f"{len(raw)} bytes", f"at most {MAX_BATCH_BODY} bytes ({MAX_BATCH} items)")
    try:
        body = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError:
        raise InvalidInput("body", f"{len(raw)} bytes (not shown)", "a JSON object {\"items\": [...]}") from None
    if not isinstance(body, dict) or set(body) - {"items"}:
        raise InvalidInput("body", body if not isinstance(body, dict) else sorted(body),
                           "a JSON object with one field, items")
    return body
