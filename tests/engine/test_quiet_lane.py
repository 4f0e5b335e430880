"""The quiet lane (issue 15, the sentinel) on both stacks: a small ``automation.due`` or ``run.ready`` travels
on a key and a queue of its own (``automation.due.quiet``, ``run.ready.quiet``), so that big ones the planner
holds for its backlog bound, or the router for their instant, cannot keep it from being delivered. Without
the lane, the small one waits in the same queue behind the held ones, whatever the handlers would do."""

from __future__ import annotations

import asyncio
from datetime import UTC, timedelta
from typing import Any

import pytest
from engine_harness import Stack, pass_time
from procs import eventually

from actwheel.actors.planner import QUIET_ITEMS, Planner
from actwheel.actors.router import ExecutorRouter
from actwheel.bus.envelope import Envelope
from actwheel.clock import SystemClock
from actwheel.engine import Engine
from actwheel.messages import AutomationsDue, DueItem, Message, RunsReady
from actwheel.service import Caller
from actwheel.storage.records import Automation, Run

ALICE = Caller("alice")
LOG_ACTION = {"type": "simple.op", "config": {"op": "log", "message": "hi"}}
NEVER_SOON = {"type": "cron", "expression": "0 0 0 1 1 ? 2099", "timezone": "UTC"}
NO_ROUTER = ("ticker", "planner", "cdc", "auditor")
#: Held deliveries beyond the prefetch: they wait in the queue, ahead of anything published after them.
QUEUED_BEHIND = 4


async def _publish(engine: Engine, message: Message, routing_key: str) -> None:
    envelope = Envelope.new(type=message.TYPE, data=message.to_data(), source="tests", clock=SystemClock())
    await engine.bus.publish(engine.bus.topology.events, routing_key, envelope)


async def _runs(engine: Engine, automation_id: str) -> list[Run]:
    async with engine.store.transaction() as tx:
        return list(await tx.runs.query(automation_id=automation_id, limit=1000))


async def _create_loud(engine: Engine, count: int) -> list[Automation]:
    return [await engine.service.create(ALICE, {"name": f"loud{i}", "trigger": NEVER_SOON, "action": LOG_ACTION})
            for i in range(count)]


async def test_a_quiet_announcement_is_planned_while_held_ones_fill_the_planners_prefetch(stack: Stack) -> None:
    engine = stack.engine(roles=NO_ROUTER, plan_backlog=1)
    async with engine:
        planner = engine.actors["planner"]
        assert isinstance(planner, Planner)
        prefetch = planner.intake()[0].prefetch
        loud = await _create_loud(engine, 3)
        start = (stack.clock.now() + timedelta(seconds=1)).astimezone(UTC).replace(microsecond=0)
        quiet = await engine.service.create(ALICE, {
            "name": "quiet", "action": LOG_ACTION, "policy": {"overlap": "allow"},
            "trigger": {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                        "start_date_time": start.isoformat()}})

        async def at_the_bound() -> bool:  # no router: its first run stays PENDING, the backlog is at its bound
            await pass_time(stack, 0.1)
            return (planner.last_backlog or 0) >= 1

        await eventually(at_the_bound, within=15, every=0.01, what="the quiet automation's first run counted")
        big = AutomationsDue(items=tuple(DueItem(automation_id=a.id, scheduled_for=a.next_run_at) for a in loud
                                         if a.next_run_at is not None))
        assert len(big.items) == 3
        assert big.routing_key == AutomationsDue.TYPE
        for _ in range(prefetch + QUEUED_BEHIND):
            await _publish(engine, big, big.routing_key)

        async def all_slots_held() -> bool:
            await pass_time(stack, 0.1)
            return planner.held >= prefetch

        await eventually(all_slots_held, within=15, every=0.01, what="every due delivery held by the bound")
        before = len(await _runs(engine, quiet.id))
        await pass_time(stack, 3.0)
        after = len(await _runs(engine, quiet.id))
        assert after >= before + 2, (before, after)  # the quiet instants were delivered and planned
        assert planner.held == prefetch  # while the big ones stayed held, none of them planned
        assert [await _runs(engine, a.id) for a in loud] == [[], [], []]


async def test_a_single_run_is_delivered_while_held_ready_messages_fill_the_routers_prefetch(stack: Stack) -> None:
    engine = stack.engine()
    async with engine, stack.watch(engine) as log:
        router = engine.actors["router"]
        assert isinstance(router, ExecutorRouter)
        prefetch = router.intake()[0].prefetch
        later = stack.clock.now() + timedelta(hours=1)
        held = RunsReady(run_ids=tuple(f"not-a-run-{i}" for i in range(5)), not_before=later)
        assert held.routing_key == RunsReady.TYPE
        for _ in range(prefetch + QUEUED_BEHIND):  # each held by the router until its instant, an hour away
            await _publish(engine, held, held.routing_key)
        automation = (await _create_loud(engine, 1))[0]
        run = await engine.service.run_now(ALICE, automation.id)  # one run: run.ready.quiet
        done = await log.wait_count("run.succeeded", 1, within=15)
        assert [e["run_id"] for e in done] == [run.id]


async def test_big_plans_go_one_at_a_time_and_a_small_one_passes_them(
        embedded: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Queued together on SQLite's one writer, the plans of a burst's announcements were a chain of seconds
    that everything else waited behind: the planner lets one big plan at a time at the store."""
    engine = embedded.engine(roles=NO_ROUTER)
    async with engine:
        planner = engine.actors["planner"]
        assert isinstance(planner, Planner)
        automations = await _create_loud(engine, 2 * (QUIET_ITEMS + 1) + 1)
        items = [DueItem(automation_id=a.id, scheduled_for=a.next_run_at) for a in automations
                 if a.next_run_at is not None]
        gate = asyncio.Event()
        big_inside: list[int] = []
        original = Planner._plan_round

        async def spied(self: Planner, round_items: list[DueItem], *args: Any, **kwargs: Any) -> Any:
            big = len(round_items) > QUIET_ITEMS
            if big:
                big_inside.append(len(big_inside) + 1)
                await gate.wait()
            try:
                return await original(self, round_items, *args, **kwargs)
            finally:
                if big:
                    big_inside.pop()

        monkeypatch.setattr(Planner, "_plan_round", spied)
        first = asyncio.create_task(planner.plan(items[: QUIET_ITEMS + 1]))
        second = asyncio.create_task(planner.plan(items[QUIET_ITEMS + 1 : -1]))

        async def one_inside() -> bool:
            return bool(big_inside)

        await eventually(one_inside, within=5, every=0.01, what="the first big plan at the store")
        async with asyncio.timeout(10):  # a small plan does not wait for the big ones
            await planner.plan(items[-1:], urgent=True)
        assert big_inside == [1]  # the second big plan waits for the first, outside the store
        gate.set()
        await asyncio.gather(first, second)
        assert big_inside == []
