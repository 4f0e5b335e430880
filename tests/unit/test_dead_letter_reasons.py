"""The dead-letter reason of a message actwheel refuses is the documented one (issue 14, docs/messages.md).

Data that does not fit its type → ``invalid_message`` with the bare field detail (no class name); an
envelope type the queue does not take → ``unknown_type``; a well-formed request refused as it stands →
``rejected``; the bus identity reasons ``unauthenticated`` / ``permission`` are kept. The planner and the
router are driven directly with the delivery, so the outcome is the one their handlers raise.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from actwheel.actors.consumer import outcome_of
from actwheel.actors.planner import Planner
from actwheel.actors.router import ExecutorRouter
from actwheel.bus.base import Delivery, Reject, Retry
from actwheel.bus.envelope import Envelope
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import (
    Conflict,
    InvalidMessage,
    InvalidTrigger,
    NotFound,
    PermissionDenied,
    StorageUnavailable,
    Unauthenticated,
    Unsupported,
)
from actwheel.settings import Settings

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("error", "reason", "detail"), [
    (InvalidMessage("data.command", "launch", "one of create, update"), "invalid_message",
     "data.command='launch': expected one of create, update"),
    (InvalidTrigger("trigger.expression", "61 * * * * ?", "a Quartz cron expression"), "invalid_message",
     "trigger.expression='61 * * * * ?': expected a Quartz cron expression"),
    (InvalidMessage("type", "no.such", "automation.command"), "unknown_type",
     "type='no.such': expected automation.command"),
    (NotFound("automation", "a-1"), "rejected", f"NotFound: {NotFound('automation', 'a-1')}"),
    (Conflict("automation", "a-1", "version 2, expected 1"), "rejected",
     f"Conflict: {Conflict('automation', 'a-1', 'version 2, expected 1')}"),
    (Unsupported("policy.concurrency", 2, "1"), "rejected",
     f"Unsupported: {Unsupported('policy.concurrency', 2, '1')}"),
    (Unauthenticated("no user_id", token_sent=False), "unauthenticated", "Unauthenticated: no user_id"),
    (PermissionDenied("svc", "act for owner 'bob'"), "permission",
     f"PermissionDenied: {PermissionDenied('svc', 'act for owner ' + repr('bob'))}"),
])
def test_outcome_of_names_the_documented_reason_and_detail(error: Exception, reason: str, detail: str) -> None:
    outcome = outcome_of(error)
    assert isinstance(outcome, Reject)
    assert (outcome.reason, outcome.detail) == (reason, detail)


def test_a_briefly_unavailable_database_is_retried_and_a_bug_is_left_to_the_bus() -> None:
    assert isinstance(outcome_of(StorageUnavailable("down")), Retry)
    bug = RuntimeError("bug")
    assert outcome_of(bug) is bug


# --- the planner's and the router's handlers -----------------------------------------------------------


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'e.db'}", instance="test-1", auth=False),
                    clock=VirtualClock(T0))
    await engine.store.start()
    await engine.bus.start()
    try:
        yield engine
    finally:
        await engine.bus.stop()
        await engine.store.stop()


def _delivery(type_: str, data: dict[str, Any], routing_key: str) -> Delivery:
    envelope = Envelope.new(type=type_, data=data, source="test")
    return Delivery(envelope=envelope, queue="q", exchange="actwheel.commands", routing_key=routing_key,
                    redelivered=False, delivery_count=1, headers={}, trusted=True)


async def _refused(handler: Any, delivery: Delivery) -> Reject:
    with pytest.raises(Reject) as refused:
        await handler(delivery)
    return refused.value


COMMANDS = [
    ({"command": "launch", "owner_id": "alice"}, "data.command='launch': expected one of "),
    ({"command": "enable", "owner_id": "alice", "args": {}},
     "data.args.automation_id=None: expected a non-empty string"),
    ({"command": "create", "owner_id": "alice", "args": {"automation": {
        "trigger": {"type": "cron", "expression": "61 * * * * ?"},
        "action": {"type": "simple.op", "config": {"op": "log", "message": "m"}}}}}, "trigger."),
]


@pytest.mark.parametrize(("data", "detail"), COMMANDS)
async def test_a_command_whose_data_does_not_fit_is_invalid_message_with_the_bare_field(
        engine: Engine, data: dict[str, Any], detail: str) -> None:
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    refused = await _refused(planner.on_command, _delivery("automation.command", data, "command.x"))
    assert refused.reason == "invalid_message", refused.detail
    assert refused.detail.startswith(detail), refused.detail


async def test_an_action_request_without_owner_id_is_invalid_message(engine: Engine) -> None:
    router = engine.actors["router"]
    assert isinstance(router, ExecutorRouter)
    refused = await _refused(router.on_request, _delivery("action.request", {"type": "simple.op"}, "action.request"))
    assert (refused.reason, refused.detail) == ("invalid_message", "data.owner_id=None: expected a non-empty string")


@pytest.mark.parametrize("type_", ["no.such.type", "runs.transitioned"])
async def test_an_envelope_type_the_queue_does_not_take_is_unknown_type(engine: Engine, type_: str) -> None:
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    refused = await _refused(planner.on_command, _delivery(type_, {"status": "SUCCEEDED", "runs": []}, "command.x"))
    assert refused.reason == "unknown_type", refused.detail
    assert refused.detail.startswith(f"type={type_!r}: expected "), refused.detail


async def test_a_command_for_an_unknown_automation_is_rejected(engine: Engine) -> None:
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    refused = await _refused(planner.on_command, _delivery(
        "automation.command", {"command": "enable", "owner_id": "alice", "args": {"automation_id": "nope"}},
        "command.enable"))
    assert refused.reason == "rejected"
    assert refused.detail.startswith("NotFound: "), refused.detail
