"""Building the MCP server leaves the process's logging alone: the SDK's server calls
``logging.basicConfig`` (INFO, a rich console handler) when it is built, which sent every library's
INFO line to stderr as a rich table, outside the engine's JSON lines and their secret masking."""

from __future__ import annotations

import logging

import pytest
from mcp_world import World

from actwheel.mcp import build_server, static_caller


@pytest.mark.parametrize("preinstalled", [False, True], ids=["no root handler", "a root handler"])
def test_building_the_server_leaves_the_root_logger_as_it_was(world: World, preinstalled: bool) -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    root.handlers[:] = [logging.NullHandler()] if preinstalled else []
    root.setLevel(logging.WARNING)
    before = list(root.handlers)
    try:
        build_server(world.engine.control, caller_of=static_caller(world.callers["full_a"]))
        assert root.handlers == before
        assert root.level == logging.WARNING
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
