"""The ops dashboard's JSON API (issue 13): stats, the system view, automation history, bulk
changes, manual run transitions and dead letters.

Routes: ``GET /v1/stats?window=15m``, ``GET /v1/system``, ``GET /v1/automations/{id}/history``,
``POST /v1/automations/bulk``, ``POST /v1/runs/bulk-cancel``, ``POST /v1/runs/{id}/cancel|resolve|retry``,
``GET /v1/dead-letters``, ``GET|DELETE /v1/dead-letters/{id}``, ``POST /v1/dead-letters/{id}/requeue``.
Each has its policy in :data:`~actwheel.api.guard.ROUTE_POLICIES`; the rules themselves (owner
isolation, the double-scope rule, admin scopes for cross-owner records) are the service's
(:mod:`actwheel.service.operations`, :mod:`~actwheel.service.stats`, :mod:`~actwheel.service.history`),
the same for the dashboard pages.

It also parses the new filters of ``GET /v1/runs`` and ``GET /v1/automations``
(:func:`run_filters`, :func:`automation_filters`), which :mod:`actwheel.api.app` passes on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from actwheel.api.body import read_object
from actwheel.api.errors import json_response
from actwheel.api.guard import caller_of
from actwheel.api.params import enum_param, flag_param, instant_param, limit_param
from actwheel.errors import InvalidInput
from actwheel.service import ControlPlane
from actwheel.service.operations import BulkResult
from actwheel.service.runs import run_cursor
from actwheel.service.stats import parse_window
from actwheel.storage.records import AutomationStatus, Origin, Run, RunStatus

__all__ = ["automation_filters", "operations_routes", "run_filters", "runs_page"]

Route = tuple[str, str, Any]


def operations_routes(control: ControlPlane) -> list[Route]:
    """``(method, path, handler)`` of every route of this module, for :func:`~actwheel.api.app.create_app`."""
    ops = _Operations(control)
    return [
        ("GET", "/v1/stats", ops.stats),
        ("GET", "/v1/system", ops.system),
        ("GET", "/v1/automations/{id}/history", ops.history),
        ("POST", "/v1/automations/bulk", ops.bulk_automations),
        ("POST", "/v1/runs/bulk-cancel", ops.bulk_cancel_runs),
        ("POST", "/v1/runs/{id}/cancel", ops.cancel_run),
        ("POST", "/v1/runs/{id}/resolve", ops.resolve_run),
        ("POST", "/v1/runs/{id}/retry", ops.retry_run),
        ("GET", "/v1/dead-letters", ops.dead_letters),
        ("GET", "/v1/dead-letters/{id}", ops.dead_letter),
        ("DELETE", "/v1/dead-letters/{id}", ops.discard_dead_letter),
        ("POST", "/v1/dead-letters/{id}/requeue", ops.requeue_dead_letter),
    ]


def run_filters(q: QueryParams) -> dict[str, Any]:
    """``GET /v1/runs`` filters as :meth:`RunService.query` keywords: ``status=A,B``, ``created_after``,
    ``created_before``, ``action_type``, ``origin``, ``before=<cursor>``, ``owner_id`` (``*``: every owner,
    admin), ``automation_id``, ``limit``.

    :raises InvalidInput: naming the bad parameter and its value
    """
    statuses = [enum_param(RunStatus, s.strip(), "status") for s in (q.get("status") or "").split(",") if s.strip()]
    owner = q.get("owner_id")
    return {
        "owner_id": None if owner == "*" else owner, "any_owner": owner == "*",
        "automation_id": q.get("automation_id"),
        "statuses": [s for s in statuses if s is not None] or None,
        "created_after": _instant(q, "created_after"), "created_before": _instant(q, "created_before"),
        "action_type": q.get("action_type"), "origin": enum_param(Origin, q.get("origin"), "origin"),
        "before": q.get("before"), "limit": limit_param(q.get("limit")),
    }


def runs_page(runs: list[Run], limit: int) -> dict[str, Any]:
    """A page of runs with the cursor of the next one (``next``: None on the last page)."""
    return {"items": runs, "next": run_cursor(runs[-1]) if len(runs) == limit and runs else None}


def automation_filters(q: QueryParams) -> dict[str, Any]:
    """``GET /v1/automations`` filters as :meth:`AutomationService.query` keywords: ``q`` (name contains),
    ``enabled``, ``action_type``, ``label.<key>=<value>`` besides the older ones.

    :raises InvalidInput: naming the bad parameter and its value
    """
    labels = {key.removeprefix("label."): value for key, value in q.multi_items() if key.startswith("label.")}
    if any(not key for key in labels):
        raise InvalidInput("label.", "", "label.<key>=<value>")
    return {
        "owner_id": q.get("owner_id"), "session_id": q.get("session_id"), "agent_id": q.get("agent_id"),
        "status": enum_param(AutomationStatus, q.get("status"), "status"), "after_id": q.get("after_id"),
        "limit": limit_param(q.get("limit")),
        "enabled": None if q.get("enabled") is None else flag_param(q.get("enabled"), "enabled"),
        "name_contains": q.get("q") or None, "action_type": q.get("action_type"), "labels": labels or None,
    }


def _instant(q: QueryParams, name: str) -> Any:
    value = q.get(name)
    return None if value is None else instant_param(value, name)


class _Operations:
    def __init__(self, control: ControlPlane) -> None:
        self._control = control
        self._ops = control.operations

    async def stats(self, request: Request) -> Response:
        q = request.query_params
        window = parse_window(q.get("window"))
        attention = None if q.get("attention") is None else parse_window(q.get("attention"))
        return json_response(await self._control.stats.stats(caller_of(request), window=window, attention=attention))

    async def system(self, request: Request) -> Response:
        return json_response(await self._control.stats.system(caller_of(request)))

    async def history(self, request: Request) -> Response:
        q = request.query_params
        after = q.get("after_seq")
        if after is not None and not after.isdigit():
            raise InvalidInput("after_seq", after, "the seq of the last entry seen")
        entries = await self._control.history.history(
            caller_of(request), request.path_params["id"], after_seq=None if after is None else int(after),
            limit=limit_param(q.get("limit")))
        return json_response({"items": entries})

    async def bulk_automations(self, request: Request) -> Response:
        body = await read_object(request)
        result = await self._ops.bulk_automations(
            caller_of(request), body.get("op", ""), ids=body.get("ids"), filter=body.get("filter"),
            dry_run=_dry_run(body), note=body.get("note"))
        return _bulk(result)

    async def bulk_cancel_runs(self, request: Request) -> Response:
        body = await read_object(request)
        result = await self._ops.bulk_cancel_runs(
            caller_of(request), ids=body.get("ids"), filter=body.get("filter"), dry_run=_dry_run(body),
            note=body.get("note"))
        return _bulk(result)

    async def cancel_run(self, request: Request) -> Response:
        body = await read_object(request)
        return json_response(await self._ops.cancel_run(caller_of(request), request.path_params["id"],
                                                        note=body.get("note")))

    async def resolve_run(self, request: Request) -> Response:
        body = await read_object(request)
        return json_response(await self._ops.resolve_run(caller_of(request), request.path_params["id"],
                                                         body.get("outcome", ""), body.get("note")))

    async def retry_run(self, request: Request) -> Response:
        inserted = await self._ops.retry_run(caller_of(request), request.path_params["id"])
        return json_response({"run_id": inserted.run.id, "run": inserted.run, "created": inserted.created},
                             202 if inserted.created else 200)

    async def dead_letters(self, request: Request) -> Response:
        q = request.query_params
        letters = await self._ops.dead_letters(caller_of(request), source=q.get("source"),
                                               limit=limit_param(q.get("limit")))
        return json_response({"items": letters})

    async def dead_letter(self, request: Request) -> Response:
        return json_response(await self._ops.dead_letter(caller_of(request), request.path_params["id"]))

    async def discard_dead_letter(self, request: Request) -> Response:
        return json_response(await self._ops.discard_dead_letter(caller_of(request), request.path_params["id"]))

    async def requeue_dead_letter(self, request: Request) -> Response:
        return json_response(await self._ops.requeue_dead_letter(caller_of(request), request.path_params["id"]),
                             202)


def _dry_run(body: dict[str, Any]) -> bool:
    value = body.get("dry_run", False)
    if not isinstance(value, bool):
        raise InvalidInput("dry_run", value, "true or false")
    return value


def _bulk(result: BulkResult) -> Response:
    return json_response(dataclasses.asdict(result))
