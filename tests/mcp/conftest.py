"""Fixtures of the MCP tests: see mcp_world.py."""

from __future__ import annotations

from mcp_world import clock, world

__all__ = ["clock", "world"]
