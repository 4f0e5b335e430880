"""Streamable HTTP at ``/mcp`` in the engine's own ASGI app (same port as the API).

:func:`actwheel.api.app.create_app` routes ``GET``, ``POST`` and ``DELETE /mcp`` through the route
guard (the same bearer API keys as the API: a missing or refused key is a 401 before the MCP transport
sees the request; the tools check scopes themselves) to :meth:`McpEndpoint.handle`, which hands the
request to the SDK's session manager with the guard's caller as the request's access token (the SDK
binds a stateful session to the key that opened it; the tools reuse the caller).

Both protocol eras work on the one endpoint: the handshake era (``initialize``, an ``Mcp-Session-Id``,
server-to-client requests over SSE) and the 2026-07-28 stateless era (every request names its version
in ``MCP-Protocol-Version``; multi-round results instead of server-to-client requests).

The session manager must be running while requests arrive: ``actwheel run`` serves with uvicorn's
lifespan off, so it enters :meth:`McpEndpoint.running` itself; until then, and once it has left it,
``/mcp`` answers 503. A Host header that is not ``--http``'s own (or one of
``ACTWHEEL_MCP_ALLOWED_HOSTS``) is a 421: DNS rebinding protection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from actwheel.mcp.auth import CALLER_CLAIM, bearer_caller
from actwheel.mcp.server import ActwheelMCP, build_server
from actwheel.mcp.state import RoundCodec
from actwheel.service import Caller, ControlPlane
from actwheel.settings import Settings, is_loopback

__all__ = ["MCP_METHODS", "MCP_PATH", "McpEndpoint", "allowed_hosts", "endpoint_of", "transport_security"]

MCP_PATH = "/mcp"
#: POST carries messages; GET opens a session's server-to-client stream; DELETE ends a session.
MCP_METHODS: tuple[str, ...] = ("GET", "POST", "DELETE")

#: Listeners that also answer on this machine's loopback names.
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def allowed_hosts(settings: Settings) -> list[str]:
    """The Host header values ``/mcp`` answers: ``--http``'s ``HOST:PORT`` (and the loopback names with
    that port when it listens on loopback or on every address), then ``ACTWHEEL_MCP_ALLOWED_HOSTS``."""
    host, port = settings.http_host, settings.http_port
    names = [host] if host not in _WILDCARDS else []
    if is_loopback(host) or host in _WILDCARDS:
        names += [n for n in _LOOPBACK_NAMES if n.strip("[]") != host]
    return [*(_host_port(n, port) for n in names), *settings.mcp_allowed_hosts]


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS rebinding protection over :func:`allowed_hosts`; a browser's ``Origin`` must be one of them
    too. ``ACTWHEEL_MCP_ALLOWED_HOSTS=*`` switches the check off (a proxy in front checks the Host)."""
    hosts = allowed_hosts(settings)
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=[f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")])


def _access_token(caller: Caller) -> AccessToken:
    """What the SDK knows of the guard's caller: the key id binds a session, the caller rides along. The
    key itself stays out (nothing in the SDK needs it, and a token's repr must not carry a secret)."""
    return AccessToken(token="", client_id=caller.key_id or caller.who, scopes=sorted(caller.scopes),
                       subject=caller.owner_id, claims={CALLER_CLAIM: caller})


class McpEndpoint:
    """The MCP server of one engine's ASGI app and the session manager that serves it at ``/mcp``.

    :ivar server: the :class:`~actwheel.mcp.server.ActwheelMCP` (tools resolve the caller per request)
    """

    def __init__(self, control: ControlPlane) -> None:
        self._control = control
        # Sealed under the database's key once running() has loaded it: any instance unseals it.
        self._codec = RoundCodec()
        self.server: ActwheelMCP = build_server(control, caller_of=bearer_caller(control.authenticator),
                                                state_codec=self._codec)
        # Builds the session manager (the Starlette app it returns is not used: /mcp is our own route).
        self.server.streamable_http_app(streamable_http_path=MCP_PATH,
                                        transport_security=transport_security(control.settings),
                                        host=control.settings.http_host)
        self._manager: StreamableHTTPSessionManager = self.server.session_manager
        self._running = False

    @property
    def state_codec(self) -> RoundCodec:
        """What seals this endpoint's ``requestState`` (keyed once :meth:`running` has started)."""
        return self._codec

    @property
    def is_running(self) -> bool:
        return self._running

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve ``/mcp`` inside this block (once per endpoint: the SDK's session manager cannot
        restart). Leaving it ends every open session. The request-state key is read first (one row of
        ``mcp_server_keys``, the same on every instance)."""
        if not self._codec.ready:
            self._codec.use([await self._control.confirmations.request_state_key()])
        async with self._manager.run():
            self._running = True
            try:
                yield
            finally:
                self._running = False

    async def handle(self, request: Request) -> Response:
        """A guarded ``/mcp`` request (``request.state.caller`` is set): the SDK transport answers it."""
        if not self._running:
            return JSONResponse({"error": {"type": "NotAvailable", "code": "mcp_not_running",
                                           "message": "the MCP endpoint is not serving (starting or stopping)"}},
                                status_code=503, headers={"Retry-After": "1"})
        caller: Caller = request.state.caller
        return _Transport(self._manager, AuthenticatedUser(_access_token(caller)))


class _Transport(Response):
    """A response that lets the SDK's session manager answer the request itself (the route guard wants
    a Response; the transport wants the raw ASGI channel, SSE streams included)."""

    def __init__(self, manager: StreamableHTTPSessionManager, user: AuthenticatedUser) -> None:
        super().__init__()
        self._manager = manager
        self._user = user

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["user"] = self._user
        reset = auth_context_var.set(self._user)
        try:
            await self._manager.handle_request(scope, receive, send)
        finally:
            auth_context_var.reset(reset)


def endpoint_of(app: Starlette) -> McpEndpoint:
    """The :class:`McpEndpoint` :func:`~actwheel.api.app.create_app` built for ``app``."""
    endpoint: McpEndpoint = app.state.mcp
    return endpoint
