"""Fire-ahead on both stacks: an instant is planned its lead window early and its run starts at the instant,
never before; an edit inside the window withdraws the run planned ahead and plans the instant again from the
edited automation; a disable or a delete cancels it; the overlap check is taken at the instant.

Embedded stack: memory bus + SQLite under a VirtualClock (the test moves time, and can hold it just before
the instant). Services stack: RabbitMQ + PostgreSQL under the system clock (instants a few seconds ahead).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from engine_harness import EventLog, Stack
from procs import eventually

from actwheel.bus.envelope import Envelope
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import Conflict
from actwheel.messages import RunsReady
from actwheel.service import Caller
from actwheel.storage.records import AutomationStatus, Run, RunStatus

ALICE = Caller("alice")
LEAD = 2.0
LOG_ACTION = {"type": "simple.op", "config": {"op": "log", "message": "first"}}
EDITED_ACTION = {"type": "simple.op", "config": {"op": "log", "message": "edited"}}
#: Outlasts the instant of the automation it belongs to when started by a run now at creation.
LONG_ACTION = {"type": "simple.op", "config": {"op": "delay", "seconds": LEAD + 6}}


def _instant(stack: Stack, seconds: float) -> datetime:
    return (stack.clock.now() + timedelta(seconds=seconds)).astimezone(UTC).replace(microsecond=0)


def _once(at: datetime) -> dict[str, Any]:
    return {"type": "once", "at": at.isoformat()}


async def _to(stack: Stack, instant: datetime) -> None:
    """Embedded: move the virtual clock to ``instant``. Services: real time gets there by itself."""
    if isinstance(stack.clock, VirtualClock):
        delta = (instant - stack.clock.now()).total_seconds()
        if delta > 0:
            await stack.clock.advance_and_settle(delta)


def _ahead(log: EventLog) -> list[dict[str, Any]]:
    return [e for e in log.of("run.ready") if e.get("not_before")]


async def _planned_ahead(stack: Stack, log: EventLog, at: datetime, count: int = 1) -> dict[str, Any]:
    """Into the lead window of ``at``; the ``count``-th ``run.ready`` announced ahead of it."""
    await _to(stack, at - timedelta(seconds=LEAD - 0.5))
    await log.wait_for(lambda lg: len(_ahead(lg)) >= count, within=15)
    ready = _ahead(log)[count - 1]
    assert datetime.fromisoformat(ready["not_before"]) == at
    return ready


async def _run(engine: Engine, run_id: str) -> Run:
    async with engine.store.transaction() as tx:
        return await tx.runs.get(run_id)


async def _runs_of(engine: Engine, automation_id: str) -> list[Run]:
    """By creation; a withdrawn run before its re-plan (under the virtual clock they may share a time)."""
    async with engine.store.transaction() as tx:
        runs = await tx.runs.query(automation_id=automation_id)
    return sorted(runs, key=lambda r: (r.created_at, r.status is not RunStatus.CANCELED))


async def _until_running(engine: Engine, run_id: str) -> None:
    """Poll the run's row (bounded) until a router has claimed it: nothing is published at a claim."""
    async def running() -> bool:
        return (await _run(engine, run_id)).status is RunStatus.RUNNING

    await eventually(running, within=15, every=0.02, what=f"run {run_id} to be claimed")


def _key(at: datetime) -> str:
    return f"schedule:{at.isoformat()}"


async def test_a_run_planned_ahead_starts_at_its_instant_never_before(stack: Stack) -> None:
    engine = stack.engine(fire_ahead_s=LEAD)
    async with engine, stack.watch(engine) as log:
        at = _instant(stack, LEAD + 3)
        automation = await engine.service.create(ALICE, {"trigger": _once(at), "action": LOG_ACTION})
        ready = await _planned_ahead(stack, log, at)
        [run_id] = ready["run_ids"]
        planned = await _run(engine, run_id)
        assert (planned.dedupe_key, planned.not_before) == (_key(at), at)
        assert planned.created_at < at  # planned before its instant
        if isinstance(stack.clock, VirtualClock):  # time held inside the window: nothing starts
            await stack.clock.advance_and_settle(LEAD - 0.6)
            assert (await _run(engine, run_id)).status is RunStatus.PENDING
            assert log.of("run.succeeded") == []
        await _to(stack, at)
        [done] = await log.wait_count("run.succeeded", 1)
        finished = await _run(engine, done["run_id"])
        assert finished.id == run_id
        assert finished.started_at is not None
        assert finished.started_at >= at
        assert (await engine.service.get(ALICE, automation.id)).status is AutomationStatus.COMPLETED


