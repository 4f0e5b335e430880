"""Parked overlaps end to end, on both stacks: an ``overlap: skip`` automation firing every second whose
run takes 3.5 s. Its busy instants are parked and written as SKIPPED(overlap) ranges when each run
ends; every instant is recorded exactly once, and no run of it starts before the previous one ended.

Embedded stack: memory bus + SQLite, the test moves virtual time (the delay sleeps on it too).
Services stack: RabbitMQ + PostgreSQL in real time.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from engine_harness import Stack, pass_time

from actwheel.engine import Engine
from actwheel.run_context import instants_of
from actwheel.service import Caller
from actwheel.storage.records import Run, RunStatus
from actwheel.triggers import preview
from tests.instants import recorded_instants

ALICE = Caller("alice")
SLOW = {"type": "simple.op", "config": {"op": "delay", "seconds": 3.5}}
WINDOW_S = 11


async def _runs(engine: Engine, automation_id: str) -> list[Run]:
    async with engine.store.transaction() as tx:
        runs = await tx.runs.query(automation_id=automation_id, limit=1000)
    return sorted(runs, key=_scheduled)


def _scheduled(run: Run) -> datetime:
    assert run.scheduled_for is not None
    return run.scheduled_for


def _started(run: Run) -> datetime:
    assert run.started_at is not None
    return run.started_at


async def test_a_slow_skip_automation_records_its_busy_instants_as_ranges(stack: Stack) -> None:
    engine = stack.engine()
    async with engine:
        start = (stack.clock.now() + timedelta(seconds=2)).astimezone(UTC).replace(microsecond=0)
        trigger = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                   "start_date_time": start.isoformat()}
        automation = await engine.service.create(ALICE, {"name": "slow", "trigger": trigger, "action": SLOW,
                                                         "policy": {"overlap": "skip", "grace_s": 30}})
        await pass_time(stack, 2 + WINDOW_S)
        runs = await _runs(engine, automation.id)
        for _ in range(100):  # on a slow box the first runs may still be going: wait for two
            if sum(1 for r in runs if r.status is RunStatus.SUCCEEDED) >= 2:
                break
            await pass_time(stack, 0.5)
            runs = await _runs(engine, automation.id)

    expected = preview(trigger, after=start - timedelta(microseconds=1), count=WINDOW_S + 200)
    seen = recorded_instants(((_scheduled(r), r.context) for r in runs), expected)
    recorded = sorted(seen)
    assert set(seen.values()) == {1}, seen  # none twice
    assert recorded == expected[:len(recorded)], recorded  # none missing: a prefix of the trigger's instants
    assert len(recorded) >= WINDOW_S - 5, (len(recorded), [(r.status, r.reason, r.context) for r in runs])
    ranges = [r for r in runs if r.status is RunStatus.SKIPPED and instants_of(r.context) > 1]
    assert ranges, [(r.status.value, r.reason, instants_of(r.context)) for r in runs]
    assert {r.reason for r in runs if r.status is RunStatus.SKIPPED} == {"overlap"}
    executed = sorted((r for r in runs if r.started_at is not None), key=_started)
    for earlier, later in itertools.pairwise(executed):  # overlap skip: one run at a time
        assert earlier.finished_at is not None
        assert _started(later) >= earlier.finished_at, (earlier, later)
