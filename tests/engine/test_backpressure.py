"""Backpressure (issue 15) on both stacks: the planner holds due announcements while the PENDING/RUNNING
backlog is at its bound, and the instants it held are recorded by the automations' misfire and overlap
rules once the backlog drains — they do not pile up as PENDING. No router runs here, so runs stay
PENDING until the test finishes them."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, timedelta

import pytest
from engine_harness import Stack, pass_time

from actwheel.actors.planner import Planner
from actwheel.engine import Engine
from actwheel.service import Caller
from actwheel.storage.records import RunOutcome, RunStatus

ALICE = Caller("alice")
LOG_ACTION = {"type": "simple.op", "config": {"op": "log", "message": "hi"}}
NO_ROUTER = ("ticker", "planner", "cdc", "auditor")


async def create_every_second(stack: Stack, engine: Engine, count: int) -> None:
    start = (stack.clock.now() + timedelta(seconds=2)).astimezone(UTC).replace(microsecond=0).isoformat()
    for i in range(count):
        await engine.service.create(ALICE, {
            "name": f"s{i}", "action": LOG_ACTION,
            "trigger": {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                        "start_date_time": start},
            "policy": {"overlap": "allow", "misfire": "fire_once", "grace_s": 1}})


async def statuses(engine: Engine) -> Counter[str]:
    async with engine.store.transaction() as tx:
        runs = await tx.runs.query(owner_id="alice", limit=1000)
    return Counter(f"{r.status.value}({r.reason})" if r.reason else r.status.value for r in runs)


async def finish_pending(engine: Engine) -> None:
    async with engine.store.transaction() as tx:
        pending = [r.id for r in await tx.runs.query(owner_id="alice", limit=1000) if r.status is RunStatus.PENDING]
        claimed = await tx.runs.claim_many(pending, "test", 30)
        await tx.runs.finish_many([RunOutcome(run_id=r.id, owner="test", epoch=r.lease_epoch,
                                              status=RunStatus.SUCCEEDED) for r in claimed])


@pytest.mark.parametrize("fire_ahead_s", [0.0, 1.0], ids=["at-the-instant", "fire-ahead"])
async def test_planning_is_held_at_the_bound_and_held_instants_follow_the_misfire_policy(
        stack: Stack, fire_ahead_s: float) -> None:
    """With fire-ahead on, a run planned ahead joins the backlog at its instant: the bound still holds."""
    engine = stack.engine(roles=NO_ROUTER, plan_backlog=3, fire_ahead_s=fire_ahead_s)
    async with engine:
        await create_every_second(stack, engine, 4)
        await pass_time(stack, 4.5)  # a first announcement or two, until the backlog reaches the bound
        at_bound = await statuses(engine)
        assert at_bound["PENDING"] >= 3, at_bound
        for _ in range(6):  # six more instants: each announcement is held
            await pass_time(stack, 1.0)
        planner = engine.actors["planner"]
        assert isinstance(planner, Planner)
        assert await statuses(engine) == at_bound
        assert planner.held >= 1
        await finish_pending(engine)
        await pass_time(stack, 2.5)
        after = await statuses(engine)
    # each automation: the held instants planned late by fire_once (the latest fires, the others are
    # recorded SKIPPED(misfire)), then the instants after the drain, on time
    assert after["SUCCEEDED"] == at_bound["PENDING"]
    assert after["SKIPPED(misfire)"] >= 4 * 4, after
    assert after["PENDING"] <= 4 * 4, after


async def test_without_the_bound_pending_runs_pile_up(stack: Stack) -> None:
    engine = stack.engine(roles=NO_ROUTER, plan_backlog=0)
    async with engine:
        await create_every_second(stack, engine, 4)
        await pass_time(stack, 2.5)
        for _ in range(6):
            await pass_time(stack, 1.0)
        piled = await statuses(engine)
    assert piled["PENDING"] >= 4 * 5, piled


async def test_under_the_bound_an_announcement_plans_without_a_count_of_its_own(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """The count taken in the background after each plan decides the next announcement: after the
    first one, no count runs inside a due announcement's handling (one round trip less per instant)."""
    counted_in: list[str] = []
    count = Planner._count_backlog

    async def spied(self: Planner) -> int:
        task = asyncio.current_task()
        counted_in.append(task.get_name() if task is not None else "")
        return await count(self)

    monkeypatch.setattr(Planner, "_count_backlog", spied)
    engine = stack.engine(roles=NO_ROUTER, plan_backlog=1000)
    async with engine:
        await create_every_second(stack, engine, 2)
        await pass_time(stack, 5.5)
        planned = await statuses(engine)
    assert planned["PENDING"] >= 2 * 3, planned
    background = [name for name in counted_in if name == "planner:backlog-count"]
    assert len(background) >= 3, counted_in
    assert len(counted_in) - len(background) <= 1, counted_in  # at most the very first announcement's own


