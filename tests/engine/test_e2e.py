"""End to end on both stacks: triggers fire, runs succeed with their audit trail, events reach the bus.

Embedded stack: memory bus + SQLite under a VirtualClock (the test moves time).
Services stack: RabbitMQ + PostgreSQL under the system clock (schedules a second apart).
"""

from __future__ import annotations

from datetime import UTC, timedelta

from engine_harness import Stack

from actwheel.bus import Envelope
from actwheel.clock import VirtualClock
from actwheel.service import Caller
from actwheel.storage.records import AutomationStatus, RunStatus

ALICE = Caller("alice")
LOG_ACTION = {"type": "simple.op", "config": {"op": "log", "message": "hello from ${run.id}"}}
PHASES = ["DISPATCH", "PERMISSION", "VALIDATE", "EXECUTE", "EXECUTE"]


async def pass_time(stack: Stack, seconds: float) -> None:
    """Move virtual time on the embedded stack; real time passes by itself on the services stack."""
    if isinstance(stack.clock, VirtualClock):
        await stack.clock.advance_and_settle(seconds)


async def wait_succeeded(stack: Stack, log, count: int, *, first_after: float = 1.0) -> list[dict]:
    """One run per second from ``first_after`` seconds on: move time to each instant, wait for its run."""
    await pass_time(stack, first_after)
    for done in range(1, count + 1):
        await log.wait_count("run.succeeded", done, within=10)
        if done < count:
            await pass_time(stack, 1.0)
    return log.of("run.succeeded")


async def assert_full_trail(engine, run_id: str) -> None:
    async with engine.store.transaction() as tx:
        run = await tx.runs.get(run_id)
        trail = await tx.audit.trail(run_id)
    assert run.status is RunStatus.SUCCEEDED
    phases = [entry.phase for entry in trail]
    assert phases[:5] == PHASES, phases
    assert trail[3].details["state"] == "started"
    assert trail[4].details["state"] == "completed"
    # one stored row for the attempt's phases (issue 15), read back one entry per phase as before
    assert len({entry.seq for entry in trail[:5]}) == 1, trail
    assert [entry.event_id for entry in trail[:5]] == [f"{run_id}:{run.attempt}:{i}" for i in range(5)]
    assert [entry.occurred_at for entry in trail[:5]] == sorted(entry.occurred_at for entry in trail[:5])


def _seconds_from_now(stack: Stack, seconds: int) -> str:
    return (stack.clock.now() + timedelta(seconds=seconds)).astimezone(UTC).replace(microsecond=0).isoformat()


async def test_repeat_every_second_fires_each_instant_once(stack: Stack) -> None:
    engine = stack.engine()
    async with engine, stack.watch(engine) as log:
        automation = await engine.service.create(ALICE, {
            "name": "every second",
            "trigger": {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                        "start_date_time": _seconds_from_now(stack, 1)},
            "action": LOG_ACTION, "policy": {"overlap": "allow"}})
        events = await wait_succeeded(stack, log, 3)
        mine = [e for e in events if e["automation_id"] == automation.id]
        instants = [e["scheduled_for"] for e in mine]
        assert len(instants) == len(set(instants)) >= 3
        await assert_full_trail(engine, mine[0]["run_id"])
        assert len(log.of("action.completed")) >= 3


async def test_once_fires_once_then_completes(stack: Stack) -> None:
    engine = stack.engine()
    async with engine, stack.watch(engine) as log:
        automation = await engine.service.create(ALICE, {
            "trigger": {"type": "once", "at": _seconds_from_now(stack, 2)}, "action": LOG_ACTION})
        [event] = await wait_succeeded(stack, log, 1, first_after=2)
        assert event["automation_id"] == automation.id
        await assert_full_trail(engine, event["run_id"])
        stored = await engine.service.get(ALICE, automation.id)
        assert stored.status is AutomationStatus.COMPLETED
        assert stored.next_run_at is None


async def test_cron_fires_on_the_second(stack: Stack) -> None:
    engine = stack.engine()
    async with engine, stack.watch(engine) as log:
        automation = await engine.service.create(ALICE, {
            "trigger": {"type": "cron", "expression": "* * * * * ?", "timezone": "Europe/Berlin"},
            "action": LOG_ACTION, "policy": {"overlap": "allow"}})
        events = await wait_succeeded(stack, log, 2)
        assert {e["automation_id"] for e in events} == {automation.id}
        for event in events:
            assert event["scheduled_for"].endswith("+00:00")
            assert ".000" not in event["scheduled_for"]


