"""EventFactory: outbox rows decode back to the envelopes and messages they were built from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actwheel.bus.envelope import DEFAULT_MAX_BYTES, SCHEMA_VERSION, SCHEMA_VERSION_HEADER, decode
from actwheel.bus.topology import DEFAULT_TOPOLOGY
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import InvalidMessage
from actwheel.events import MAX_EVENT_TEXT, READY_BATCH, EventFactory, transition_of
from actwheel.messages import (
    EVENT_BATCH,
    QUIET_DUE_ITEMS,
    QUIET_READY_RUNS,
    ActionsCompleted,
    AutomationChanged,
    AutomationsDue,
    CompletedAction,
    DueItem,
    Message,
    RunsReady,
    RunsTransitioned,
    RunTransition,
    message_from_data,
)
from actwheel.service import Caller
from actwheel.storage.records import (
    Automation,
    AutomationStatus,
    NewOutboxMessage,
    Origin,
    Run,
    RunStatus,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)
SOURCE = "actwheel/test-1"


@pytest.fixture
def factory() -> EventFactory:
    return EventFactory(topology=DEFAULT_TOPOLOGY, clock=VirtualClock(T0), source=SOURCE)


def _automation(**overrides: Any) -> Automation:
    values: dict[str, Any] = {
        "id": "a1", "owner_id": "alice", "name": "n", "trigger": {}, "action_type": "simple.op",
        "action_config": {}, "policy": {}, "labels": {}, "enabled": True, "status": AutomationStatus.ACTIVE,
        "durable": True, "next_run_at": T0 + timedelta(minutes=1), "end_at": None, "version": 4, "partition": 3,
        "created_at": T0, "updated_at": T0}
    values.update(overrides)
    return Automation(**values)


def _run(**overrides: Any) -> Run:
    values: dict[str, Any] = {
        "id": "r1", "automation_id": "a1", "dedupe_key": "schedule:x", "scheduled_for": T0,
        "origin": Origin.SCHEDULE, "status": RunStatus.SUCCEEDED, "reason": None, "attempt": 2, "not_before": None,
        "lease_owner": None, "lease_expires_at": None, "lease_epoch": 1, "action_type": "simple.op",
        "action_config": {}, "policy": {}, "owner_id": "alice", "context": {}, "result": None, "error": None,
        "created_at": T0, "updated_at": T0, "started_at": T0, "finished_at": T0}
    values.update(overrides)
    return Run(**values)


def _decoded(row: NewOutboxMessage) -> tuple[Any, Message]:
    envelope = decode(row.body)
    return envelope, message_from_data(envelope.type, envelope.data)


def test_automation_changed_row(factory: EventFactory) -> None:
    row = factory.automation_changed(_automation(trigger={"type": "cron", "expression": "0 9 * * *"}), "updated")
    envelope, message = _decoded(row)
    assert (row.exchange, row.routing_key) == (DEFAULT_TOPOLOGY.events, "automation.updated")
    assert row.headers == {SCHEMA_VERSION_HEADER: SCHEMA_VERSION}
    assert (envelope.type, envelope.source, envelope.occurred_at) == ("automation.changed", SOURCE, T0)
    assert message == AutomationChanged(automation_id="a1", change="updated", next_run_at=T0 + timedelta(minutes=1),
                                        version=4, trigger_type="cron")


@pytest.mark.parametrize("bad", [7, ["cron"], {"type": "cron"}, True])
def test_automation_changed_names_a_trigger_type_that_is_not_a_string(bad: Any) -> None:
    data = {"automation_id": "a1", "change": "updated", "trigger_type": bad}
    with pytest.raises(InvalidMessage) as caught:
        AutomationChanged.from_data(data)
    assert caught.value.errors[0].field == "data.trigger_type"
    assert caught.value.errors[0].value == bad


@pytest.mark.parametrize(("change", "trigger_type", "may_listen"), [
    ("created", "event", True), ("created", None, True), ("updated", "cron", False),
    ("deleted", None, False), ("completed", "event", False)])
def test_whether_a_change_may_leave_the_automation_listening_to_events(change: str, trigger_type: str | None,
                                                         may_listen: bool) -> None:
    assert AutomationChanged(automation_id="a", change=change, trigger_type=trigger_type).may_listen is may_listen


def test_automation_gone_row(factory: EventFactory) -> None:
    row = factory.automation_gone("a9", "deleted")
    assert row.routing_key == "automation.deleted"
    assert _decoded(row)[1] == AutomationChanged(automation_id="a9", change="deleted")


def test_run_transitioned_row_is_correlated_by_run(factory: EventFactory) -> None:
    run = _run(status=RunStatus.RETRY_WAIT, reason="error")
    row = factory.run_transitioned(run, summary="try again", error="boom")
    envelope, message = _decoded(row)
    assert row.routing_key == "run.retry_wait"
    assert envelope.correlation_id == "r1"
    assert message == RunsTransitioned(status="RETRY_WAIT", runs=(RunTransition(
        run_id="r1", automation_id="a1", status="RETRY_WAIT", reason="error", attempt=2, scheduled_for=T0,
        action_type="simple.op", summary="try again", error="boom"),))


def test_action_completed_row(factory: EventFactory) -> None:
    row = factory.action_completed(_run(automation_id=None), {"object_id": "o1"})
    envelope, message = _decoded(row)
    assert row.routing_key == "action.completed"
    assert envelope.correlation_id == "r1"
    assert message == ActionsCompleted(actions=(CompletedAction(run_id="r1", automation_id=None,
                                                                action_type="simple.op", result={"object_id": "o1"}),))


def test_transitions_are_one_message_per_status_in_first_seen_order(factory: EventFactory) -> None:
    runs = [_run(id=f"r{i}", status=RunStatus.FAILED if i % 3 == 1 else RunStatus.SUCCEEDED) for i in range(7)]
    rows = factory.runs_transitioned([transition_of(r) for r in runs])
    assert [r.routing_key for r in rows] == ["run.succeeded", "run.failed"]
    decoded = [_decoded(r) for r in rows]
    assert [e.correlation_id for e, _ in decoded] == [None, None]  # a batch is no single run's
    assert [[t.run_id for t in m.runs] for _, m in decoded] == [  # type: ignore[attr-defined]
        ["r0", "r2", "r3", "r5", "r6"], ["r1", "r4"]]


def test_transitions_are_chunked(factory: EventFactory) -> None:
    runs = [_run(id=f"r{i}") for i in range(EVENT_BATCH + 1)]
    rows = factory.runs_transitioned([transition_of(r) for r in runs])
    assert [len(_decoded(r)[1].runs) for r in rows] == [EVENT_BATCH, 1]  # type: ignore[attr-defined]


def test_completed_actions_are_chunked_by_result_size(factory: EventFactory) -> None:
    big = {"blob": "x" * 100_000}
    completed = [CompletedAction(run_id=f"r{i}", automation_id=None, action_type="t", result=big) for i in range(5)]
    rows = factory.actions_completed(completed)
    sizes = [len(_decoded(r)[1].actions) for r in rows]  # type: ignore[attr-defined]
    assert sum(sizes) == 5
    assert len(rows) > 1
    assert all(len(r.body) < 400_000 for r in rows)


def test_canceled_runs_are_one_message(factory: EventFactory) -> None:
    rows = factory.runs_canceled(["r1", "r2"], "a1", "disabled")
    assert len(rows) == 1
    assert rows[0].routing_key == "run.canceled"
    message = _decoded(rows[0])[1]
    assert [(t.run_id, t.status, t.reason) for t in message.runs] == [  # type: ignore[attr-defined]
        ("r1", "CANCELED", "disabled"), ("r2", "CANCELED", "disabled")]


def test_runs_ready_is_chunked(factory: EventFactory) -> None:
    ids = [f"r{i}" for i in range(2 * READY_BATCH + 1)]
    rows = factory.runs_ready(ids)
    # the last chunk, of one run, is small enough for the quiet lane
    assert [r.routing_key for r in rows] == ["run.ready", "run.ready", "run.ready.quiet"]
    decoded = [_decoded(r)[1] for r in rows]
    assert all(isinstance(m, RunsReady) for m in decoded)
    assert [rid for m in decoded for rid in m.run_ids] == ids  # type: ignore[attr-defined]
    assert [len(m.run_ids) for m in decoded] == [READY_BATCH, READY_BATCH, 1]  # type: ignore[attr-defined]
    assert factory.runs_ready([]) == []


@pytest.mark.parametrize(("runs", "key"), [(1, "run.ready.quiet"), (QUIET_READY_RUNS, "run.ready.quiet"),
                                           (QUIET_READY_RUNS + 1, "run.ready")])
def test_small_run_ready_takes_the_quiet_key(factory: EventFactory, runs: int, key: str) -> None:
    rows = factory.runs_ready([f"r{i}" for i in range(runs)], not_before=T0)
    assert [r.routing_key for r in rows] == [key]
    message = _decoded(rows[0])
    assert message[0].type == RunsReady.TYPE  # the type is the same on both keys: one decoder, one handler
    assert message[1] == RunsReady(run_ids=tuple(f"r{i}" for i in range(runs)), not_before=T0)


@pytest.mark.parametrize(("items", "key"), [(0, "automation.due.quiet"), (QUIET_DUE_ITEMS, "automation.due.quiet"),
                                            (QUIET_DUE_ITEMS + 1, "automation.due")])
def test_small_due_announcement_takes_the_quiet_key(items: int, key: str) -> None:
    due = AutomationsDue(items=tuple(DueItem(automation_id=f"a{i}", scheduled_for=T0) for i in range(items)))
    assert due.routing_key == key


def test_every_row_has_its_own_event_id(factory: EventFactory) -> None:
    rows = [factory.automation_gone("a", "deleted") for _ in range(50)]
    assert len({decode(r.body).id for r in rows}) == 50


async def test_rows_written_by_the_service_decode_back(engine: Engine) -> None:
    automation = await engine.service.create(Caller("alice"), {
        "trigger": {"type": "cron", "expression": "0 * * * * ?", "timezone": "UTC"},
        "action": {"type": "simple.op", "config": {"op": "log", "message": "x"}}})
    run = await engine.service.run_now(Caller("alice"), automation.id)
    async with engine.store.transaction() as tx:
        rows = await tx.outbox.take_batch(100)
    messages = {r.routing_key: message_from_data(decode(r.body).type, decode(r.body).data) for r in rows}
    assert messages["automation.created"] == AutomationChanged(
        automation_id=automation.id, change="created", next_run_at=automation.next_run_at,
        version=automation.version, trigger_type="cron")
    assert messages["run.ready.quiet"] == RunsReady(run_ids=(run.id,))
    assert {decode(r.body).source for r in rows} == {"actwheel/t"}


def test_a_batch_of_long_failures_stays_under_the_bus_limit(factory: EventFactory) -> None:
    error = "function demo raised ValueError: " + "x" * 1100
    runs = [_run(id=f"r{i}", status=RunStatus.FAILED) for i in range(EVENT_BATCH)]
    rows = factory.runs_transitioned([transition_of(r, summary=error, error=error) for r in runs])
    assert len(rows) > 1  # 500 entries of ~2.2 KB of text would be one message over 1 MiB
    assert all(len(r.body) <= DEFAULT_MAX_BYTES for r in rows)
    assert [t.run_id for r in rows for t in _decoded(r)[1].runs] == [r.id for r in runs]  # type: ignore[attr-defined]


def test_event_texts_are_cut(factory: EventFactory) -> None:
    transition = transition_of(_run(status=RunStatus.FAILED), error="e" * 10 * MAX_EVENT_TEXT, summary="short")
    assert transition.error is not None
    assert len(transition.error) == MAX_EVENT_TEXT
    assert transition.error.endswith("the run record has the full text)")
    assert transition.summary == "short"


def test_a_transition_may_name_the_status_a_run_moves_to() -> None:
    before = _run(status=RunStatus.RUNNING, reason=None)
    moved = transition_of(before, status=RunStatus.FAILED, reason="timeout", error="took too long")
    assert (moved.status, moved.reason, moved.error) == ("FAILED", "timeout", "took too long")
    assert moved == transition_of(_run(status=RunStatus.FAILED, reason="timeout"), error="took too long")
    assert transition_of(before).status == "RUNNING"