async def test_a_quiet_automation_is_planned_on_time_while_the_bound_holds_a_burst(stack: Stack) -> None:
    """One instant alone in its announcement passes the bound (within the planner's quiet allowance)."""
    engine = stack.engine(roles=NO_ROUTER, plan_backlog=3)
    async with engine:
        await create_every_second(stack, engine, 4)
        half = (stack.clock.now() + timedelta(seconds=2.5)).astimezone(UTC).replace(microsecond=500_000)
        quiet = await engine.service.create(ALICE, {
            "name": "quiet", "action": LOG_ACTION, "policy": {"overlap": "allow"},
            "trigger": {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                        "start_date_time": half.isoformat()}})
        await pass_time(stack, 4.5)
        loud_at_bound = await _loud(engine, quiet.id)
        quiet_at_bound = len(await _runs(engine, quiet.id))
        for _ in range(6):
            await pass_time(stack, 1.0)
        assert await _loud(engine, quiet.id) == loud_at_bound  # the burst's announcements are held
        assert len(await _runs(engine, quiet.id)) >= quiet_at_bound + 5  # the quiet one's are not
        planner = engine.actors["planner"]
        assert isinstance(planner, Planner)
        assert planner.held >= 1


async def _runs(engine: Engine, automation_id: str) -> list[object]:
    async with engine.store.transaction() as tx:
        return list(await tx.runs.query(automation_id=automation_id, limit=1000))


async def _loud(engine: Engine, quiet_id: str) -> Counter[str]:
    async with engine.store.transaction() as tx:
        runs = await tx.runs.query(owner_id="alice", limit=1000)
    return Counter(r.status.value for r in runs if r.automation_id != quiet_id)


async def test_counts_asked_for_at_once_share_one_query(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Held announcements look at the backlog together when the last count goes stale: one query answers
    them all (before: one each, at every poll — 47 held announcements of a 100k burst made 470 a second)."""
    from actwheel.storage._runs import SqlRuns

    queries = 0
    count = SqlRuns.count_backlog

    async def counted(self: SqlRuns, limit: int) -> int:
        nonlocal queries
        queries += 1
        return await count(self, limit)

    monkeypatch.setattr(SqlRuns, "count_backlog", counted)
    engine = stack.engine(roles=NO_ROUTER, plan_backlog=3)
    async with engine:
        planner = engine.actors["planner"]
        assert isinstance(planner, Planner)
        before = queries
        answers = await asyncio.gather(*(planner._count_backlog() for _ in range(10)))
        assert answers == [0] * 10
        assert queries - before == 1
        await planner._count_backlog()  # the next one asks again
        assert queries - before == 2


async def test_drain_waits_for_a_shared_count_whose_askers_have_gone(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """A count runs in a task of its own (shared by its askers, shielded from their cancellation): the planner's
    drain waits for it, so that a stop never closes the store under a count still in its transaction."""
    from actwheel.storage._runs import SqlRuns

    entered, release = asyncio.Event(), asyncio.Event()
    count = SqlRuns.count_backlog

    async def slow(self: SqlRuns, limit: int) -> int:
        entered.set()
        await release.wait()
        return await count(self, limit)

    engine = stack.engine(roles=NO_ROUTER, plan_backlog=3)
    async with engine:
        planner = engine.actors["planner"]
        assert isinstance(planner, Planner)
        monkeypatch.setattr(SqlRuns, "count_backlog", slow)
        asker = asyncio.create_task(planner._count_backlog())
        await asyncio.wait_for(entered.wait(), timeout=5)
        asker.cancel()  # the asker goes; its count goes on
        with pytest.raises(asyncio.CancelledError):
            await asker
        draining = asyncio.create_task(planner.drain())
        try:
            for _ in range(20):  # let the drain run as far as it can on its own
                await asyncio.sleep(0)
            assert not draining.done()
        finally:
            release.set()  # a failing run still lets the count (and the engine's stop) end
        await asyncio.wait_for(draining, timeout=5)
        assert planner._counting is not None
        assert planner._counting.done()
        monkeypatch.undo()
