"""Event-trigger patterns are unbound once no enabled automation uses them (issue 14), on both buses.

docs/messages.md promises that a mandatory business event nobody waits for comes back unroutable. The
planner's event queue is shared by every instance's planner, and each instance's index holds what it has
seen, so a pattern one instance releases is checked against the database before it stays unbound; the
periodic full refresh binds every pattern again and releases what nothing uses.

The planners here are driven directly (``on_change`` with the change message, ``_bind_event_patterns``
for the refresh), so each step is deterministic; routing is observed with a mandatory publish.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from bus_harness import Harness, envelope

from actwheel.actors import queues
from actwheel.actors.planner import Planner
from actwheel.bus import Delivery, Envelope
from actwheel.engine import Engine
from actwheel.errors import InvalidInput, Unroutable
from actwheel.messages import AutomationChanged
from actwheel.settings import Settings
from actwheel.storage import open_store
from actwheel.storage.base import Store
from actwheel.storage.records import AutomationChanges, NewAutomation

ORDERS = "orders.*.created"
KEY = "orders.eu.created"


# --- the port: bind / unbind ---------------------------------------------------------------------------


async def test_unbind_makes_a_mandatory_publish_unroutable_and_bind_brings_it_back(harness: Harness) -> None:
    queue = await harness.queue("unbind.q")
    await harness.bus.bind(queue, harness.events, ORDERS)
    await harness.bus.bind(queue, harness.events, ORDERS)  # idempotent
    await harness.bus.publish(harness.events, KEY, envelope())
    await harness.bus.unbind(queue, harness.events, ORDERS)
    with pytest.raises(Unroutable):
        await harness.bus.publish(harness.events, KEY, envelope())
    await harness.bus.unbind(queue, harness.events, ORDERS)  # a binding that is not there: no error
    await harness.bus.bind(queue, harness.events, ORDERS)
    await harness.bus.publish(harness.events, KEY, envelope())


async def test_unbind_leaves_the_queues_other_bindings(harness: Harness) -> None:
    queue = await harness.queue("unbind.other", (harness.events, "orders.#"))
    await harness.bus.bind(queue, harness.events, ORDERS)
    await harness.bus.unbind(queue, harness.events, ORDERS)
    await harness.bus.publish(harness.events, KEY, envelope())  # still routed by orders.#


@pytest.mark.parametrize("method", ["bind", "unbind"])
async def test_bind_and_unbind_refuse_an_undeclared_queue_an_unknown_exchange_and_a_bad_pattern(
        harness: Harness, method: str) -> None:
    queue = await harness.queue("unbind.bad")
    call = getattr(harness.bus, method)
    with pytest.raises(InvalidInput) as undeclared:
        await call(harness.name("never.declared"), harness.events, ORDERS)
    assert undeclared.value.field == "queue"
    with pytest.raises(InvalidInput) as exchange:
        await call(queue, "no.such.exchange", ORDERS)
    assert exchange.value.field == "exchange"
    with pytest.raises(InvalidInput) as pattern:
        await call(queue, harness.events, "x" * 300)
    assert pattern.value.field == "pattern"


# --- the planner -----------------------------------------------------------------------------------------


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'unbind.db'}")
    await store.start()
    try:
        yield store
    finally:
        await store.stop()


def _planner(harness: Harness, store: Store, instance: str) -> Planner:
    engine = Engine(Settings(database_url="sqlite://", instance=instance, auth=False), store=store,
                    bus=harness.bus, topology=harness.bus.topology, queue_prefix=harness.prefix)
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    harness.declared.append(queues.planner_events(harness.bus.topology, harness.prefix).name)
    return planner


@pytest.fixture
def planners(harness: Harness, store: Store) -> tuple[Planner, Planner]:
    """Two instances' planners: one queue on the bus, one database."""
    return _planner(harness, store, "one"), _planner(harness, store, "two")


async def _create(store: Store, routing_key: str = ORDERS) -> str:
    async with store.transaction() as tx:
        created = await tx.automations.create(NewAutomation(
            owner_id="alice", name="n", trigger={"type": "event", "routing_key": routing_key},
            action_type="simple.op"))
    return created.id


async def _disable(store: Store, automation_id: str) -> None:
    async with store.transaction() as tx:
        await tx.automations.set_enabled(automation_id, False)


async def _delete(store: Store, automation_id: str) -> None:
    async with store.transaction() as tx:
        await tx.automations.delete(automation_id)


