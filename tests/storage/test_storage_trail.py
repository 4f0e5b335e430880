"""One trail row per run attempt (issue 15): a packed pipeline row is stored once and read back as its
phases, then the lifecycle entries it carries, on both databases; rows of one phase each (an older
version's, the auditor's) read as they are, and an entry both carried and written alone reads once."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from storage_harness import make_automation, make_run

from actwheel.storage import Store
from actwheel.storage.records import AuditEntry, NewAuditEntry
from actwheel.storage.trail import PIPELINE_PHASE, expand, pipeline_entry

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Phase:
    phase: str
    at: datetime
    details: dict[str, Any] = field(default_factory=dict)


PHASES = [Phase("DISPATCH", T0, {"type": "simple.op"}), Phase("PERMISSION", T0 + timedelta(milliseconds=1)),
          Phase("EXECUTE", T0 + timedelta(milliseconds=7), {"state": "completed", "duration_ms": 6.5})]


async def test_a_pipeline_row_is_one_row_read_back_as_its_phases(store: Store) -> None:
    automation = await make_automation(store)
    run = await make_run(store, automation)
    older = NewAuditEntry(event_id=f"{run.id}:ready", phase="LIFECYCLE", actor="auditor", run_id=run.id,
                          automation_id=automation.id, details={"event": "run.ready"}, occurred_at=T0)
    packed = pipeline_entry(event_id=f"{run.id}:1", actor="router-1", run_id=run.id, automation_id=automation.id,
                            phases=PHASES)
    async with store.transaction() as tx:
        assert await tx.audit.append_many([older, packed]) == 2
        assert await tx.audit.append(packed) is False  # idempotent by event id, like every row

    async with store.transaction() as tx:
        trail = await tx.audit.trail(run.id)
        latest = await tx.audit.for_automation(automation.id, limit=2)

    assert [e.phase for e in trail] == ["LIFECYCLE", "DISPATCH", "PERMISSION", "EXECUTE"]
    assert [e.event_id for e in trail[1:]] == [f"{run.id}:1:{i}" for i in range(3)]
    assert [e.occurred_at for e in trail[1:]] == [p.at for p in PHASES]
    assert trail[3].details == {"state": "completed", "duration_ms": 6.5}
    assert {e.actor for e in trail[1:]} == {"router-1"}
    assert len({e.seq for e in trail[1:]}) == 1  # one row
    assert [e.phase for e in latest] == ["PERMISSION", "EXECUTE"]  # the limit counts phases, not rows


async def test_the_lifecycle_entries_a_pipeline_row_carries_read_back_as_the_auditors_rows(store: Store) -> None:
    automation = await make_automation(store)
    run = await make_run(store, automation)
    at = T0 + timedelta(milliseconds=9)
    lifecycle = NewAuditEntry(event_id=f"env-1:{run.id}", phase="LIFECYCLE", actor="actwheel/i1", run_id=run.id,
                              automation_id=automation.id, occurred_at=at,
                              details={"event": "run.succeeded", "status": "SUCCEEDED"})
    action = NewAuditEntry(event_id=f"env-2:{run.id}", phase="ACTION", actor="actwheel/i1", run_id=run.id,
                           automation_id=automation.id, occurred_at=at,
                           details={"event": "action.completed", "result": {"summary": "set x"}})
    packed = pipeline_entry(event_id=f"{run.id}:1", actor="router-1", run_id=run.id, automation_id=automation.id,
                            phases=PHASES, events=[lifecycle, action])
    async with store.transaction() as tx:
        assert await tx.audit.append_many([packed]) == 1
        # an older auditor that does not know the mark writes the lifecycle entry as a row of its own
        assert await tx.audit.append(lifecycle) is True

    async with store.transaction() as tx:
        trail = await tx.audit.trail(run.id)
        latest = await tx.audit.for_automation(automation.id, limit=3)

    assert [e.phase for e in trail] == ["DISPATCH", "PERMISSION", "EXECUTE", "LIFECYCLE", "ACTION"]
    assert [(e.event_id, e.actor, e.occurred_at, e.automation_id) for e in trail[3:]] == [
        (f"env-1:{run.id}", "actwheel/i1", at, automation.id), (f"env-2:{run.id}", "actwheel/i1", at, automation.id)]
    assert trail[3].details == {"event": "run.succeeded", "status": "SUCCEEDED"}
    assert trail[4].details["result"] == {"summary": "set x"}
    assert len({e.seq for e in trail}) == 1  # one row: the duplicate written alone is read once
    assert [e.phase for e in latest] == ["EXECUTE", "LIFECYCLE", "ACTION"]


def test_a_row_that_is_not_a_pipeline_row_expands_to_itself() -> None:
    entry = AuditEntry(seq=1, event_id="e", phase=PIPELINE_PHASE, actor="x", run_id="r", automation_id=None,
                       details={"phases": "not a list"}, occurred_at=T0)
    assert expand(entry) == [entry]


def test_a_pipeline_row_needs_a_phase() -> None:
    with pytest.raises(ValueError, match="at least one phase"):
        pipeline_entry(event_id="e", actor="x", run_id="r", automation_id=None, phases=[])


def test_a_pipeline_rows_json_writes_its_times_as_isoformat_would() -> None:
    """The packed row keeps its times as datetimes (orjson writes them, 10× cheaper than isoformat()); what
    is stored must be the text the readers parse back: the same as with isoformat strings, byte for byte."""
    from datetime import timezone

    import orjson

    from actwheel.storage._codec import json_field

    times = [T0 + timedelta(microseconds=123_456), T0, T0.astimezone(timezone(timedelta(hours=8))),
             T0 + timedelta(microseconds=5)]
    phases = [Phase(f"P{i}", at, {"i": i}) for i, at in enumerate(times)]
    event = NewAuditEntry(event_id="env-1:r", phase="LIFECYCLE", actor="a", run_id="r", automation_id="x",
                          details={"status": "SUCCEEDED"}, occurred_at=times[0])
    unstamped = NewAuditEntry(event_id="env-2:r", phase="ACTION", actor="a", run_id="r", details={})
    packed = pipeline_entry(event_id="r:1", actor="a", run_id="r", automation_id="x", phases=phases,
                            events=[event, unstamped])
    as_strings = {"phases": [{"phase": p.phase, "at": p.at.isoformat(), "details": p.details} for p in phases],
                  "events": [{"event_id": e.event_id, "phase": e.phase, "actor": e.actor,
                              "at": None if e.occurred_at is None else e.occurred_at.isoformat(),
                              "automation_id": e.automation_id, "details": e.details} for e in (event, unstamped)]}
    assert json_field("details", packed.details) == orjson.dumps(as_strings).decode()


@pytest.mark.parametrize("micros", [0, 1, -1, 123_456, 1_796_000_000_123_456, -86_400_000_001, 253_402_300_799_999_999])
def test_sqlite_instants_round_trip_through_micros(micros: int) -> None:
    """How SQLite stores instants (µs since the epoch): read back to the same instant, to the microsecond."""
    from actwheel.storage._codec import from_micros, to_micros

    at = from_micros(micros)
    assert at.tzinfo is UTC
    assert at == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    assert to_micros(at) == micros
