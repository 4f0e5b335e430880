"""Who may call which route: one route-policy table, and the guard that applies it.

Every route of the app has exactly one :class:`RoutePolicy` in :data:`ROUTE_POLICIES`, keyed by
``(method, path template)``; :func:`guarded` refuses to build a route without one, and a test lists
every route of the app against the table, so no route can ship unguarded.

The table is the coarse gate (the resource scope of the route); the service layer checks again
and more finely (the double-scope rule, owner isolation in SQL), for every face alike. A route
that can make an action run (``fires=True``: create, batch create, update, enable, run now, retry
a run) is the exception: its scopes are required by the service layer *together with* the
action's, in one check, so its 403 names every missing scope (``automation:write`` and
``webhook:call``, say); the guard only authenticates. A key is read from
``Authorization: Bearer <key>`` only — a key in a query string is ignored.

The dashboard's pages (``/ui/…``) carry ``credential="session"``: their caller comes from the
server-side session in the ``aw_session`` cookie (none, or an ended one, is a 303 to ``/ui/login``),
and every POST must carry the session's CSRF token in its ``csrf`` form field. The live stream
(``/v1/stream``) takes either credential.

``--insecure-no-auth`` (loopback listeners only) swaps the authenticator for one fixed local caller
holding ``*``, and every response then says so in :data:`INSECURE_HEADER`.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from actwheel.errors import PermissionDenied, Unauthenticated
from actwheel.service import Authenticates, Caller
from actwheel.service.sessions import UiSessionCaller

__all__ = ["CSRF_FIELD", "INSECURE_HEADER", "ROUTE_POLICIES", "SESSION_COOKIE", "Handler", "ResolvesSessions",
           "RoutePolicy", "caller_of", "csrf_of", "guarded"]

#: Set on every response while authentication is switched off.
INSECURE_HEADER = "X-Actwheel-Auth"

#: The dashboard's session cookie, and the form field every dashboard POST carries its CSRF token in.
SESSION_COOKIE = "aw_session"
CSRF_FIELD = "csrf"
LOGIN_PATH = "/ui/login"

Handler = Callable[[Request], Awaitable[Response]]


class ResolvesSessions(Protocol):
    """Turns a dashboard session cookie into its caller and CSRF token."""

    async def resolve(self, token: str | None) -> UiSessionCaller:
        """:raises Unauthenticated: no session, or an ended one"""
        ...


@dataclass(frozen=True, slots=True)
class RoutePolicy:
    """What a route needs.

    :ivar scopes: resource scopes the caller must hold (all of them); ``()`` with ``public=False``:
        any valid key
    :ivar public: no credential needed at all
    :ivar ownership: how the service layer scopes what the route reaches — ``owner`` (the caller's
        owner, in SQL; another owner's id is a 404), ``installation`` (shared: the ontology, action
        types), ``admin`` (principals), ``self`` (the caller's own identity), ``none`` (public)
    :ivar credential: what authenticates — ``bearer`` (an API key), ``session`` (the dashboard's
        session cookie; POSTs need its CSRF token), ``either`` (the live stream)
    :ivar fires: the route can leave an automation able to fire: the service layer requires ``scopes``
        with the action's scopes in one check (the double-scope rule), so the guard leaves them to it
        and the 403 names every missing scope; a route with an id answers 404 for an automation the
        caller cannot reach before any 403
    """

    scopes: tuple[str, ...] = ()
    public: bool = False
    ownership: str = "owner"
    credential: str = "bearer"
    fires: bool = False

    def guard_requires(self) -> tuple[str, ...]:
        """The scopes the guard itself checks: none for a ``fires`` route (the service layer does)."""
        return () if self.fires else self.scopes


PUBLIC = RoutePolicy(public=True, ownership="none")
#: A route after which an automation can fire: automation:write and the action's scopes, in the service.
FIRES = RoutePolicy(("automation:write",), fires=True)


def _page(*scopes: str, ownership: str = "owner") -> RoutePolicy:
    return RoutePolicy(scopes, ownership=ownership, credential="session")


#: The dashboard's sign-in form and its static files: no credential (the form checks its own CSRF cookie).
UI_PUBLIC = RoutePolicy(public=True, ownership="none", credential="session")

#: ``(method, path)`` → policy, for every route of the app (MCP and the dashboard add theirs here).
ROUTE_POLICIES: dict[tuple[str, str], RoutePolicy] = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,  # or metrics:read, by ACTWHEEL_METRICS_AUTH (see create_app)
    ("GET", "/openapi.json"): PUBLIC,  # the REST API's OpenAPI document (actwheel.api.openapi)
    ("GET", "/docs"): PUBLIC,  # the same document as a page
    ("GET", "/v1/whoami"): RoutePolicy(ownership="self"),
    ("POST", "/v1/automations"): FIRES,
    ("POST", "/v1/automations/batch"): FIRES,
    ("GET", "/v1/automations"): RoutePolicy(("automation:read",)),
    ("GET", "/v1/automations/{id}"): RoutePolicy(("automation:read",)),
    ("PATCH", "/v1/automations/{id}"): FIRES,
    ("DELETE", "/v1/automations/{id}"): RoutePolicy(("automation:write",)),
    ("POST", "/v1/automations/{id}/enable"): FIRES,
    ("POST", "/v1/automations/{id}/disable"): RoutePolicy(("automation:write",)),
    ("POST", "/v1/automations/{id}/run"): FIRES,
    ("GET", "/v1/runs"): RoutePolicy(("run:read",)),
    ("GET", "/v1/runs/{id}"): RoutePolicy(("run:read",)),
    ("POST", "/v1/actions"): RoutePolicy(("action:request",)),
    ("GET", "/v1/actions/types"): RoutePolicy(ownership="installation"),
    ("POST", "/v1/triggers/preview"): RoutePolicy(ownership="installation"),
    ("POST", "/v1/ontology/types"): RoutePolicy(("ontology:schema",), ownership="installation"),
    ("GET", "/v1/ontology/types"): RoutePolicy(("ontology:read",), ownership="installation"),
    ("GET", "/v1/ontology/objects"): RoutePolicy(("ontology:read",), ownership="installation"),
    ("GET", "/v1/ontology/objects/{id}"): RoutePolicy(("ontology:read",), ownership="installation"),
    ("GET", "/v1/ontology/relations"): RoutePolicy(("ontology:read",), ownership="installation"),
    ("POST", "/v1/secrets"): RoutePolicy(("secret:write",)),
    ("GET", "/v1/secrets"): RoutePolicy(("secret:read",)),
    ("POST", "/v1/keys"): RoutePolicy(("key:write",)),
    ("GET", "/v1/keys"): RoutePolicy(("key:read",)),
    ("DELETE", "/v1/keys/{id}"): RoutePolicy(("key:write",)),
    ("POST", "/v1/keys/{id}/rotate"): RoutePolicy(("key:write",)),
    ("POST", "/v1/principals"): RoutePolicy(("admin:write",), ownership="admin"),
    ("GET", "/v1/principals"): RoutePolicy(("admin:read",), ownership="admin"),
    ("POST", "/v1/principals/{id}/ban"): RoutePolicy(("admin:write",), ownership="admin"),
    ("POST", "/v1/principals/{id}/unban"): RoutePolicy(("admin:write",), ownership="admin"),
    ("PUT", "/v1/principals/{id}/scopes"): RoutePolicy(("admin:write",), ownership="admin"),
    # the ops dashboard's API (issue 13): stats are per owner unless the caller holds admin:read
    ("GET", "/v1/stats"): RoutePolicy(("run:read",)),
    ("GET", "/v1/system"): RoutePolicy(("admin:read",), ownership="admin"),
    ("GET", "/v1/automations/{id}/history"): RoutePolicy(("automation:read",)),
    ("POST", "/v1/automations/bulk"): RoutePolicy(("automation:write",)),
    ("POST", "/v1/runs/bulk-cancel"): RoutePolicy(("run:write",)),
    ("POST", "/v1/runs/{id}/cancel"): RoutePolicy(("run:write",)),
    ("POST", "/v1/runs/{id}/resolve"): RoutePolicy(("run:write",)),
    ("POST", "/v1/runs/{id}/retry"): RoutePolicy(("run:write",), fires=True),  # with the action's, in the service
    ("GET", "/v1/dead-letters"): RoutePolicy(("admin:read",), ownership="admin"),
    ("GET", "/v1/dead-letters/{id}"): RoutePolicy(("admin:read",), ownership="admin"),
    ("DELETE", "/v1/dead-letters/{id}"): RoutePolicy(("admin:write",), ownership="admin"),
    ("POST", "/v1/dead-letters/{id}/requeue"): RoutePolicy(("admin:write",), ownership="admin"),
    # --- MCP (actwheel.mcp.http): any valid key; each tool checks its own scopes, the double-scope rule too
    ("GET", "/mcp"): RoutePolicy(),
    ("POST", "/mcp"): RoutePolicy(),
    ("DELETE", "/mcp"): RoutePolicy(),
    # --- the live stream and the dashboard (actwheel.ui): the session cookie, CSRF on every POST
    ("GET", "/v1/stream"): RoutePolicy(("run:read",), credential="either"),
    ("GET", "/"): UI_PUBLIC,  # a 303 to /ui/
    ("GET", "/ui/static/{path:path}"): UI_PUBLIC,
    ("GET", "/ui/login"): UI_PUBLIC,
    ("POST", "/ui/login"): UI_PUBLIC,
    ("POST", "/ui/logout"): _page(),
    ("GET", "/ui/"): _page("run:read", "automation:read"),
    ("GET", "/ui/automations"): _page("automation:read"),
    ("POST", "/ui/automations/bulk"): _page("automation:write"),
    ("GET", "/ui/automations/{id}"): _page("automation:read"),
    ("POST", "/ui/automations/{id}"): _page("automation:write"),
    ("POST", "/ui/automations/{id}/preview"): _page("automation:read"),
    ("POST", "/ui/automations/{id}/enable"): _page("automation:write"),
    ("POST", "/ui/automations/{id}/disable"): _page("automation:write"),
    ("GET", "/ui/automations/{id}/run"): _page("automation:write"),
    ("POST", "/ui/automations/{id}/run"): _page("automation:write"),
    ("GET", "/ui/automations/{id}/delete"): _page("automation:write"),
    ("POST", "/ui/automations/{id}/delete"): _page("automation:write"),
    ("GET", "/ui/runs"): _page("run:read"),
    ("GET", "/ui/runs/rows"): _page("run:read"),
    ("POST", "/ui/runs/cancel"): _page("run:read", "run:write"),
    ("GET", "/ui/runs/{id}"): _page("run:read"),
    ("POST", "/ui/runs/{id}/cancel"): _page("run:read", "run:write"),
    ("POST", "/ui/runs/{id}/resolve"): _page("run:read", "run:write"),
    ("POST", "/ui/runs/{id}/retry"): _page("run:read", "run:write"),
    ("GET", "/ui/attention"): _page("run:read"),
    ("POST", "/ui/dead-letters/{id}"): _page("admin:write", ownership="admin"),
    ("GET", "/ui/system"): _page(ownership="installation"),
}


def guarded(method: str, path: str, handler: Handler, authenticator: Authenticates, *,
            policy: RoutePolicy | None = None, sessions: ResolvesSessions | None = None) -> Handler:
    """``handler`` behind its policy: the caller is authenticated (by its bearer key or its dashboard
    session, as the policy says), checked, and put on ``request.state.caller``; a session's CSRF token
    on ``request.state.csrf``.

    :raises KeyError: the route has no policy in :data:`ROUTE_POLICIES` (at build time)
    :raises ValueError: a session route built without ``sessions``
    """
    rule = policy or ROUTE_POLICIES[(method, path)]
    if rule.credential != "bearer" and not rule.public and sessions is None:
        raise ValueError(f"{method} {path} authenticates by session: pass sessions=")

    async def endpoint(request: Request) -> Response:
        if not rule.public:
            try:
                caller = await _authenticate(request, rule, authenticator, sessions)
            except Unauthenticated:
                if rule.credential == "session":
                    return RedirectResponse(LOGIN_PATH, status_code=303)
                raise
            missing = caller.grant.missing(rule.guard_requires())
            if missing:
                raise PermissionDenied(caller.who, f"{method} {path}", missing)
            request.state.caller = caller
            if rule.credential == "session" and method == "POST":
                await _check_csrf(request, caller)
        return await handler(request)

    return endpoint


async def _authenticate(request: Request, rule: RoutePolicy, authenticator: Authenticates,
                        sessions: ResolvesSessions | None) -> Caller:
    bearer = _bearer(request)
    if rule.credential == "bearer" or (rule.credential == "either" and bearer is not None):
        return await authenticator.authenticate(bearer)
    assert sessions is not None
    resolved = await sessions.resolve(request.cookies.get(SESSION_COOKIE))
    request.state.csrf = resolved.csrf
    return resolved.caller


async def _check_csrf(request: Request, caller: Caller) -> None:
    """:raises PermissionDenied: the form's ``csrf`` field is missing or not this session's token"""
    sent = (await request.form()).get(CSRF_FIELD)
    if not isinstance(sent, str) or not hmac.compare_digest(sent, request.state.csrf):
        raise PermissionDenied(caller.who, f"{request.method} {request.url.path} without this session's CSRF token")


def csrf_of(request: Request) -> str:
    """The CSRF token of the request's dashboard session (set by :func:`guarded`)."""
    token: str = request.state.csrf
    return token


def caller_of(request: Request) -> Caller:
    """The caller :func:`guarded` authenticated for this request."""
    caller: Caller = request.state.caller
    return caller


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
