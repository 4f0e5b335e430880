"""``actwheel mcp``: the MCP server on stdin/stdout, bridged to a running engine's ``/mcp``.

For desktop hosts that start MCP servers as subprocesses; configure it with the environment:
``ACTWHEEL_TOKEN`` (an API key, required) and ``ACTWHEEL_URL`` (the engine's base URL, default
``http://127.0.0.1:8080``). stdout carries only MCP messages; everything else goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from actwheel.errors import BridgeError
from actwheel.mcp.bridge import DEFAULT_URL, BridgeConfig, run_bridge

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mcp", help="serve MCP over stdio, bridged to a running engine (env ACTWHEEL_TOKEN, ACTWHEEL_URL)",
        description="Serve the actwheel MCP tools on stdin/stdout for a desktop host, forwarding to a running "
                    f"engine's /mcp. Environment: ACTWHEEL_TOKEN (an API key, required), ACTWHEEL_URL (the "
                    f"engine's base URL, default {DEFAULT_URL}).")
    parser.set_defaults(handler=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    try:
        config = BridgeConfig.from_env()
        print(f"actwheel mcp: bridging stdio to {config.mcp_url}", file=sys.stderr, flush=True)
        asyncio.run(run_bridge(config))
    except BridgeError as exc:
        print(f"actwheel mcp: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
