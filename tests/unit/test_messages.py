"""Message records: to_data/from_data round trips, bad input naming ``data.<field>``, aliases, single-item forms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from actwheel.errors import InvalidInput, InvalidMessage
from actwheel.messages import (
    MESSAGE_TYPES,
    ActionRequested,
    ActionsCompleted,
    AutomationChanged,
    AutomationCommandRequested,
    AutomationsDue,
    CompletedAction,
    DueItem,
    Message,
    RunsReady,
    RunsTransitioned,
    RunTransition,
    StepProgressed,
    message_from_data,
    parse_instant,
)

T = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
SHANGHAI = timezone(timedelta(hours=8))

SAMPLES: list[Message] = [
    AutomationsDue(items=(DueItem(automation_id="a1", scheduled_for=T),
                          DueItem(automation_id="a2", scheduled_for=T.astimezone(SHANGHAI)))),
    RunsReady(run_ids=("r1", "r2")),
    RunsReady(run_ids=("r3",), not_before=T),
    RunsTransitioned(status="SUCCEEDED", runs=(
        RunTransition(run_id="r1", automation_id="a1", status="SUCCEEDED", reason=None, attempt=2,
                      scheduled_for=T, action_type="simple.op", summary="done", error=None),
        RunTransition(run_id="r3", automation_id=None, status="SUCCEEDED"))),
    RunsTransitioned(status="SKIPPED", runs=(
        RunTransition(run_id="r4", automation_id="a1", status="SKIPPED", reason="overlap", scheduled_for=T,
                      skipped_through=T + timedelta(minutes=2), instants=3),)),
    RunsTransitioned(status="FAILED", runs=(
        RunTransition(run_id="r2", automation_id=None, status="FAILED", reason="timeout", error="too slow"),)),
    AutomationChanged(automation_id="a1", change="updated", next_run_at=T, version=3),
    AutomationChanged(automation_id="a1", change="deleted"),
    AutomationCommandRequested(command="update", owner_id="alice",
                               args={"automation_id": "a1", "changes": {"name": "x"}, "expected_version": 1}),
    ActionRequested(type="webhook.call", config={"url": "https://example.com", "token": {"$secret": "t"}},
                    owner_id="alice", idempotency_key="k-1", dry_run=True, context={"x": [1, 2]},
                    scopes=("actions:webhook",)),
    ActionsCompleted(actions=(CompletedAction(run_id="r1", automation_id=None, action_type="simple.op",
                                              result={"value": 1}),
                              CompletedAction(run_id="r2", automation_id="a1", action_type="webhook.call"))),
    StepProgressed(run_id="r1", step="a", state="completed", detail={"n": 1}),
]


def _wire(message: Message) -> dict[str, Any]:
    """What a consumer sees: the data object after a trip through JSON."""
    decoded: dict[str, Any] = orjson.loads(orjson.dumps(message.to_data()))
    return decoded


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip_through_json(message: Message) -> None:
    again = message_from_data(message.TYPE, _wire(message))
    assert again == message
    assert type(again) is type(message)


def test_every_registered_type_has_a_sample() -> None:
    assert {m.TYPE for m in SAMPLES} == set(MESSAGE_TYPES)


def test_routing_keys() -> None:
    assert RunsTransitioned(status="RETRY_WAIT", runs=()).routing_key == "run.retry_wait"
    assert AutomationChanged(automation_id="a", change="disabled").routing_key == "automation.disabled"


def test_due_single_item_form() -> None:
    message = AutomationsDue.from_data({"automation_id": "a1", "scheduled_for": "2030-01-01T09:00:00+00:00"})
    assert message.items == (DueItem(automation_id="a1", scheduled_for=T),)


def test_runs_ready_single_item_form() -> None:
    assert RunsReady.from_data({"run_id": "r9"}).run_ids == ("r9",)


def test_action_request_accepts_executor_type_and_parameters() -> None:
    message = ActionRequested.from_data({"executor_type": "CreateObject", "parameters": {"object_type": "Order"},
                                         "owner_id": "alice"})
    assert message.type == "CreateObject"
    assert message.config == {"object_type": "Order"}
    assert (message.dry_run, message.idempotency_key, message.scopes, message.context) == (False, None, (), {})


def test_action_request_prefers_type_and_config_over_aliases() -> None:
    message = ActionRequested.from_data({"type": "simple.op", "executor_type": "Webhook", "config": {"op": "log"},
                                         "parameters": {"url": "x"}, "owner_id": "alice"})
    assert (message.type, message.config) == ("simple.op", {"op": "log"})


def test_from_data_does_not_mutate_its_input() -> None:
    data = {"executor_type": "SimpleOp", "parameters": {"op": "log"}, "owner_id": "alice"}
    before = dict(data)
    ActionRequested.from_data(data)
    assert data == before


BAD: list[tuple[type[Message], dict[str, Any], str, Any]] = [
    (AutomationsDue, {"items": "a1"}, "data.items", "a1"),
    (AutomationsDue, {}, "data.items", None),
    (AutomationsDue, {"items": [42]}, "data.items[0]", 42),
    (AutomationsDue, {"items": [{"automation_id": "", "scheduled_for": "2030-01-01T00:00:00Z"}]},
     "data.items[0].automation_id", ""),
    (AutomationsDue, {"items": [{"automation_id": "a", "scheduled_for": "2030-01-01T00:00:00"}]},
     "data.items[0].scheduled_for", "2030-01-01T00:00:00"),
    (AutomationsDue, {"automation_id": "a", "scheduled_for": "tomorrow"}, "data.scheduled_for", "tomorrow"),
    (RunsReady, {"run_ids": ["r1", 7]}, "data.run_ids[1]", 7),
    (RunsReady, {"run_id": ""}, "data.run_id", ""),
    (RunsReady, {}, "data.run_ids", None),
    (RunsReady, {"run_ids": ["r1"], "not_before": "2030-01-01T09:00:00"}, "data.not_before", "2030-01-01T09:00:00"),
    (RunsReady, {"run_ids": ["r1"], "not_before": 5}, "data.not_before", 5),
    (RunsTransitioned, {"runs": []}, "data.status", None),
    (RunsTransitioned, {"status": "FAILED"}, "data.runs", None),
    (RunsTransitioned, {"status": "FAILED", "runs": [7]}, "data.runs[0]", 7),
    (RunsTransitioned, {"status": "FAILED", "runs": [{"status": "FAILED"}]}, "data.runs[0].run_id", None),
    (RunsTransitioned, {"status": "FAILED", "runs": [{"run_id": "r", "status": "FAILED", "attempt": "2"}]},
     "data.runs[0].attempt", "2"),
    (RunsTransitioned, {"status": "SKIPPED", "runs": [{"run_id": "r", "status": "SKIPPED", "instants": 0}]},
     "data.runs[0].instants", 0),
    (RunsTransitioned, {"status": "SKIPPED", "runs": [{"run_id": "r", "status": "SKIPPED", "skipped_through": "x"}]},
     "data.runs[0].skipped_through", "x"),
    (RunsTransitioned, {"status": "FAILED", "runs": [{"run_id": "r", "status": "FAILED", "automation_id": 5}]},
     "data.runs[0].automation_id", 5),
    (RunsTransitioned, {"status": "FAILED", "runs": [{"run_id": "r", "status": 1}]}, "data.runs[0].status", 1),
    (RunsTransitioned, {"status": "FAILED", "runs": [{"run_id": "r", "status": "OK"}]}, "data.runs[0].status", "OK"),
    (RunsTransitioned, {"status": "OK", "runs": [{"run_id": "r", "status": "OK", "scheduled_for": 17}]},
     "data.runs[0].scheduled_for", 17),
    (AutomationChanged, {"change": "created"}, "data.automation_id", None),
    (AutomationChanged, {"automation_id": "a", "change": "created", "version": "1"}, "data.version", "1"),
    (AutomationChanged, {"automation_id": "a", "change": "created", "next_run_at": "soon"}, "data.next_run_at",
     "soon"),
    (AutomationCommandRequested, {"command": "explode", "owner_id": "o"}, "data.command", "explode"),
    (AutomationCommandRequested, {"command": "create", "owner_id": ""}, "data.owner_id", ""),
    (AutomationCommandRequested, {"command": "create", "owner_id": "o", "args": []}, "data.args", []),
    (ActionRequested, {"config": {}, "owner_id": "o"}, "data.type", None),
    (ActionRequested, {"type": "t", "config": [1], "owner_id": "o"}, "data.config", [1]),
    (ActionRequested, {"type": "t", "owner_id": "o", "dry_run": "yes"}, "data.dry_run", "yes"),
    (ActionRequested, {"type": "t", "owner_id": "o", "scopes": "a"}, "data.scopes", "a"),
    (ActionRequested, {"type": "t", "owner_id": "o", "scopes": ["a", 1]}, "data.scopes", ["a", 1]),
    (ActionRequested, {"type": "t", "owner_id": "o", "idempotency_key": ""}, "data.idempotency_key", ""),
    (ActionRequested, {"type": "t", "owner_id": "o", "context": "c"}, "data.context", "c"),
    (ActionRequested, {"type": "t"}, "data.owner_id", None),
    (ActionsCompleted, {}, "data.actions", None),
    (ActionsCompleted, {"actions": ["x"]}, "data.actions[0]", "x"),
    (ActionsCompleted, {"actions": [{"run_id": "r", "action_type": "t", "result": 3}]}, "data.actions[0].result", 3),
    (ActionsCompleted, {"actions": [{"run_id": "r"}]}, "data.actions[0].action_type", None),
    (StepProgressed, {"run_id": "r", "step": "a"}, "data.state", None),
    (StepProgressed, {"run_id": "r", "step": "a", "state": "x", "detail": "d"}, "data.detail", "d"),
]


@pytest.mark.parametrize(("kind", "data", "field", "value"), BAD,
                         ids=[f"{k.__name__}-{f}" for k, _, f, _ in BAD])
def test_bad_data_names_field_and_value(kind: type[Message], data: dict[str, Any], field: str, value: Any) -> None:
    with pytest.raises(InvalidMessage) as caught:
        message_from_data(kind.TYPE, data)
    assert caught.value.field == field
    assert caught.value.value == value
    assert field in str(caught.value)


def test_invalid_message_is_invalid_input() -> None:
    assert issubclass(InvalidMessage, InvalidInput)
    assert issubclass(InvalidMessage, ValueError)


def test_unknown_type_lists_the_known_ones() -> None:
    with pytest.raises(InvalidMessage) as caught:
        message_from_data("run.exploded", {})
    assert caught.value.field == "type"
    assert "automation.due" in caught.value.expected
    assert "action.request" in caught.value.expected


def test_data_must_be_an_object() -> None:
    with pytest.raises(InvalidMessage) as caught:
        message_from_data(RunsReady.TYPE, ["r1"])  # type: ignore[arg-type]
    assert caught.value.field == "data"


def test_parse_instant() -> None:
    assert parse_instant("2030-01-01T17:00:00+08:00", "x") == T
    assert parse_instant(T, "x") is T
    for bad in ("2030-01-01T09:00:00", "", None, 1.5, datetime(2030, 1, 1)):
        with pytest.raises(InvalidMessage) as caught:
            parse_instant(bad, "data.when")
        assert caught.value.field == "data.when"


@pytest.mark.parametrize(("kind", "data", "field"), [
    (RunsTransitioned, {"status": "FAILED", "runs": [{"run_id": "r", "status": "FAILED", "attempt": True}]},
     "data.runs[0].attempt"),
    (AutomationChanged, {"automation_id": "a", "change": "created", "version": False}, "data.version"),
])
def test_booleans_are_not_integers(kind: type[Message], data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidMessage) as caught:
        message_from_data(kind.TYPE, data)
    assert caught.value.field == field


def test_the_due_fast_path_writes_what_the_generic_walk_writes() -> None:
    from actwheel.messages import _record_data  # the generic walk every other message uses

    due = SAMPLES[0]
    assert isinstance(due, AutomationsDue)
    assert due.to_data() == _record_data(due)


@pytest.mark.parametrize("message", [
    RunsTransitioned(status="SKIPPED", runs=(
        RunTransition(run_id="r1", automation_id="a", status="SKIPPED", reason="overlap", attempt=2,
                      scheduled_for=T, action_type="simple.op", summary="s", error="e",
                      skipped_through=T + timedelta(minutes=5), instants=6),
        RunTransition(run_id="r2", automation_id=None, status="SKIPPED"))),
    ActionsCompleted(actions=(
        CompletedAction(run_id="r1", automation_id="a", action_type="webhook.call",
                        result={"data": {"at": T, "items": (1, {"deep": [T]}), "none": None}, "status": "succeeded"}),
        CompletedAction(run_id="r2", automation_id=None, action_type="simple.op"))),
], ids=["runs.transitioned", "actions.completed"])
def test_the_lifecycle_fast_paths_write_what_the_generic_walk_writes(message: Message) -> None:
    from actwheel.messages import _record_data

    assert message.to_data() == _record_data(message)


def test_run_ready_leaves_not_before_out_unless_the_runs_were_planned_ahead() -> None:
    assert RunsReady(run_ids=("r1",)).to_data() == {"run_ids": ["r1"]}  # the contract of every other run
    ahead = RunsReady(run_ids=("r1",), not_before=T).to_data()
    assert ahead == {"run_ids": ["r1"], "not_before": "2030-01-01T09:00:00+00:00"}
    assert RunsReady.from_data(ahead).not_before == T