async def test_an_edit_inside_the_window_plans_the_instant_again_from_the_edited_automation(stack: Stack) -> None:
    engine = stack.engine(fire_ahead_s=LEAD)
    async with engine, stack.watch(engine) as log:
        at = _instant(stack, LEAD + 3)
        automation = await engine.service.create(ALICE, {"trigger": _once(at), "action": LOG_ACTION})
        [first_id] = (await _planned_ahead(stack, log, at))["run_ids"]
        completed = await engine.service.get(ALICE, automation.id)  # its only instant is planned
        updated = await engine.service.update(ALICE, automation.id, {"action": EDITED_ACTION}, completed.version)
        withdrawn = await _run(engine, first_id)
        assert (withdrawn.status, withdrawn.reason, withdrawn.dedupe_key) == (
            RunStatus.CANCELED, "automation_updated", f"withdrawn:{first_id}")
        assert (updated.next_run_at, updated.status) == (at, AutomationStatus.ACTIVE)  # the cursor went back
        [again_id] = (await _planned_ahead(stack, log, at, count=2))["run_ids"]
        assert again_id != first_id
        await _to(stack, at)
        [done] = await log.wait_count("run.succeeded", 1)
        assert done["run_id"] == again_id
        runs = await _runs_of(engine, automation.id)
        assert [(r.status, r.dedupe_key) for r in runs] == [
            (RunStatus.CANCELED, f"withdrawn:{first_id}"), (RunStatus.SUCCEEDED, _key(at))]
        assert runs[1].action_config == EDITED_ACTION["config"]  # the edited snapshot, not the first
        canceled = [e for e in log.of("run.canceled") if e["run_id"] == first_id]
        assert [e["reason"] for e in canceled] == ["automation_updated"]


async def test_a_trigger_change_inside_the_window_drops_the_old_instant(stack: Stack) -> None:
    engine = stack.engine(fire_ahead_s=LEAD)
    async with engine, stack.watch(engine) as log:
        at = _instant(stack, LEAD + 3)
        automation = await engine.service.create(ALICE, {"trigger": _once(at), "action": LOG_ACTION})
        [first_id] = (await _planned_ahead(stack, log, at))["run_ids"]
        later = at + timedelta(seconds=2)
        current = await engine.service.get(ALICE, automation.id)
        await engine.service.update(ALICE, automation.id, {"trigger": _once(later)}, current.version)
        assert (await _run(engine, first_id)).status is RunStatus.CANCELED
        await _planned_ahead(stack, log, later, count=2)
        await _to(stack, later)
        [done] = await log.wait_count("run.succeeded", 1)
        runs = await _runs_of(engine, automation.id)
        assert [(r.status, r.scheduled_for) for r in runs] == [(RunStatus.CANCELED, at), (RunStatus.SUCCEEDED, later)]
        assert done["run_id"] == runs[1].id


@pytest.mark.parametrize("change", ["disable", "delete"])
async def test_a_disable_or_delete_inside_the_window_cancels_the_run_planned_ahead(stack: Stack, change: str) -> None:
    engine = stack.engine(fire_ahead_s=LEAD)
    async with engine, stack.watch(engine) as log:
        at = _instant(stack, LEAD + 3)
        automation = await engine.service.create(ALICE, {"trigger": _once(at), "action": LOG_ACTION})
        sentinel = await engine.service.create(ALICE, {"trigger": _once(at), "action": LOG_ACTION})
        await _planned_ahead(stack, log, at)
        await log.wait_for(lambda lg: sum(len(e["run_ids"]) for e in _ahead(lg)) >= 2, within=15)
        [planned] = await _runs_of(engine, automation.id)
        if change == "disable":
            await engine.service.set_enabled(ALICE, automation.id, False)
        else:
            await engine.service.delete(ALICE, automation.id)
        await _to(stack, at)
        [done] = await log.wait_count("run.succeeded", 1)  # the instant came: the sentinel's run went
        assert done["automation_id"] == sentinel.id
        [canceled] = await _runs_of(engine, automation.id)
        assert (canceled.id, canceled.status, canceled.reason, canceled.dedupe_key) == (
            planned.id, RunStatus.CANCELED, f"automation_{change}d", _key(at))


async def test_the_overlap_check_of_a_run_planned_ahead_is_taken_at_its_instant(stack: Stack) -> None:
    engine = stack.engine(fire_ahead_s=LEAD)
    async with engine, stack.watch(engine) as log:
        at = _instant(stack, LEAD + 3)
        automation = await engine.service.create(ALICE, {"trigger": _once(at), "action": LONG_ACTION,
                                                         "policy": {"overlap": "skip"}})
        manual = await engine.service.run_now(ALICE, automation.id)  # still going at the instant
        [ahead_id] = (await _planned_ahead(stack, log, at))["run_ids"]
        assert (await _run(engine, ahead_id)).status is RunStatus.PENDING  # not judged at planning
        await _to(stack, at)
        [skipped] = await log.wait_count("run.skipped", 1)
        assert (skipped["run_id"], skipped["reason"]) == (ahead_id, "overlap")
        await _to(stack, at + timedelta(seconds=LEAD + 6))
        [done] = await log.wait_count("run.succeeded", 1, within=20)
        assert done["run_id"] == manual.id
        async with engine.store.transaction() as tx:
            trail = await tx.audit.trail(ahead_id)
        phases = [e.phase for e in trail]
        assert phases[0] == "OVERLAP", phases
        assert not {"DISPATCH", "EXECUTE"} & set(phases), phases


