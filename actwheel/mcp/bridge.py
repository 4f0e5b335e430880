"""``actwheel mcp``: the stdio face, for desktop hosts that start an MCP server as a subprocess.

A bridge, not a second engine: it speaks MCP on stdin/stdout (a small SDK server whose
``tools/list`` and ``tools/call`` forward to the engine) and MCP over streamable HTTP to a running
engine's ``/mcp`` (the SDK's client), with one key from the environment. Each leg negotiates its own
protocol era, so a handshake-era host works against a 2026-07-28 engine and the other way round.

The engine enforces every rule (the bridge holds no authority of its own). The bridge's client does
not offer elicitation, so ``run_automation_now`` confirms with a token (``confirmation_required``, then
the same call with the token once the user said yes) unless ``ACTWHEEL_MCP_RUN_NOW`` says otherwise.

:func:`connect` checks the engine first and says what is wrong in one sentence (:class:`BridgeError`):
unreachable, the key refused (401), a Host the engine does not answer to (421), no ``/mcp`` (404).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams

from actwheel.errors import BridgeError
from actwheel.mcp.server import INSTRUCTIONS, SERVER_NAME

__all__ = ["DEFAULT_URL", "BridgeConfig", "connect", "proxy_server", "run_bridge"]

#: Where ``actwheel run`` listens by default.
DEFAULT_URL = "http://127.0.0.1:8080"
#: How long connecting to the engine (and writing to it) may take before the bridge gives up.
CONNECT_TIMEOUT_S = 30.0

_STATUS_HINTS: dict[int, str] = {
    401: "refused the key in ACTWHEEL_TOKEN (401): it is mistyped, revoked or expired — mint one with "
         "`actwheel keys create` and set ACTWHEEL_TOKEN",
    403: "refused the key in ACTWHEEL_TOKEN (403)",
    404: "has no MCP endpoint at /mcp (404): is ACTWHEEL_URL an actwheel engine's base URL?",
    421: "does not answer to this Host header (421): add the name in ACTWHEEL_URL to the engine's "
         "ACTWHEEL_MCP_ALLOWED_HOSTS",
    503: "is not serving MCP yet (503): it is starting or stopping — try again",
}


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    """Where the engine is and the key to use (``ACTWHEEL_URL``, ``ACTWHEEL_TOKEN``)."""

    url: str
    token: str = field(repr=False)

    @property
    def mcp_url(self) -> str:
        return self.url.rstrip("/") + "/mcp"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BridgeConfig:
        """:raises BridgeError: ``ACTWHEEL_TOKEN`` is unset or ``ACTWHEEL_URL`` is not an http(s) URL"""
        env = os.environ if env is None else env
        url = (env.get("ACTWHEEL_URL") or DEFAULT_URL).strip()
        token = (env.get("ACTWHEEL_TOKEN") or "").strip()
        if not url.startswith(("http://", "https://")):
            raise BridgeError(url, f"ACTWHEEL_URL {url!r} is not an engine's base URL such as {DEFAULT_URL}")
        if not token:
            raise BridgeError(url, "ACTWHEEL_TOKEN is not set: put an actwheel API key in the host's env for "
                                   "this server (`actwheel keys create` mints one)")
        return cls(url=url, token=token)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _explain(config: BridgeConfig, exc: BaseException, statuses: list[int]) -> BridgeError:
    failed = [s for s in statuses if s >= 400]
    if failed:
        hint = _STATUS_HINTS.get(failed[0], f"answered HTTP {failed[0]}")
        return BridgeError(config.url, f"the engine at {config.url} {hint}")
    leaves = _leaves(exc)
    if any(isinstance(e, httpx2.TransportError | OSError) for e in leaves):
        reason = next(e for e in leaves if isinstance(e, httpx2.TransportError | OSError))
        return BridgeError(config.url, f"cannot reach the engine at {config.url} ({reason or type(reason).__name__}): "
                                       "is `actwheel run` running there? Set ACTWHEEL_URL to its base URL")
    return BridgeError(config.url, f"the engine at {config.url} failed the MCP handshake: "
                                   + "; ".join(str(e) or type(e).__name__ for e in leaves))


@asynccontextmanager
async def connect(config: BridgeConfig) -> AsyncIterator[Client]:
    """An SDK client connected to the engine's ``/mcp`` with the key (it has listed the tools once, so
    a refused key fails here, not on the host's first call).

    :raises BridgeError: the engine cannot be reached, or refused the key or the request
    """
    statuses: list[int] = []

    async def note(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {config.token}"},
                              timeout=httpx2.Timeout(CONNECT_TIMEOUT_S, read=300.0), event_hooks={"response": [note]})
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(http)
        try:
            client = await stack.enter_async_context(
                Client(streamable_http_client(config.mcp_url, http_client=http), mode="auto"))
            await client.list_tools(cache_mode="bypass")
        except Exception as exc:
            raise _explain(config, exc, statuses) from exc
        yield client


def _unreachable(exc: Exception) -> MCPError:
    if isinstance(exc, MCPError):
        return exc
    return MCPError(INTERNAL_ERROR, f"the actwheel engine could not be reached: {exc or type(exc).__name__}")


def proxy_server(remote: Client) -> Server[Any]:
    """A stdio-side MCP server whose tools are the engine's, listed and called through ``remote``."""

    async def list_tools(_: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        try:
            return await remote.list_tools(cursor=params.cursor if params else None, cache_mode="bypass")
        except Exception as exc:
            raise _unreachable(exc) from exc

    async def call_tool(_: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        try:
            return await remote.call_tool(params.name, params.arguments or {})
        except Exception as exc:
            raise _unreachable(exc) from exc

    info = remote.server_info
    return Server(SERVER_NAME, version=info.version if info is not None else "", title="actwheel",
                  instructions=remote.instructions or INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool)


async def run_bridge(config: BridgeConfig) -> None:
    """Serve stdin/stdout until the host closes stdin.

    :raises BridgeError: see :func:`connect`
    """
    async with connect(config) as remote:
        server = proxy_server(remote)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
