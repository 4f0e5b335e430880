"""The MCP server of one engine: :func:`build_server` over its :class:`~actwheel.service.ControlPlane`.

Transports mount what this returns (``streamable_http_app()`` at ``/mcp``, ``run_stdio_async()`` for
``actwheel mcp``) and say who calls with a :data:`~actwheel.mcp.auth.CallerOf`. Every tool resolves
its caller per call and hands it to the use case; which tools a credential is *shown* is decided per
request too (:func:`visible_tools`): a write tool is not listed to a credential that cannot use it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, ListToolsResult, TextContent, ToolAnnotations

from actwheel.errors import ActwheelError, InvalidInput
from actwheel.mcp.auth import CallerOf
from actwheel.mcp.state import RoundCodec
from actwheel.mcp.tools import Tools
from actwheel.service import Caller, ControlPlane

__all__ = ["INSTRUCTIONS", "READ_TOOLS", "SERVER_NAME", "TOOL_NAMES", "WRITE_TOOLS", "ActwheelMCP", "build_server",
           "visible_tools"]

SERVER_NAME = "actwheel"

INSTRUCTIONS = """\
actwheel schedules automations (a trigger, an action, a policy) for the user and runs them. These tools act \
for the user who owns the API key, on their own automations and runs only.

Rules this server enforces:
1. Preview first. Before create_automation, and before an update_automation that changes the trigger, call \
preview_trigger with exactly that trigger, show the user the fire times it returns, and pass its preview_digest. \
A missing or stale digest is refused.
2. No guessed time zones. Every time-based trigger (once, cron, repeat) names its IANA timezone, e.g. \
"Europe/Paris". If the user did not say which zone, ask them; never guess one. A time without an offset is refused.
3. Use the server's words. preview_trigger, create_automation and update_automation return a summary sentence \
(name, first fire with its offset, zone, action and target): show the user that sentence, not your own.
4. Run now needs the user's confirmation in this turn. When your client can ask the user, the server asks. \
Otherwise run_automation_now first answers confirmation_required with a summary and a confirmation_token: show \
the summary, and only after the user confirms call again with the token (single use, 2 minutes, this automation \
and this key only). A retried call with the same token returns the same run.
5. UNKNOWN is never retried. A run in UNKNOWN may have happened; it comes back with duplicate_risk true and \
retry_allowed false. Tell the user, and never run it again on your own: running again may duplicate it.
6. Two scopes for anything that can fire. Creating an enabled automation, enabling one, changing one while it is \
enabled and running one now need automation:write and the scopes of its action (list_action_types shows the \
types you may use). Disabling needs automation:write only: turning off is always easier than turning on.

Tools you are not allowed to use are not listed. No tool retries a run, resolves an UNKNOWN, reads a secret or \
runs an ad hoc action.
"""

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                             open_world_hint=False)
#: name → (annotations, the resource scopes the tool needs, whether it can make something fire)
_TOOLS: dict[str, tuple[ToolAnnotations, tuple[str, ...], bool]] = {
    "preview_trigger": (_READ_ONLY, (), False),
    "list_action_types": (_READ_ONLY, (), False),
    "list_automations": (_READ_ONLY, ("automation:read",), False),
    "get_automation": (_READ_ONLY, ("automation:read",), False),
    "list_runs": (_READ_ONLY, ("run:read",), False),
    "get_run": (_READ_ONLY, ("run:read",), False),
    "create_automation": (ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                                          open_world_hint=False), ("automation:write",), True),
    "update_automation": (ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                          open_world_hint=False), ("automation:write",), True),
    "enable_automation": (ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                          open_world_hint=False), ("automation:write",), True),
    "disable_automation": (ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                           open_world_hint=False), ("automation:write",), False),
    "run_automation_now": (ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                                           open_world_hint=True), ("automation:write",), True),
}
TOOL_NAMES: tuple[str, ...] = tuple(_TOOLS)
READ_TOOLS: tuple[str, ...] = tuple(n for n, (a, _, _) in _TOOLS.items() if a.read_only_hint)
WRITE_TOOLS: tuple[str, ...] = tuple(n for n in TOOL_NAMES if n not in READ_TOOLS)


def visible_tools(control: ControlPlane, caller: Caller) -> frozenset[str]:
    """The tools ``caller`` is shown: those whose resource scopes it holds; a tool that can make an
    automation fire also needs one action type it may use; run now is hidden when turned off."""
    usable_actions = bool(control.actions.types(caller))
    shown = set()
    for name, (_, scopes, fires) in _TOOLS.items():
        if caller.grant.missing(scopes) or (fires and not usable_actions):
            continue
        if name == "run_automation_now" and control.settings.mcp_run_now == "deny":
            continue
        shown.add(name)
    return frozenset(shown)


class ActwheelMCP(MCPServer[Any]):
    """The SDK's server with actwheel's tools: an actwheel error raised by a use case becomes a tool
    error (``isError``) that names the field, the value and what is expected, or the missing scopes."""

    def __init__(self, tools: Tools, caller_of: CallerOf, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.actwheel_tools = tools
        self._caller_of = caller_of
        self.middleware.append(self._filter_listing)

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ActwheelError):
                return CallToolResult(content=[TextContent(type="text", text=f"Error executing tool {name}: "
                                                                             f"{explain(cause)}")], is_error=True)
            raise

    async def _filter_listing(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/list":
            return result
        shown = visible_tools(self.actwheel_tools.control, await self._caller_of(ctx))
        if isinstance(result, ListToolsResult):
            return result.model_copy(update={"tools": [t for t in result.tools if t.name in shown]})
        if isinstance(result, Mapping) and isinstance(result.get("tools"), list):
            return {**result, "tools": [t for t in result["tools"] if t.get("name") in shown]}
        return result


@contextlib.contextmanager
def _sdk_logging_refused() -> Iterator[None]:
    """The SDK's server configures the process's logging when it is built (``logging.basicConfig`` at
    INFO with a rich console handler, whenever the root logger has no handler yet): every library's
    INFO line then went to stderr as a rich table, outside the engine's JSON and its secret masking,
    at ≈ 0.85 ms of CPU a line here. The root logger is put back as it was; :mod:`actwheel.logs` owns it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def explain(exc: ActwheelError) -> str:
    """An actwheel error as the agent should read it: every bad field with its value and what is valid."""
    if isinstance(exc, InvalidInput) and len(exc.errors) > 1:
        return "; ".join(f"{e.field}: {e.value!r} is not valid, expected {e.expected}" for e in exc.errors)
    return str(exc)


def build_server(control: ControlPlane, *, caller_of: CallerOf,
                 state_codec: RoundCodec | None = None) -> ActwheelMCP:
    """The MCP server over ``control``; ``caller_of`` resolves who calls, per request.

    ``state_codec`` seals the 2026-07-28 multi-round ``requestState`` (the elicitation of run now) and
    names each answered round (:mod:`actwheel.mcp.state`); every instance behind one load balancer
    must seal under the same key. Default: a key of this process only.
    """
    tools = Tools(control, caller_of)
    with _sdk_logging_refused():
        server = ActwheelMCP(tools, caller_of, name=SERVER_NAME, title="actwheel",
                             instructions=INSTRUCTIONS,
                             request_state_security=(state_codec or RoundCodec.ephemeral()).security())
    for name, (hints, _, _) in _TOOLS.items():
        server.add_tool(getattr(tools, name), name=name, annotations=hints, structured_output=True)
    return server
