"""AutomationService on a real SQLite store: validation, versions, enable/disable, deletes, run_now, ad hoc actions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from actwheel.engine import Engine
from actwheel.errors import Conflict, InvalidInput, NotFound, PermissionDenied, Unsupported
from actwheel.messages import ActionRequested
from actwheel.run_context import OWNER_KEY
from actwheel.service import Caller
from actwheel.storage.records import AutomationStatus, Origin, Run, RunStatus

START = datetime(2030, 1, 1, tzinfo=UTC)  # VirtualClock's default start
ALICE = Caller("alice")
EVERY_MINUTE = {"type": "cron", "expression": "0 * * * * ?", "timezone": "UTC"}
LOG = {"type": "simple.op", "config": {"op": "log", "message": "hi"}}


def _payload(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"name": "minutely", "trigger": dict(EVERY_MINUTE), "action": dict(LOG)}
    payload.update(overrides)
    return payload


async def _runs(engine: Engine, automation_id: str | None = None) -> list[Run]:
    async with engine.store.transaction() as tx:
        return await tx.runs.query(automation_id=automation_id, limit=1000)


async def _outbox(engine: Engine) -> list[tuple[str, dict[str, Any]]]:
    async with engine.store.transaction() as tx:
        rows = await tx.outbox.take_batch(1000)
    return [(r.routing_key, orjson.loads(r.body)["data"]) for r in rows]


def _errors(exc: InvalidInput) -> dict[str, Any]:
    return {e.field: e.value for e in exc.errors}


# --- create ----------------------------------------------------------------------------------------


async def test_create_stores_the_automation_with_its_first_fire(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload(labels={"session_id": "s1", "team": "ops"}))
    assert automation.owner_id == "alice"
    assert automation.action_type == "simple.op"
    assert automation.next_run_at == START + timedelta(minutes=1)
    assert automation.status is AutomationStatus.ACTIVE
    assert automation.enabled
    assert automation.session_id == "s1"
    assert automation.policy["overlap"] == "skip"  # the parsed policy is stored with its defaults
    assert await engine.service.get(ALICE, automation.id) == automation
    assert ("automation.created", {"automation_id": automation.id, "change": "created",
                                   "next_run_at": automation.next_run_at.isoformat(),
                                   "version": automation.version, "trigger_type": "cron"}) in await _outbox(engine)


async def test_create_accepts_alias_and_flat_action_fields(engine: Engine) -> None:
    aliased = await engine.service.create(ALICE, {"trigger": EVERY_MINUTE,
                                                  "action": {"executor_type": "SimpleOp",
                                                             "parameters": {"op": "log", "message": "x"}}})
    flat = await engine.service.create(ALICE, {"trigger": EVERY_MINUTE, "action_type": "simple.op",
                                               "action_config": {"op": "log", "message": "y"}})
    assert (aliased.action_type, aliased.action_config) == ("simple.op", {"op": "log", "message": "x"})
    assert (flat.action_type, flat.action_config) == ("simple.op", {"op": "log", "message": "y"})
    assert flat.name == "simple.op automation"


async def test_create_reports_every_bad_field_at_once(engine: Engine) -> None:
    payload = {
        "name": "x" * 201,
        "trigger": {"type": "cron", "expression": "0 * * * * ?", "timezone": "Mars/Olympus"},
        "action": {"type": "simple.op", "config": {"op": "explode"}},
        "policy": {"overlap": "queue", "retry": {"max_attempts": 0}},
        "labels": {"session_id": 7},
        "enabled": "yes",
        "colour": "red",
    }
    with pytest.raises(InvalidInput) as caught:
        await engine.service.create(ALICE, payload)
    assert _errors(caught.value) == {
        "colour": "red",
        "trigger.timezone": "Mars/Olympus",
        "action.config.op": "explode",
        "policy.overlap": "queue",
        "policy.retry.max_attempts": 0,
        "labels.session_id": 7,
        "name": "x" * 201,
        "enabled": "yes",
    }
    assert await engine.service.query(ALICE) == []
    assert await _outbox(engine) == []


async def test_create_unknown_action_type_names_the_known_ones(engine: Engine) -> None:
    with pytest.raises(InvalidInput) as caught:
        await engine.service.create(ALICE, _payload(action={"type": "teleport", "config": {}}))
    assert caught.value.field == "action.type"
    assert caught.value.value == "teleport"
    assert "webhook.call" in caught.value.expected


async def test_create_non_object_body(engine: Engine) -> None:
    with pytest.raises(InvalidInput) as caught:
        await engine.service.create(ALICE, ["x"])  # type: ignore[arg-type]
    assert caught.value.field == "body"


@pytest.mark.parametrize("durable", ["no", 0, None, "false"])
async def test_durable_must_be_a_boolean(engine: Engine, durable: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        await engine.service.create(ALICE, _payload(durable=durable))
    assert (caught.value.field, caught.value.value) == ("durable", durable)
    assert await engine.service.query(ALICE) == []


async def test_non_durable_with_an_event_trigger_is_refused_as_the_clients_fault(engine: Engine) -> None:
    with pytest.raises(Unsupported) as caught:
        await engine.service.create(ALICE, _payload(durable=False,
                                                    trigger={"type": "event", "routing_key": "orders.*.created"}))
    assert (caught.value.field, caught.value.value) == ("durable", False)
    assert "durable" in str(caught.value)
    assert await engine.service.query(ALICE) == []


async def test_durable_true_is_accepted(engine: Engine) -> None:
    assert (await engine.service.create(ALICE, _payload(durable=True))).durable


@pytest.mark.parametrize("pattern", ["run.#", "automation.created", "action.request", "command.create",
                                     "cdc.ontology.order.created", "#", "*.created", "#.orders"])
async def test_event_patterns_in_reserved_namespaces_are_refused(engine: Engine, pattern: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        await engine.service.create(ALICE, _payload(trigger={"type": "event", "routing_key": pattern}))
    assert caught.value.field == "trigger.routing_key"
    assert caught.value.value == pattern


async def test_event_pattern_outside_reserved_namespaces_is_accepted(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload(trigger={"type": "event",
                                                                      "routing_key": "orders.*.created"}))
    assert automation.trigger["routing_key"] == "orders.*.created"
    assert automation.next_run_at is None
    assert automation.status is AutomationStatus.ACTIVE


async def test_missing_trigger_names_the_field_trigger(engine: Engine) -> None:
    with pytest.raises(InvalidInput) as caught:
        await engine.service.create(ALICE, {"action": LOG})
    assert caught.value.field == "trigger"


async def test_missing_action_type_reports_the_value_none(engine: Engine) -> None:
    with pytest.raises(InvalidInput) as caught:
        await engine.service.create(ALICE, {"trigger": EVERY_MINUTE})
    assert caught.value.field == "action.type"
    assert caught.value.value is None


async def test_once_in_the_past_is_not_silently_dead(engine: Engine) -> None:
    past = {"type": "once", "at": (START - timedelta(days=1)).isoformat()}
    outcome: Any
    try:
        outcome = (await engine.service.create(ALICE, _payload(trigger=past))).status
    except InvalidInput as exc:  # refusing it is fine too
        outcome = exc.field.split(".")[0]
    assert outcome in (AutomationStatus.COMPLETED, "trigger")


# --- update ----------------------------------------------------------------------------------------


async def test_update_with_the_current_version(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    engine.clock.advance(90)  # type: ignore[attr-defined]
    hourly = {"type": "cron", "expression": "0 0 * * * ?", "timezone": "UTC"}
    updated = await engine.service.update(ALICE, automation.id, {"name": "hourly", "trigger": hourly},
                                          automation.version)
    assert updated.version == automation.version + 1
    assert updated.name == "hourly"
    assert updated.next_run_at == START + timedelta(hours=1)  # recomputed from now
    assert updated.action_config == LOG["config"]  # untouched fields stay
    assert ("automation.updated", updated.id) in [(k, d.get("automation_id")) for k, d in await _outbox(engine)]


async def test_update_without_a_new_trigger_keeps_the_cursor(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    engine.clock.advance(3600)  # type: ignore[attr-defined]
    updated = await engine.service.update(ALICE, automation.id, {"policy": {"overlap": "allow"}}, automation.version)
    assert updated.next_run_at == automation.next_run_at
    assert updated.policy["overlap"] == "allow"


async def test_update_with_a_stale_version_conflicts_and_changes_nothing(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    await engine.service.update(ALICE, automation.id, {"name": "first"}, automation.version)
    with pytest.raises(Conflict):
        await engine.service.update(ALICE, automation.id, {"name": "second"}, automation.version)
    assert (await engine.service.get(ALICE, automation.id)).name == "first"


async def test_update_validates_like_create(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    with pytest.raises(InvalidInput) as caught:
        await engine.service.update(ALICE, automation.id, {"policy": {"grace_s": -1}, "trigger": {"type": "cron"}},
                                    automation.version)
    assert {"policy.grace_s", "trigger.expression"} <= set(_errors(caught.value))
    assert (await engine.service.get(ALICE, automation.id)).version == automation.version


async def test_update_of_a_missing_automation(engine: Engine) -> None:
    with pytest.raises(NotFound):
        await engine.service.update(ALICE, "nope", {"name": "x"}, 1)


async def test_update_accepts_the_flat_action_fields(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    updated = await engine.service.update(ALICE, automation.id, {"action_type": "simple.op",
                                                          "action_config": {"op": "log", "message": "new"}},
                                          automation.version)
    assert updated.action_config == {"op": "log", "message": "new"}


async def test_update_does_not_silently_drop_enabled(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    outcome: Any
    try:
        outcome = (await engine.service.update(ALICE, automation.id, {"enabled": False}, automation.version)).enabled
    except InvalidInput as exc:  # refusing it (use set_enabled) is fine too
        outcome = exc.field
    assert outcome in (False, "enabled")


# --- enable / disable ------------------------------------------------------------------------------


async def test_disable_cancels_pending_runs_and_enable_refreshes_the_cursor(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    run = await engine.service.run_now(ALICE, automation.id)
    disabled, canceled = await engine.service.set_enabled(ALICE, automation.id, False)
    assert canceled == [run.id]
    assert not disabled.enabled
    assert (await _runs(engine, automation.id))[0].status is RunStatus.CANCELED
    engine.clock.advance(3600 + 30)  # type: ignore[attr-defined]
    enabled, none = await engine.service.set_enabled(ALICE, automation.id, True)
    assert none == []
    assert enabled.enabled
    assert enabled.next_run_at == START + timedelta(hours=1, minutes=1)  # from now, not the missed past
    keys = [k for k, _ in await _outbox(engine)]
    assert "automation.disabled" in keys
    assert "automation.enabled" in keys


async def test_set_enabled_with_a_stale_version_conflicts(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    await engine.service.update(ALICE, automation.id, {"name": "x"}, automation.version)
    with pytest.raises(Conflict):
        await engine.service.set_enabled(ALICE, automation.id, False, automation.version)
    assert (await engine.service.get(ALICE, automation.id)).enabled


# --- deletes ---------------------------------------------------------------------------------------


async def test_delete_by_session_and_agent(engine: Engine) -> None:
    s1a = await engine.service.create(ALICE, _payload(labels={"session_id": "s1"}))
    s1b = await engine.service.create(ALICE, _payload(labels={"session_id": "s1", "agent_id": "g1"}))
    s2 = await engine.service.create(ALICE, _payload(labels={"session_id": "s2", "agent_id": "g2"}))
    run = await engine.service.run_now(ALICE, s1a.id)
    deleted = await engine.service.delete_by(ALICE, session_id="s1")
    assert set(deleted.automation_ids) == {s1a.id, s1b.id}
    assert deleted.canceled_run_ids == (run.id,)
    assert [a.id for a in await engine.service.query(ALICE)] == [s2.id]
    kept = await _runs(engine, s1a.id)
    assert [r.status for r in kept] == [RunStatus.CANCELED]  # history kept
    by_agent = await engine.service.delete_by(ALICE, agent_id="g2")
    assert by_agent.automation_ids == (s2.id,)
    deleted_events = [d["automation_id"] for k, d in await _outbox(engine) if k == "automation.deleted"]
    assert sorted(deleted_events) == sorted([s1a.id, s1b.id, s2.id])


@pytest.mark.parametrize("kwargs", [{}, {"session_id": "s", "agent_id": "a"}])
async def test_delete_by_needs_exactly_one_label(engine: Engine, kwargs: dict[str, str]) -> None:
    with pytest.raises(InvalidInput):
        await engine.service.delete_by(ALICE, **kwargs)


async def test_delete_one(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    deleted = await engine.service.delete(ALICE, automation.id)
    assert deleted.automation_ids == (automation.id,)
    with pytest.raises(NotFound):
        await engine.service.get(ALICE, automation.id)
    with pytest.raises(NotFound):
        await engine.service.delete(ALICE, automation.id)


# --- run now ---------------------------------------------------------------------------------------


async def test_run_now_inserts_a_manual_pending_run_each_time(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    first = await engine.service.run_now(Caller("alice", frozenset({"automation:write"})), automation.id)
    second = await engine.service.run_now(ALICE, automation.id)
    assert first.id != second.id
    assert first.origin is Origin.MANUAL
    assert first.status is RunStatus.PENDING
    assert first.dedupe_key.startswith("manual:")
    assert first.owner_id == "alice"  # runs belong to the automation's owner
    assert first.context[OWNER_KEY] == {"id": "alice", "scopes": ["automation:write"]}  # what the requester held
    assert (first.action_type, first.action_config) == ("simple.op", LOG["config"])
    ready = [d for k, d in await _outbox(engine) if k == "run.ready.quiet"]
    assert [d["run_ids"] for d in ready] == [[first.id], [second.id]]


async def test_another_owner_cannot_run_it_now_and_learns_nothing(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    with pytest.raises(NotFound):
        await engine.service.run_now(Caller("bob", frozenset({"automation:*"})), automation.id)
    with pytest.raises(PermissionDenied) as refused:
        await engine.service.run_now(Caller("alice", frozenset({"automation:read"})), automation.id)
    assert refused.value.missing == ("automation:write",)


READ_ONLY = Caller("alice", frozenset({"automation:read"}))
HOOK = {"type": "webhook.call", "config": {"url": "https://example.com/hook"}}


@pytest.mark.parametrize("enabled", [True, False], ids=["enabled", "disabled"])
async def test_create_needs_automation_write_in_the_service_whichever_face_asks(engine: Engine,
                                                                                enabled: bool) -> None:
    """No face's guard stands in front of the service here: create refuses a caller without automation:write
    by itself (a disabled automation too), and stores nothing."""
    for durable in (True, False):
        with pytest.raises(PermissionDenied) as refused:
            await engine.service.create(READ_ONLY, _payload(enabled=enabled, durable=durable))
        assert (refused.value.action, refused.value.missing) == ("automation.create", ("automation:write",))
    assert await engine.service.query(ALICE) == []


async def test_one_refusal_names_automation_write_and_the_actions_scopes(engine: Engine) -> None:
    both = ("automation:write", "webhook:call")
    with pytest.raises(PermissionDenied) as created:
        await engine.service.create(READ_ONLY, _payload(action=HOOK))
    with pytest.raises(PermissionDenied) as batched:
        await engine.service.create_many(READ_ONLY, [_payload(), _payload(action=HOOK)])
    automation = await engine.service.create(ALICE, _payload(action=HOOK))
    with pytest.raises(PermissionDenied) as ran:
        await engine.service.run_now(READ_ONLY, automation.id)
    with pytest.raises(PermissionDenied) as updated:
        await engine.service.update(READ_ONLY, automation.id, {"name": "x"}, automation.version)
    await engine.service.set_enabled(ALICE, automation.id, False)
    with pytest.raises(PermissionDenied) as enabled:
        await engine.service.set_enabled(READ_ONLY, automation.id, True)
    with pytest.raises(PermissionDenied) as disabled:
        await engine.service.set_enabled(READ_ONLY, automation.id, False)
    assert [e.value.missing for e in (created, batched, ran, updated, enabled)] == [both] * 5
    assert disabled.value.missing == ("automation:write",)


async def test_run_now_of_a_missing_automation(engine: Engine) -> None:
    with pytest.raises(NotFound):
        await engine.service.run_now(ALICE, "nope")


# --- ad hoc actions --------------------------------------------------------------------------------


def _request(key: str | None = "k1", **overrides: Any) -> ActionRequested:
    values: dict[str, Any] = {"type": "simple.op", "config": {"op": "log", "message": "x"}, "owner_id": "alice",
                              "idempotency_key": key}
    values.update(overrides)
    return ActionRequested(**values)


async def test_submit_action_is_idempotent_by_key(engine: Engine) -> None:
    first = await engine.control.actions.submit(ALICE, _request("k1", context={"order": 1}))
    again = await engine.control.actions.submit(ALICE, _request("k1"))
    other = await engine.control.actions.submit(ALICE, _request("k2"))
    assert first.created
    assert not again.created
    assert again.run.id == first.run.id
    assert other.run.id != first.run.id
    assert first.run.origin is Origin.REQUEST
    assert first.run.automation_id is None
    assert first.run.context["order"] == 1
    assert first.run.context[OWNER_KEY]["id"] == "alice"
    ready = [d["run_ids"] for k, d in await _outbox(engine) if k == "run.ready.quiet"]
    assert ready == [[first.run.id], [other.run.id]]  # no second run.ready for the duplicate


async def test_idempotency_keys_are_per_owner(engine: Engine) -> None:
    alice = await engine.control.actions.submit(ALICE, _request("same"))
    bob = await engine.control.actions.submit(Caller("bob"), _request("same", owner_id="bob"))
    assert bob.created
    assert bob.run.id != alice.run.id


async def test_requests_without_a_key_are_never_duplicates(engine: Engine) -> None:
    first = await engine.control.actions.submit(ALICE, _request(None))
    second = await engine.control.actions.submit(ALICE, _request(None))
    assert first.created
    assert second.created
    assert first.run.id != second.run.id


async def test_dry_run_request_is_marked_in_its_context(engine: Engine) -> None:
    inserted = await engine.control.actions.submit(ALICE, _request("d", dry_run=True))
    assert inserted.run.context["$dry_run"] is True