def _change(harness: Harness, automation_id: str, change: str) -> Delivery:
    message = AutomationChanged(automation_id=automation_id, change=change)
    env = Envelope.new(type=message.TYPE, data=message.to_data(), source="test")
    return Delivery(envelope=env, queue="planner.changes", exchange=harness.events, routing_key=message.routing_key,
                    redelivered=False, delivery_count=1, headers={})


async def _routed(harness: Harness, routing_key: str = KEY) -> bool:
    try:
        await harness.bus.publish(harness.events, routing_key, envelope("orders.created"))
    except Unroutable:
        return False
    return True


async def test_disabling_the_last_event_automation_makes_its_events_unroutable(
        harness: Harness, planners: tuple[Planner, Planner], store: Store) -> None:
    one, _ = planners
    automation_id = await _create(store)
    await one.on_change(_change(harness, automation_id, "created"))
    assert await _routed(harness)
    await _disable(store, automation_id)
    await one.on_change(_change(harness, automation_id, "disabled"))
    assert not await _routed(harness)
    async with store.transaction() as tx:
        await tx.automations.set_enabled(automation_id, True)
    await one.on_change(_change(harness, automation_id, "enabled"))
    assert await _routed(harness)


async def test_deleting_or_editing_the_last_user_unbinds_and_a_shared_pattern_stays(
        harness: Harness, planners: tuple[Planner, Planner], store: Store) -> None:
    one, _ = planners
    first, second = await _create(store), await _create(store)
    for automation_id in (first, second):
        await one.on_change(_change(harness, automation_id, "created"))
    await _delete(store, first)
    await one.on_change(_change(harness, first, "deleted"))
    assert await _routed(harness), "another automation still waits for the pattern"
    async with store.transaction() as tx:
        await tx.automations.update(second, 1, AutomationChanges(
            trigger={"type": "event", "routing_key": "orders.*.paid"}))
    await one.on_change(_change(harness, second, "updated"))
    assert not await _routed(harness)
    assert await _routed(harness, "orders.eu.paid")


async def test_an_instance_does_not_unbind_a_pattern_another_instances_automation_needs(
        harness: Harness, planners: tuple[Planner, Planner], store: Store) -> None:
    one, two = planners
    mine, theirs = await _create(store), await _create(store)
    await one.on_change(_change(harness, mine, "created"))
    await two.on_change(_change(harness, theirs, "created"))  # instance one never heard of it
    await _disable(store, mine)
    await one.on_change(_change(harness, mine, "disabled"))  # its own index: nobody uses the pattern now
    assert await _routed(harness), "the database says instance two's automation still needs it"
    assert ORDERS in one._bound


async def test_a_release_racing_a_create_whose_change_is_not_handled_yet_keeps_the_binding(
        harness: Harness, planners: tuple[Planner, Planner], store: Store) -> None:
    one, _ = planners
    old = await _create(store)
    await one.on_change(_change(harness, old, "created"))
    await _create(store)  # committed; its automation.created is still on its way
    await _delete(store, old)
    await one.on_change(_change(harness, old, "deleted"))
    assert await _routed(harness)


async def test_the_full_refresh_releases_what_another_instance_deleted_and_rebinds_what_is_missing(
        harness: Harness, planners: tuple[Planner, Planner], store: Store) -> None:
    one, two = planners
    automation_id = await _create(store)
    await one.on_change(_change(harness, automation_id, "created"))
    await _delete(store, automation_id)
    await two.on_change(_change(harness, automation_id, "deleted"))  # two cannot know the deleted pattern
    assert await _routed(harness), "nothing told instance one yet"
    await one._bind_event_patterns()  # its periodic full read
    assert not await _routed(harness)
    assert ORDERS not in one._bound

    kept = await _create(store)
    await one.on_change(_change(harness, kept, "created"))
    await harness.bus.unbind(queues.planner_events(harness.bus.topology, harness.prefix).name, harness.events,
                             ORDERS)  # lost, e.g. to a release racing elsewhere
    assert not await _routed(harness)
    await one._bind_event_patterns()
    assert await _routed(harness)


async def test_events_of_other_automation_types_never_bind_or_release(
        harness: Harness, planners: tuple[Planner, Planner], store: Store) -> None:
    one, _ = planners
    async with store.transaction() as tx:
        cron = await tx.automations.create(NewAutomation(
            owner_id="alice", name="c", trigger={"type": "cron", "expression": "0 9 * * *"}, action_type="simple.op"))
    await one.on_change(_change(harness, cron.id, "created"))
    await _delete(store, cron.id)
    await one.on_change(_change(harness, cron.id, "deleted"))
    assert one._bound == set()
    assert not await _routed(harness)
