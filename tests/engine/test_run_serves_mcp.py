"""``actwheel run`` serves ``/mcp``: the wiring the in-process transport tests copy, checked on the real command.

uvicorn runs with its lifespan off there, so the command itself must enter the MCP session manager
(and load the request-state key) around serving; the Host check comes from ``--http``. One process
on the embedded default, driven by the SDK's streamable HTTP client in both protocol eras.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitRequestParams, ElicitResult
from procs import EngineProcess

TRIGGER = {"type": "cron", "expression": "0 0 9 * * ?", "timezone": "Europe/Paris"}
ACTION = {"type": "simple.op", "config": {"op": "log", "message": "hello"}}


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[EngineProcess]:
    proc = EngineProcess("mcp-run", database=f"sqlite:///{tmp_path}/actwheel.db", broker="memory://",
                         log_dir=tmp_path)
    proc.start()
    try:
        await proc.wait_ready()
        yield proc
    finally:
        await proc.stop()


async def _accept(_: object, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_actwheel_run_serves_mcp_and_run_now_by_elicitation(engine: EngineProcess, mode: str) -> None:
    async with Client(streamable_http_client(f"{engine.url}/mcp"), mode=mode, elicitation_callback=_accept) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        preview = await client.call_tool("preview_trigger", {"trigger": TRIGGER})
        assert preview.structured_content is not None
        created = await client.call_tool("create_automation", {
            "name": "morning", "trigger": TRIGGER, "action": ACTION,
            "preview_digest": preview.structured_content["preview_digest"]})
        assert created.structured_content is not None, created.content
        automation_id = created.structured_content["automation"]["id"]
        started = await client.call_tool("run_automation_now", {"automation_id": automation_id})
    assert "run_automation_now" in tools
    assert started.structured_content is not None, started.content
    assert started.structured_content["status"] == "started"


async def test_actwheel_run_refuses_a_host_it_was_not_told_about(engine: EngineProcess) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{engine.url}/mcp", json=body, headers={
            "Host": "attacker.example", "Accept": "application/json, text/event-stream"})
    assert answer.status_code == 421
