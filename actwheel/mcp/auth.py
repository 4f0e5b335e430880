"""Who calls the MCP server: each tool call resolves its :class:`~actwheel.service.Caller` through a
:data:`CallerOf`, whatever the transport.

- stdio (``actwheel mcp``): the bridge authenticates its key once and serves with
  :func:`static_caller`.
- streamable HTTP: :func:`bearer_caller` authenticates the request's ``Authorization: Bearer`` key with
  the control plane's authenticator on every call (a revoked key stops at once). When the transport
  installs the SDK's bearer middleware with :class:`ApiKeyVerifier`, the caller it authenticated is
  reused from the request's access token instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.context import ServerRequestContext

from actwheel.errors import Unauthenticated
from actwheel.service import Authenticates, Caller

__all__ = ["CALLER_CLAIM", "ApiKeyVerifier", "CallerOf", "bearer_caller", "static_caller"]

#: Resolves the caller of one request (its context carries the transport's request, if any).
CallerOf = Callable[[ServerRequestContext[Any, Any]], Awaitable[Caller]]

#: The :class:`AccessToken` claim that carries the authenticated caller.
CALLER_CLAIM = "actwheel.caller"


def static_caller(caller: Caller) -> CallerOf:
    """Every request is ``caller`` (stdio: one process, one key, authenticated at start)."""

    async def caller_of(_: ServerRequestContext[Any, Any]) -> Caller:
        return caller

    return caller_of


class ApiKeyVerifier(TokenVerifier):
    """The SDK's token verifier over actwheel API keys: ``client_id`` is the key id (the SDK binds an
    HTTP session to it), ``subject`` the owner, ``scopes`` the effective scopes; the caller rides along."""

    def __init__(self, authenticator: Authenticates) -> None:
        self._authenticator = authenticator

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            caller = await self._authenticator.authenticate(token)
        except Unauthenticated:
            return None
        return AccessToken(token=token, client_id=caller.key_id or caller.who, scopes=sorted(caller.scopes),
                           subject=caller.owner_id, claims={CALLER_CLAIM: caller})


def bearer_caller(authenticator: Authenticates) -> CallerOf:
    """The caller of an HTTP request: the one :class:`ApiKeyVerifier` authenticated, else its bearer key
    authenticated now.

    :raises Unauthenticated: no bearer key, or a bad one
    """

    async def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
        access = get_access_token()
        verified = (access.claims or {}).get(CALLER_CLAIM) if access is not None else None
        if isinstance(verified, Caller):
            return verified
        headers = getattr(ctx.request, "headers", None)
        header = headers.get("authorization") if headers is not None else None
        token = header[7:].strip() if isinstance(header, str) and header.lower().startswith("bearer ") else None
        return await authenticator.authenticate(token)

    return caller_of
