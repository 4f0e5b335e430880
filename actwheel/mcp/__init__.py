"""The MCP face: user-intent tools over the control plane (issue 12).

A transport builds the server with :func:`build_server` and a :data:`CallerOf` (who calls, per
request: :func:`static_caller` for stdio, :func:`bearer_caller` — optionally with
:class:`ApiKeyVerifier` in the SDK's bearer middleware — for streamable HTTP), then mounts it.
"""

from __future__ import annotations

from actwheel.mcp.auth import CALLER_CLAIM, ApiKeyVerifier, CallerOf, bearer_caller, static_caller
from actwheel.mcp.server import (
    INSTRUCTIONS,
    READ_TOOLS,
    SERVER_NAME,
    TOOL_NAMES,
    WRITE_TOOLS,
    ActwheelMCP,
    build_server,
    visible_tools,
)

__all__ = [
    "CALLER_CLAIM",
    "INSTRUCTIONS",
    "READ_TOOLS",
    "SERVER_NAME",
    "TOOL_NAMES",
    "WRITE_TOOLS",
    "ActwheelMCP",
    "ApiKeyVerifier",
    "CallerOf",
    "bearer_caller",
    "build_server",
    "static_caller",
    "visible_tools",
]