async def test_overlap_allow_runs_the_run_planned_ahead_beside_the_one_going(embedded: Stack) -> None:
    engine = embedded.engine(fire_ahead_s=LEAD)
    async with engine, embedded.watch(engine) as log:
        at = _instant(embedded, LEAD + 3)
        automation = await engine.service.create(ALICE, {"trigger": _once(at), "action": LONG_ACTION,
                                                         "policy": {"overlap": "allow"}})
        await engine.service.run_now(ALICE, automation.id)
        [ahead_id] = (await _planned_ahead(embedded, log, at))["run_ids"]
        await _to(embedded, at)
        await _until_running(engine, ahead_id)  # its delay started: now move time past it
        await _to(embedded, at + timedelta(seconds=LEAD + 7))
        done = await log.wait_count("run.succeeded", 2)
        assert ahead_id in {e["run_id"] for e in done}
        assert log.of("run.skipped") == []


async def test_a_refused_edit_inside_the_window_withdraws_nothing(stack: Stack) -> None:
    engine = stack.engine(fire_ahead_s=LEAD)
    async with engine, stack.watch(engine) as log:
        at = _instant(stack, LEAD + 3)
        automation = await engine.service.create(ALICE, {"trigger": _once(at), "action": LOG_ACTION})
        [run_id] = (await _planned_ahead(stack, log, at))["run_ids"]
        with pytest.raises(Conflict):  # a stale version: refused before anything is withdrawn
            await engine.service.update(ALICE, automation.id, {"action": EDITED_ACTION}, automation.version - 1)
        assert (await _run(engine, run_id)).status is RunStatus.PENDING
        await _to(stack, at)
        [done] = await log.wait_count("run.succeeded", 1)
        assert done["run_id"] == run_id
        assert (await _run(engine, run_id)).action_config == LOG_ACTION["config"]


async def test_an_engine_stopped_while_it_holds_a_run_planned_ahead_loses_nothing(stack: Stack) -> None:
    first = stack.engine(fire_ahead_s=LEAD)
    async with first, stack.watch(first) as log:
        at = _instant(stack, LEAD + 3)
        automation = await first.service.create(ALICE, {"trigger": _once(at), "action": LOG_ACTION})
        [run_id] = (await _planned_ahead(stack, log, at))["run_ids"]
    # stopped before the instant: the held run.ready went back to the queue (memory bus: the shared one)
    second = stack.engine(fire_ahead_s=LEAD)
    async with second, stack.watch(second, "run.succeeded") as after:
        await _to(stack, at)
        if isinstance(stack.clock, VirtualClock):  # nothing else moves time: step it for the sweeper too
            for _ in range(12):
                if after.of("run.succeeded"):
                    break
                await stack.clock.advance_and_settle(0.5)
                await asyncio.sleep(0.05)
        [done] = await after.wait_count("run.succeeded", 1, within=20)
        assert done["run_id"] == run_id
        runs = await _runs_of(second, automation.id)
        assert [(r.id, r.status, r.attempt) for r in runs] == [(run_id, RunStatus.SUCCEEDED, 1)]


async def test_deliveries_held_for_their_instant_do_not_keep_a_run_now_from_being_delivered(stack: Stack) -> None:
    """More ``run.ready`` deliveries held until their instant than the prefetch the router has for runs it
    claims at once (2 here): a run now published after them is still delivered and runs at once."""
    engine = stack.engine(fire_ahead_s=LEAD, router_concurrency=2)
    async with engine, stack.watch(engine) as log:
        quick = await engine.service.create(ALICE, {"action": LOG_ACTION,
                                                    "trigger": {"type": "event", "routing_key": "x.y"}})
        later = _instant(stack, 600)  # held for the whole test; the engine's stop gives them back
        for i in range(4):
            held = RunsReady(run_ids=(f"run_held{i}",), not_before=later)
            await engine.bus.publish(engine.bus.topology.events, RunsReady.TYPE,
                                     Envelope.new(type=held.TYPE, data=held.to_data(), source="test"))
        run = await engine.service.run_now(ALICE, quick.id)
        [done] = await log.wait_count("run.succeeded", 1, within=15)
        assert done["run_id"] == run.id
