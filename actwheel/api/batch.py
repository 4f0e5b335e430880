"""``POST /v1/automations/batch``: up to 1,000 automations in one call, all or none.

Body ``{"items": [<create payload>, ...]}``; answer 201 ``{"items": [<automation>, ...]}`` in the
order given. Every bad item is named (``items[3].trigger.expression``) in one 422 and nothing is
stored; each item is checked as ``POST /v1/automations`` checks one (the double-scope rule
included); the caller owns them all. The rules live in
:meth:`~actwheel.service.AutomationService.create_many`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from actwheel.api.body import read_object
from actwheel.api.errors import json_response
from actwheel.api.guard import caller_of
from actwheel.errors import InvalidInput
from actwheel.service import ControlPlane

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
    body = await read_object(request, max_bytes=MAX_BATCH_BODY)  # size, JSON, an object, no U+0000
    if set(body) - {"items"}:
        raise InvalidInput("body", sorted(body), "a JSON object with one field, items")
    return body
