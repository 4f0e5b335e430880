"""The parsed-spec cache (planner and transient timers): parsed once per automation version, never stale
after a change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from actwheel.actors.planner import Planner
from actwheel.actors.planning import ParsedSpecs
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.settings import Settings
from actwheel.storage.records import Automation, AutomationStatus, InsertedRun, Origin, Run, RunStatus

T0 = datetime(2030, 1, 1, tzinfo=UTC)
EVERY_SECOND = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                "start_date_time": T0.isoformat()}


def _automation(**overrides: Any) -> Automation:
    values: dict[str, Any] = {
        "id": "a1", "owner_id": "alice", "name": "n", "trigger": EVERY_SECOND, "action_type": "simple.op",
        "action_config": {}, "policy": {"overlap": "allow"}, "labels": {}, "enabled": True,
        "status": AutomationStatus.ACTIVE, "durable": True, "next_run_at": T0, "end_at": None, "version": 1,
        "partition": 3, "created_at": T0, "updated_at": T0}
    values.update(overrides)
    return Automation(**values)


def test_same_version_is_parsed_once() -> None:
    specs = ParsedSpecs()
    a = _automation()
    first = specs.get(a)
    assert specs.get(replace(a, next_run_at=T0 + timedelta(seconds=1))) is first  # the cursor moved, no edit
    assert first[0].next_after(T0) == T0 + timedelta(seconds=1)
    assert first[1].overlap == "allow"


def test_a_new_version_is_parsed_again() -> None:
    specs = ParsedSpecs()
    specs.get(_automation())
    edited = _automation(version=2, trigger={**EVERY_SECOND, "interval": 5}, policy={"overlap": "skip"})
    trigger, policy = specs.get(edited)
    assert trigger.next_after(T0) == T0 + timedelta(seconds=5)
    assert policy.overlap == "skip"


def test_capacity_bounds_the_cache() -> None:
    specs = ParsedSpecs(capacity=2)
    for i in range(5):
        specs.get(_automation(id=f"a{i}"))
    assert len(specs._specs) <= 2



def test_a_failing_commit_observer_does_not_fail_the_committed_batch(tmp_path: Path) -> None:
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'e.db'}", instance="test-1", auth=False),
                    clock=VirtualClock(T0))
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    seen: list[int] = []

    def broken(runs: Sequence[Run], at: datetime) -> None:
        raise RuntimeError("observer bug")

    planner.on_commit(broken)
    planner.on_commit(lambda runs, at: seen.append(len(runs)))
    planner._observe([InsertedRun(run=_run(), created=True), InsertedRun(run=_run(id="r2"), created=False)])
    assert seen == [1]  # the next observer still ran with the created run, and nothing was raised


def _run(**overrides: Any) -> Run:
    values: dict[str, Any] = {
        "id": "r1", "automation_id": "a1", "dedupe_key": "schedule:x", "scheduled_for": T0,
        "origin": Origin.SCHEDULE, "status": RunStatus.PENDING, "reason": None, "attempt": 0, "not_before": None,
        "lease_owner": None, "lease_expires_at": None, "lease_epoch": 0, "action_type": "simple.op",
        "action_config": {}, "policy": {}, "owner_id": "alice", "context": {}, "result": None, "error": None,
        "created_at": T0, "updated_at": T0, "started_at": None, "finished_at": None}
    values.update(overrides)
    return Run(**values)
