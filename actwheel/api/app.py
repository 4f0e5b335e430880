"""The HTTP face: JSON API, health, readiness and Prometheus metrics.

Routes (exact): ``POST/GET /v1/automations``, ``GET/PATCH/DELETE /v1/automations/{id}``,
``POST /v1/automations/{id}/enable|disable|run``, ``GET /v1/runs``, ``GET /v1/runs/{id}``
(with its audit trail), ``POST /v1/actions``, ``GET /v1/actions/types``,
``POST /v1/triggers/preview``, ``GET /v1/stream`` (:mod:`actwheel.api.stream`), ``GET /healthz``,
``GET /readyz``, ``GET /metrics``, ``GET /openapi.json`` and ``GET /docs`` (:mod:`actwheel.api.openapi`), the
ontology and secrets routes of :mod:`actwheel.api.ontology`, and
``GET/POST/DELETE /mcp``: the MCP server over streamable HTTP (:mod:`actwheel.mcp.http`; its session
manager serves only inside ``endpoint_of(app).running()``).

Handlers only translate: request → :class:`~actwheel.service.Caller` (authenticated by
:mod:`actwheel.api.guard` from the bearer key) + arguments → a use case of the
:class:`~actwheel.service.ControlPlane` → JSON. The identity routes (whoami, keys, principals) are in
:mod:`actwheel.api.identity`; the dashboard's pages (``GET /`` → ``/ui/``) in :mod:`actwheel.ui`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from actwheel.api.batch import batch_routes
from actwheel.api.body import read_object
from actwheel.api.errors import handle_actwheel_error, json_response
from actwheel.api.guard import Handler, RoutePolicy, caller_of, guarded
from actwheel.api.identity import InsecureMarker, identity_routes
from actwheel.api.ontology import ontology_routes
from actwheel.api.openapi import openapi_routes
from actwheel.api.operations import automation_filters, operations_routes, run_filters, runs_page
from actwheel.api.params import instant_param
from actwheel.api.stream import stream_routes
from actwheel.errors import ActwheelError, FieldError, InvalidInput
from actwheel.mcp.http import MCP_METHODS, MCP_PATH, McpEndpoint
from actwheel.messages import ActionRequested
from actwheel.service import ControlPlane
from actwheel.ui import LocalSessions, html_errors, ui_routes

__all__ = ["create_app"]


def create_app(control: ControlPlane) -> Starlette:
    """The ASGI app over ``control`` (an engine's :attr:`~actwheel.engine.Engine.control`).

    Every route is guarded by its entry in :data:`~actwheel.api.guard.ROUTE_POLICIES`; building a
    route without one fails here.
    """
    api = _Api(control)
    mcp = McpEndpoint(control)
    routes = [
        ("GET", "/healthz", api.healthz), ("GET", "/readyz", api.readyz), ("GET", "/metrics", api.metrics),
        *openapi_routes(),
        ("POST", "/v1/automations", api.create_automation),
        *batch_routes(control),
        ("GET", "/v1/automations", api.list_automations),
        ("GET", "/v1/automations/{id}", api.get_automation),
        ("PATCH", "/v1/automations/{id}", api.update_automation),
        ("DELETE", "/v1/automations/{id}", api.delete_automation),
        ("POST", "/v1/automations/{id}/enable", api.enable_automation),
        ("POST", "/v1/automations/{id}/disable", api.disable_automation),
        ("POST", "/v1/automations/{id}/run", api.run_automation),
        ("GET", "/v1/runs", api.list_runs),
        ("GET", "/v1/runs/{id}", api.get_run),
        ("POST", "/v1/actions", api.submit_action),
        ("GET", "/v1/actions/types", api.action_types),
        ("POST", "/v1/triggers/preview", api.preview),
        *ontology_routes(control),
        *operations_routes(control),
        *identity_routes(control),
        *((method, MCP_PATH, mcp.handle) for method in MCP_METHODS),
        *stream_routes(control),
    ]
    insecure = not control.settings.auth
    sessions = LocalSessions(control.authenticator) if insecure else control.sessions
    endpoints = [(method, path, guarded(method, path, handler, control.authenticator,
                                        policy=_metrics_policy(control) if path == "/metrics" else None,
                                        sessions=sessions))
                 for method, path, handler in routes]
    endpoints += [(method, path, html_errors(guarded(method, path, handler, control.authenticator, sessions=sessions)))
                  for method, path, handler in ui_routes(control)]
    middleware = [Middleware(InsecureMarker)] if insecure else []
    app = Starlette(routes=_routes_by_path(endpoints), middleware=middleware,
                    exception_handlers={ActwheelError: handle_actwheel_error})
    app.state.mcp = mcp
    return app


def _routes_by_path(endpoints: list[tuple[str, str, Handler]]) -> list[Route]:
    """One :class:`Route` per path with every method of it, so a 405 names in ``Allow`` the methods of the
    path asked for (RFC 9110 §15.5.6): a route per method answered with that one only. Literal paths come
    first (``/v1/automations/bulk`` before ``/v1/automations/{id}``): Starlette answers a 405 from the
    first route whose path matches, and a request goes to the most specific path that has its method."""
    by_path: dict[str, dict[str, Handler]] = {}
    for method, path, endpoint in endpoints:
        methods = by_path.setdefault(path, {})
        if method in methods:
            raise ValueError(f"{method} {path} twice in the route table")
        methods[method] = endpoint
    ordered = sorted(by_path.items(), key=lambda item: item[0].count("{"))  # stable: the table's order otherwise
    return [Route(path, _dispatch(methods), methods=list(methods)) for path, methods in ordered]


def _dispatch(methods: dict[str, Handler]) -> Handler:
    async def endpoint(request: Request) -> Response:
        return await methods["GET" if request.method == "HEAD" else request.method](request)

    return endpoint


def _metrics_policy(control: ControlPlane) -> RoutePolicy | None:
    """``/metrics`` is public by default (the Prometheus convention); ``ACTWHEEL_METRICS_AUTH`` makes it
    require ``metrics:read``."""
    return RoutePolicy(("metrics:read",), ownership="installation") if control.settings.metrics_auth else None


class _Api:
    def __init__(self, control: ControlPlane) -> None:
        self._control = control
        self._automations = control.automations

    async def healthz(self, request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        status = self._control.status
        ready = status.ready
        return json_response({"ready": ready, "actors": status.actor_states()}, 200 if ready else 503)

    async def metrics(self, request: Request) -> Response:
        return Response(self._control.status.metrics_text(), media_type="text/plain; version=0.0.4")

    # --- automations ---------------------------------------------------------------------

    async def create_automation(self, request: Request) -> Response:
        automation = await self._automations.create(caller_of(request), await read_object(request))
        return json_response(automation, 201)

    async def list_automations(self, request: Request) -> Response:
        automations = await self._automations.query(caller_of(request), **automation_filters(request.query_params))
        return json_response({"items": automations})

    async def get_automation(self, request: Request) -> Response:
        return json_response(await self._automations.get(caller_of(request), request.path_params["id"]))

    async def update_automation(self, request: Request) -> Response:
        body = await read_object(request)
        version = body.pop("version", None)
        if not isinstance(version, int) or isinstance(version, bool):
            raise InvalidInput("version", version, "the automation's current version (optimistic locking)")
        updated = await self._automations.update(caller_of(request), request.path_params["id"], body, version)
        return json_response(updated)

    async def delete_automation(self, request: Request) -> Response:
        return json_response(await self._automations.delete(caller_of(request), request.path_params["id"]))

    async def enable_automation(self, request: Request) -> Response:
        automation, _ = await self._automations.set_enabled(caller_of(request), request.path_params["id"], True)
        return json_response(automation)

    async def disable_automation(self, request: Request) -> Response:
        automation, canceled = await self._automations.set_enabled(caller_of(request), request.path_params["id"], False)
        return json_response({"automation": automation, "canceled_run_ids": canceled})

    async def run_automation(self, request: Request) -> Response:
        run = await self._automations.run_now(caller_of(request), request.path_params["id"])
        return json_response({"run_id": run.id, "run": run}, 202)

    # --- runs ----------------------------------------------------------------------------

    async def list_runs(self, request: Request) -> Response:
        filters = run_filters(request.query_params)
        runs = await self._control.runs.query(caller_of(request), **filters)
        return json_response(runs_page(runs, filters["limit"]))

    async def get_run(self, request: Request) -> Response:
        found = await self._control.runs.get(caller_of(request), request.path_params["id"])
        return json_response({**dataclasses.asdict(found.run), "audit": found.audit})

    # --- actions -------------------------------------------------------------------------

    async def submit_action(self, request: Request) -> Response:
        body = await read_object(request)
        body.setdefault("owner_id", caller_of(request).owner_id)
        inserted = await self._control.actions.submit(caller_of(request), _action_request(body))
        run = inserted.run
        payload = {"run_id": run.id, "status": run.status, "duplicate": not inserted.created}
        if not inserted.created:
            payload["result"] = run.result
        return json_response(payload, 202 if inserted.created else 200)

    async def action_types(self, request: Request) -> Response:
        return json_response({"items": [d.describe() for d in self._control.actions.types(caller_of(request))]})

    async def preview(self, request: Request) -> Response:
        body = await read_object(request)
        after = instant_param(body["from"], "from") if body.get("from") is not None else None
        fires = self._control.triggers.preview(caller_of(request), body.get("trigger"), count=body.get("count", 10),
                                               after=after)
        return json_response({"fires": [{"at": f.at.isoformat(), "note": f.note} for f in fires]})


def _action_request(body: dict[str, Any]) -> ActionRequested:
    try:
        return ActionRequested.from_data(body)
    except InvalidInput as exc:
        raise InvalidInput.collect([FieldError(e.field.removeprefix("data."), e.value, e.expected)
                                    for e in exc.errors]) from None
