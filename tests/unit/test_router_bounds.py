"""The router bounds what one run may put into a shared finish transaction and its events, and packs a
finish's lifecycle entries into its pipeline row."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import orjson

from actwheel.actions.base import ActionResult
from actwheel.actions.pipeline import AuditRecord, DispatchOutcome
from actwheel.actors.router import MAX_RESULT_BYTES, _Finish, _policy, _trail_rows, bounded_result
from actwheel.policy import Policy
from actwheel.storage._codec import MAX_JSON_BYTES
from actwheel.storage.records import NewAuditEntry, Origin, Run, RunStatus
from actwheel.storage.trail import PIPELINE_PHASE

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def test_a_normal_result_is_kept_as_it_is() -> None:
    result = {"status": "succeeded", "summary": "ok", "data": {"value": 1}}
    assert bounded_result(result) is result


def test_a_huge_result_becomes_a_note_the_store_accepts() -> None:
    result = {"status": "succeeded", "summary": "big", "data": {"blob": "x" * (2 * MAX_JSON_BYTES)}}
    bounded = bounded_result(result)
    assert bounded["truncated"] is True
    assert bounded["summary"] == "big"
    assert bounded["bytes"] > MAX_JSON_BYTES
    assert len(orjson.dumps(bounded)) < MAX_RESULT_BYTES < MAX_JSON_BYTES


def test_a_result_just_under_the_bound_is_kept() -> None:
    result = {"data": "y" * (MAX_RESULT_BYTES - 100)}
    assert bounded_result(result) is result


def _finish(run_id: str, phases: tuple[AuditRecord, ...]) -> _Finish:
    run = Run(id=run_id, automation_id="a1", dedupe_key="schedule:x", scheduled_for=T0, origin=Origin.SCHEDULE,
              status=RunStatus.RUNNING, reason=None, attempt=1, not_before=None, lease_owner="i1",
              lease_expires_at=T0, lease_epoch=1, action_type="simple.op", action_config={}, policy={},
              owner_id="alice", context={}, result=None, error=None, created_at=T0, updated_at=T0,
              started_at=T0, finished_at=None)
    outcome = DispatchOutcome(status="SUCCEEDED", reason=None, result=ActionResult.ok("ok"),
                              executor_type="simple.op", audit=phases)
    return _Finish(run, outcome, RunStatus.SUCCEEDED, None, None, {})


def _lifecycle(run_id: str, phase: str) -> NewAuditEntry:
    return NewAuditEntry(event_id=f"env-{phase}:{run_id}", phase=phase, actor="actwheel/i1", run_id=run_id,
                         automation_id="a1", occurred_at=T0, details={"event": phase.lower()})


def test_a_finish_carries_its_runs_lifecycle_entries_in_its_pipeline_row() -> None:
    phases = (AuditRecord("EXECUTE", {"state": "completed"}, T0),)
    events = [_lifecycle("r1", "LIFECYCLE"), _lifecycle("r2", "LIFECYCLE"), _lifecycle("r1", "ACTION")]
    rows = _trail_rows([_finish("r1", phases), _finish("r2", ())], events, "i1")
    packed, alone = rows[0], rows[1:]
    assert (packed.phase, packed.event_id, packed.run_id) == (PIPELINE_PHASE, "r1:1", "r1")
    assert [e["event_id"] for e in packed.details["events"]] == ["env-LIFECYCLE:r1", "env-ACTION:r1"]
    assert alone == [events[1]]  # a finish without phases has no pipeline row: its entries stand alone


def test_a_runs_policy_is_parsed_once_per_shape_and_a_bad_one_is_the_default() -> None:
    first = _finish("r1", ()).run
    same = replace(first, id="r2", policy={"retry": {"max_attempts": 3}, "overlap": "allow"})
    other = replace(first, id="r3", policy={"overlap": "allow", "retry": {"max_attempts": 3}})  # key order
    assert _policy(same) is _policy(other)
    assert _policy(same).retry.max_attempts == 3
    assert _policy(replace(first, policy={"overlap": "sometimes"})) == Policy()
    assert _policy(replace(first, policy={"overlap": "skip"})).overlap == "skip"


def test_entries_that_would_make_the_pipeline_row_too_big_stand_as_rows_of_their_own() -> None:
    """A long composite's phases and a large result together may be more than one row holds: the phases keep
    their row, the lifecycle entries are written beside it (each row within the store's bound)."""
    bulky = tuple(AuditRecord("STEP", {"output": "p" * 40_000}, T0) for _ in range(5))  # ≈ 200 KB of phases
    result = {"data": {"blob": "r" * (MAX_RESULT_BYTES - 1000)}}
    events = [_lifecycle("r1", "LIFECYCLE"),
              NewAuditEntry(event_id="env-ACTION:r1", phase="ACTION", actor="actwheel/i1", run_id="r1",
                            automation_id="a1", occurred_at=T0, details={"result": result})]
    packed, *alone = _trail_rows([_finish("r1", bulky)], events, "i1")
    assert packed.phase == PIPELINE_PHASE
    assert "events" not in packed.details
    assert alone == events
    for row in (packed, *alone):
        assert len(orjson.dumps(row.details)) <= MAX_JSON_BYTES
