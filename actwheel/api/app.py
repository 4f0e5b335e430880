"""The HTTP face: JSON API, health, readiness and Prometheus metrics.

Routes (exact): ``POST/GET /v1/automations``, ``GET/PATCH/DELETE /v1/automations/{id}``,
``POST /v1/automations/{id}/enable|disable|run``, ``GET /v1/runs``, ``GET /v1/runs/{id}``
(with its audit trail), ``POST /v1/actions``, ``GET /v1/actions/types``,
``POST /v1/triggers/preview``, ``GET /healthz``, ``GET /readyz``, ``GET /metrics``, and the ontology
and secrets routes of :mod:`actwheel.api.ontology`.
Until authentication exists every request acts as the local owner.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from actwheel.api.body import read_object
from actwheel.api.errors import handle_actwheel_error, json_response
from actwheel.api.ontology import ontology_routes
from actwheel.errors import ActwheelError, FieldError, InvalidInput, InvalidTrigger
from actwheel.messages import ActionRequested
from actwheel.service import Caller, trigger_field
from actwheel.storage.records import AutomationStatus, RunStatus
from actwheel.triggers import preview_fires

__all__ = ["create_app"]

_MAX_PREVIEW = 500

def create_app(engine: Any) -> Starlette:
    """The ASGI app for ``engine`` (an :class:`actwheel.engine.Engine`)."""
    api = _Api(engine)
    routes = [
        Route("/healthz", api.healthz), Route("/readyz", api.readyz), Route("/metrics", api.metrics),
        Route("/v1/automations", api.create_automation, methods=["POST"]),
        Route("/v1/automations", api.list_automations, methods=["GET"]),
        Route("/v1/automations/{id}", api.get_automation, methods=["GET"]),
        Route("/v1/automations/{id}", api.update_automation, methods=["PATCH"]),
        Route("/v1/automations/{id}", api.delete_automation, methods=["DELETE"]),
        Route("/v1/automations/{id}/enable", api.enable_automation, methods=["POST"]),
        Route("/v1/automations/{id}/disable", api.disable_automation, methods=["POST"]),
        Route("/v1/automations/{id}/run", api.run_automation, methods=["POST"]),
        Route("/v1/runs", api.list_runs, methods=["GET"]),
        Route("/v1/runs/{id}", api.get_run, methods=["GET"]),
        Route("/v1/actions", api.submit_action, methods=["POST"]),
        Route("/v1/actions/types", api.action_types, methods=["GET"]),
        Route("/v1/triggers/preview", api.preview, methods=["POST"]),
        *ontology_routes(engine),
    ]
    return Starlette(routes=routes, exception_handlers={ActwheelError: handle_actwheel_error})


class _Api:
    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.caller = Caller(engine.settings.local_owner)

    async def healthz(self, request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        ready = bool(self.engine.ready)
        return json_response({"ready": ready, "actors": _actor_states(self.engine)}, 200 if ready else 503)

    async def metrics(self, request: Request) -> Response:
        return Response(self.engine.metrics.render(), media_type="text/plain; version=0.0.4")

    # --- automations ---------------------------------------------------------------------

    async def create_automation(self, request: Request) -> Response:
        automation = await self.engine.service.create(self.caller, await read_object(request))
        return json_response(automation, 201)

    async def list_automations(self, request: Request) -> Response:
        q = request.query_params
        status = _enum(AutomationStatus, q.get("status"), "status")
        automations = await self.engine.service.query(
            owner_id=q.get("owner_id"), session_id=q.get("session_id"), agent_id=q.get("agent_id"),
            status=status, after_id=q.get("after_id"), limit=_limit(q.get("limit")))
        return json_response({"items": automations})

    async def get_automation(self, request: Request) -> Response:
        return json_response(await self.engine.service.get(request.path_params["id"]))

    async def update_automation(self, request: Request) -> Response:
        body = await read_object(request)
        version = body.pop("version", None)
        if not isinstance(version, int) or isinstance(version, bool):
            raise InvalidInput("version", version, "the automation's current version (optimistic locking)")
        return json_response(await self.engine.service.update(request.path_params["id"], body, version))

    async def delete_automation(self, request: Request) -> Response:
        deleted = await self.engine.service.delete(request.path_params["id"])
        return json_response(deleted)

    async def enable_automation(self, request: Request) -> Response:
        automation, _ = await self.engine.service.set_enabled(request.path_params["id"], True)
        return json_response(automation)

    async def disable_automation(self, request: Request) -> Response:
        automation, canceled = await self.engine.service.set_enabled(request.path_params["id"], False)
        return json_response({"automation": automation, "canceled_run_ids": canceled})

    async def run_automation(self, request: Request) -> Response:
        run = await self.engine.service.run_now(self.caller, request.path_params["id"])
        return json_response({"run_id": run.id, "run": run}, 202)

    # --- runs ----------------------------------------------------------------------------

    async def list_runs(self, request: Request) -> Response:
        q = request.query_params
        status = _enum(RunStatus, q.get("status"), "status")
        async with self.engine.store.transaction() as tx:
            runs = await tx.runs.query(automation_id=q.get("automation_id"),
                                       statuses=[status] if status else None, limit=_limit(q.get("limit")))
        return json_response({"items": runs})

    async def get_run(self, request: Request) -> Response:
        async with self.engine.store.transaction() as tx:
            run = await tx.runs.get(request.path_params["id"])
            trail = await tx.audit.trail(run.id)
        return json_response({**dataclasses.asdict(run), "audit": trail})

    # --- actions -------------------------------------------------------------------------

    async def submit_action(self, request: Request) -> Response:
        body = await read_object(request)
        body.setdefault("owner_id", self.caller.owner_id)
        message = _action_request(body)
        inserted = await self.engine.service.submit_action(self.caller, message)
        run = inserted.run
        payload = {"run_id": run.id, "status": run.status, "duplicate": not inserted.created}
        if not inserted.created:
            payload["result"] = run.result
        return json_response(payload, 202 if inserted.created else 200)

    async def action_types(self, request: Request) -> Response:
        return json_response({"items": [d.describe() for d in self.engine.registry]})

    async def preview(self, request: Request) -> Response:
        body = await read_object(request)
        count = body.get("count", 10)
        if not isinstance(count, int) or isinstance(count, bool) or not 0 < count <= _MAX_PREVIEW:
            raise InvalidInput("count", count, f"an integer from 1 to {_MAX_PREVIEW}")
        after = _instant(body.get("from")) if body.get("from") is not None else self.engine.clock.now()
        trigger = body.get("trigger")
        if not isinstance(trigger, dict):
            raise InvalidInput("trigger", trigger, "a trigger spec object")
        try:
            fires = preview_fires(trigger, after=after, count=count)
        except InvalidTrigger as exc:  # name fields from the body root, as POST /v1/automations does
            raise InvalidInput.collect([FieldError(trigger_field(e.field), e.value, e.expected)
                                        for e in exc.errors]) from None
        return json_response({"fires": [{"at": f.at.isoformat(), "note": f.note} for f in fires]})


def _action_request(body: dict[str, Any]) -> ActionRequested:
    try:
        return ActionRequested.from_data(body)
    except InvalidInput as exc:
        raise InvalidInput.collect([FieldError(e.field.removeprefix("data."), e.value, e.expected)
                                    for e in exc.errors]) from None


def _enum(kind: Any, value: str | None, name: str) -> Any:
    if value is None:
        return None
    try:
        return kind(value.upper())
    except ValueError:
        raise InvalidInput(name, value, "one of " + ", ".join(m.value for m in kind)) from None


def _limit(value: str | None) -> int:
    if value is None:
        return 100
    if not value.isdigit() or not 0 < int(value) <= 1000:
        raise InvalidInput("limit", value, "an integer from 1 to 1000")
    return int(value)


def _instant(value: Any) -> datetime:
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InvalidInput("from", value, "an ISO-8601 instant with an offset")
    return parsed


def _actor_states(engine: Any) -> dict[str, str]:
    return {name: actor.state.value for name, actor in engine.actors.items()}