async def test_event_trigger_fires_per_event_with_its_payload(stack: Stack) -> None:
    engine = stack.engine()
    async with engine, stack.watch(engine) as log:
        automation = await engine.service.create(ALICE, {
            "trigger": {"type": "event", "routing_key": "orders.*.created"},
            "action": {"type": "simple.op", "config": {"op": "assert", "condition": "event.data.total > 10"}}})
        await _until_bound(engine, "orders.*.created")
        for total in (50, 70):
            event = Envelope.new(type="order.created", data={"total": total}, source="shop")
            await engine.bus.publish(engine.bus.topology.events, "orders.eu.created", event)
        await engine.bus.publish(engine.bus.topology.events, "orders.eu.deleted",
                                 Envelope.new(type="order.deleted", data={}, source="shop"), mandatory=False)
        events = await log.wait_count("run.succeeded", 2)
        assert {e["automation_id"] for e in events} == {automation.id}
        async with engine.store.transaction() as tx:
            runs = await tx.runs.query(automation_id=automation.id)
        assert sorted(r.context["event"]["data"]["total"] for r in runs) == [50, 70]
        assert all(r.dedupe_key.startswith("event:") for r in runs)


async def _until_bound(engine, pattern: str) -> None:
    planner = engine.actors["planner"]
    for _ in range(50):
        if pattern in planner._bound:
            return
        await planner._bind_event_patterns()
    raise AssertionError(f"planner never bound {pattern}")


async def test_ad_hoc_request_is_idempotent_by_key(stack: Stack) -> None:
    from actwheel.messages import ActionRequested

    engine = stack.engine()
    async with engine, stack.watch(engine) as log:
        request = ActionRequested(type="SimpleOp", config={"op": "set_variable", "name": "x", "value": 1},
                                  owner_id="alice", idempotency_key="k-1")
        first = await engine.control.actions.submit(ALICE, request)
        again = await engine.control.actions.submit(ALICE, request)
        assert first.created
        assert not again.created
        assert again.run.id == first.run.id
        [event] = await log.wait_count("run.succeeded", 1)
        assert event["run_id"] == first.run.id


SAGA = {"type": "composite", "config": {"mode": "sequential", "saga": True, "steps": [
    {"name": "a", "type": "ontology.create_object", "config": {"object_type": "Order", "properties": {"sku": "A"}}},
    {"name": "b", "type": "ontology.create_object", "config": {"object_type": "Order", "properties": {"sku": "B"}}},
    {"name": "c", "type": "ontology.create_relation", "config": {
        "relation_type": "pairs", "source": "${steps.a.result.object_id}", "target": "${steps.b.result.object_id}"}},
    {"name": "d", "type": "simple.op", "config": {"op": "assert", "condition": "1 == 2"}}]}}


async def test_saga_request_rolls_back_through_the_engine(stack: Stack) -> None:
    from actwheel.actions.ontology_port import ObjectType
    from actwheel.messages import ActionRequested

    engine = stack.engine()
    async with engine, stack.watch(engine, "run.#", "action.#") as log:
        await engine.ontology.define_type(ObjectType.from_spec(
            {"name": "Order", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}))
        request = ActionRequested.from_data({**SAGA, "owner_id": "alice"})
        inserted = await engine.control.actions.submit(ALICE, request)
        [event] = await log.wait_count("run.rolled_back", 1)
        assert event["run_id"] == inserted.run.id
        async with engine.store.transaction() as tx:
            trail = await tx.audit.trail(inserted.run.id)
            objects = await tx.ontology.list_objects("Order")
        compensated = [e.details.get("step") for e in trail if e.phase == "COMPENSATE"]
        assert [s for s in compensated if s] == ["c", "b", "a"]
        assert [o for o in objects if not o.deleted] == []
        assert not log.of("run.succeeded")


async def test_an_event_for_an_automation_disabled_since_the_index_was_read_fires_nothing(embedded: Stack) -> None:
    from actwheel.bus.base import Delivery

    engine = embedded.engine(roles=("planner",))
    async with engine:
        automation = await engine.service.create(ALICE, {
            "trigger": {"type": "event", "routing_key": "orders.*.created"}, "action": LOG_ACTION})
        planner = engine.actors["planner"]
        await _until_bound(engine, "orders.*.created")  # the index now holds the automation, enabled
        await engine.service.set_enabled(ALICE, automation.id, False)
        envelope = Envelope.new(type="order.created", data={"total": 1}, source="shop")
        delivery = Delivery(envelope=envelope, queue="q", exchange=engine.bus.topology.events,
                            routing_key="orders.eu.created", redelivered=False, delivery_count=1, headers={})
        planner._event_index._loaded_at = engine.clock.now()  # keep the stale index: the database must decide
        await planner.on_event(delivery)
        async with engine.store.transaction() as tx:
            assert await tx.runs.query(automation_id=automation.id) == []
