"""A scripted agent session over MCP against a running engine (issue 12): preview → create → list →
run now (confirmed by token) → get_run SUCCEEDED → disable. The router runs the action: the engine runs
the planner, router, cdc and auditor on SQLite and the memory bus, with authentication on."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp_world import DAILY_9, LOG, World, populate, structured

from actwheel.bus import Delivery, MemoryBus, QueueSpec, Topology
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.settings import Settings


class _Events:
    """The run events the engine publishes, waited for without sleeping (woken by each delivery)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.changed = asyncio.Condition()

    async def record(self, delivery: Delivery) -> None:
        async with self.changed:
            self.keys.append(delivery.routing_key)
            self.changed.notify_all()

    async def wait_for(self, routing_key: str) -> None:
        async with asyncio.timeout(15), self.changed:
            await self.changed.wait_for(lambda: routing_key in self.keys)


@asynccontextmanager
async def _running_engine(tmp_path: Path, clock: VirtualClock) -> AsyncIterator[tuple[Engine, _Events]]:
    topology = Topology()
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path}/actwheel.db", instance="s",
                             admin_key_file=str(tmp_path / "admin.key"),
                             roles=("planner", "router", "cdc", "auditor")),
                    clock=clock, bus=MemoryBus(topology=topology, clock=clock, grace=2.0), topology=topology)
    await engine.start()
    events = _Events()
    spec = QueueSpec(f"test.watch.{uuid.uuid4().hex[:6]}", ((topology.events, "run.#"),), delivery_limit=1)
    await engine.bus.declare_queue(spec)
    subscription = await engine.bus.consume(spec.name, events.record, prefetch=100)
    try:
        yield engine, events
    finally:
        await subscription.cancel()
        await engine.stop()


async def test_an_agent_previews_creates_lists_runs_now_reads_the_run_and_disables(
        tmp_path: Path, clock: VirtualClock) -> None:
    async with _running_engine(tmp_path, clock) as (engine, events):
        world = World(engine, clock, await populate(engine))
        async with world.client("full_a") as agent:
            preview = structured(await agent.call_tool("preview_trigger", {"trigger": DAILY_9, "count": 3}))
            created = structured(await agent.call_tool("create_automation", {
                "name": "morning hello", "trigger": DAILY_9, "action": LOG,
                "preview_digest": preview["preview_digest"]}))
            automation_id = created["automation"]["id"]
            listed = structured(await agent.call_tool("list_automations"))
            asked = structured(await agent.call_tool("run_automation_now", {"automation_id": automation_id}))
            started = structured(await agent.call_tool("run_automation_now", {
                "automation_id": automation_id, "confirmation_token": asked["confirmation_token"]}))
            await events.wait_for("run.succeeded")
            run = structured(await agent.call_tool("get_run", {"run_id": started["run_id"]}))
            disabled = structured(await agent.call_tool("disable_automation", {"automation_id": automation_id}))
            runs = structured(await agent.call_tool("list_runs", {"automation_id": automation_id}))
    assert preview["fires"][0]["at"] in created["summary"]
    assert [a["id"] for a in listed["items"]] == [automation_id]
    assert asked["status"] == "confirmation_required"
    assert started["status"] == "started"
    assert run["run"]["status"] == "SUCCEEDED"
    assert (run["run"]["duplicate_risk"], run["run"]["retry_allowed"]) == (False, False)
    assert run["audit"]
    assert disabled["automation"]["enabled"] is False
    assert [r["id"] for r in runs["items"]] == [started["run_id"]]
