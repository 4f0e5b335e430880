"""Who may call which route: one route-policy table, and the guard that applies it.

Every route of the app has exactly one :class:`RoutePolicy` in :data:`ROUTE_POLICIES`, keyed by
``(method, path template)``; :func:`guarded` refuses to build a route without one, and a test lists
every route of the app against the table, so no route can ship unguarded.

The table is the coarse gate (the resource scope of the route); the service layer checks again
and more finely (the double-scope rule, owner isolation in SQL), for every face alike. A key is
read from ``Authorization: Bearer <key>`` only — a key in a query string is ignored.

``--insecure-no-auth`` (loopback listeners only) swaps the authenticator for one fixed local caller
holding ``*``, and every response then says so in :data:`INSECURE_HEADER`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from actwheel.errors import PermissionDenied
from actwheel.service import Authenticates, Caller

__all__ = ["INSECURE_HEADER", "ROUTE_POLICIES", "Handler", "RoutePolicy", "caller_of", "guarded"]

#: Set on every response while authentication is switched off.
INSECURE_HEADER = "X-Actwheel-Auth"

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class RoutePolicy:
    """What a route needs.

    :ivar scopes: resource scopes the caller must hold (all of them); ``()`` with ``public=False``:
        any valid key
    :ivar public: no credential needed at all
    :ivar ownership: how the service layer scopes what the route reaches — ``owner`` (the caller's
        owner, in SQL; another owner's id is a 404), ``installation`` (shared: the ontology, action
        types), ``admin`` (principals), ``self`` (the caller's own identity), ``none`` (public)
    """

    scopes: tuple[str, ...] = ()
    public: bool = False
    ownership: str = "owner"


PUBLIC = RoutePolicy(public=True, ownership="none")

#: ``(method, path)`` → policy, for every route of the app (MCP and the dashboard add theirs here).
ROUTE_POLICIES: dict[tuple[str, str], RoutePolicy] = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,  # or metrics:read, by ACTWHEEL_METRICS_AUTH (see create_app)
    ("GET", "/v1/whoami"): RoutePolicy(ownership="self"),
    ("POST", "/v1/automations"): RoutePolicy(("automation:write",)),
    ("GET", "/v1/automations"): RoutePolicy(("automation:read",)),
    ("GET", "/v1/automations/{id}"): RoutePolicy(("automation:read",)),
    ("PATCH", "/v1/automations/{id}"): RoutePolicy(("automation:write",)),
    ("DELETE", "/v1/automations/{id}"): RoutePolicy(("automation:write",)),
    ("POST", "/v1/automations/{id}/enable"): RoutePolicy(("automation:write",)),
    ("POST", "/v1/automations/{id}/disable"): RoutePolicy(("automation:write",)),
    ("POST", "/v1/automations/{id}/run"): RoutePolicy(("automation:write",)),
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
}


def guarded(method: str, path: str, handler: Handler, authenticator: Authenticates, *,
            policy: RoutePolicy | None = None) -> Handler:
    """``handler`` behind its policy: the caller is authenticated, checked, and put on
    ``request.state.caller``.

    :raises KeyError: the route has no policy in :data:`ROUTE_POLICIES` (at build time)
    """
    rule = policy or ROUTE_POLICIES[(method, path)]

    async def endpoint(request: Request) -> Response:
        if not rule.public:
            caller = await authenticator.authenticate(_bearer(request))
            missing = caller.grant.missing(rule.scopes)
            if missing:
                raise PermissionDenied(caller.who, f"{method} {path}", missing)
            request.state.caller = caller
        return await handler(request)

    return endpoint


def caller_of(request: Request) -> Caller:
    """The caller :func:`guarded` authenticated for this request."""
    caller: Caller = request.state.caller
    return caller


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
