"""The planner's event index follows each automation change from that automation alone, and its periodic
full reload reads only the event automations: creating N automations no longer reads N² rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from actwheel.actors.planner import Planner
from actwheel.bus.base import Delivery
from actwheel.bus.envelope import Envelope
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.messages import AutomationChanged
from actwheel.settings import Settings
from actwheel.storage.records import AutomationChanges, NewAutomation
from tests.spies import count_calls

T0 = datetime(2030, 1, 1, tzinfo=UTC)
ORDERS = {"type": "event", "routing_key": "orders.*.created"}
CRON = {"type": "cron", "expression": "0 9 * * *"}


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


@pytest.fixture
async def reads(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often the automation reads the index may use were called (a spy on the store's repository class)."""
    async with engine.store.transaction() as tx:
        repository = type(tx.automations)
    return count_calls(repository, ("query", "event_automations", "get_many"), monkeypatch)


def _planner(engine: Engine) -> Planner:
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    return planner


def _change(engine: Engine, automation_id: str, change: str, trigger_type: str | None = None) -> Delivery:
    """The change's message; ``trigger_type`` ``None`` is what a publisher that predates the field sends."""
    message = AutomationChanged(automation_id=automation_id, change=change, trigger_type=trigger_type)
    envelope = Envelope.new(type=message.TYPE, data=message.to_data(), source="test", clock=engine.clock)
    return Delivery(envelope=envelope, queue="actwheel.planner.changes", exchange=engine.bus.topology.events,
                    routing_key=message.routing_key, redelivered=False, delivery_count=1, headers={})


async def _create(engine: Engine, trigger: dict[str, Any]) -> str:
    async with engine.store.transaction() as tx:
        created = await tx.automations.create(NewAutomation(owner_id="alice", name="n", trigger=trigger,
                                                            action_type="simple.op"))
    return created.id


def _matching(planner: Planner, routing_key: str = "orders.eu.created") -> list[str]:
    return [a.id for a in planner._event_index.matching(routing_key)]


async def test_a_created_event_automation_is_indexed_and_bound_from_its_own_row(
        engine: Engine, reads: Counter[str]) -> None:
    planner = _planner(engine)
    automation_id = await _create(engine, ORDERS)
    await planner.on_change(_change(engine, automation_id, "created"))
    assert _matching(planner) == [automation_id]
    assert "orders.*.created" in planner._bound
    assert reads == {"get_many": 1}  # one row read; no listing of the automations


async def test_an_edit_to_another_trigger_removes_its_pattern(engine: Engine, reads: Counter[str]) -> None:
    planner = _planner(engine)
    automation_id = await _create(engine, ORDERS)
    await planner.on_change(_change(engine, automation_id, "created"))
    async with engine.store.transaction() as tx:
        await tx.automations.update(automation_id, 1, AutomationChanges(trigger=CRON))
    await planner.on_change(_change(engine, automation_id, "updated"))
    assert _matching(planner) == []
    assert "orders.*.created" not in planner._bound
    assert reads["query"] == 0
    assert reads["event_automations"] == 1  # the released pattern is checked against the database, once


async def test_a_disable_removes_it_and_an_enable_brings_it_back(engine: Engine, reads: Counter[str]) -> None:
    planner = _planner(engine)
    automation_id = await _create(engine, ORDERS)
    await planner.on_change(_change(engine, automation_id, "created"))
    async with engine.store.transaction() as tx:
        await tx.automations.set_enabled(automation_id, False)
    await planner.on_change(_change(engine, automation_id, "disabled"))
    assert _matching(planner) == []
    assert "orders.*.created" not in planner._bound
    async with engine.store.transaction() as tx:
        await tx.automations.set_enabled(automation_id, True)
    await planner.on_change(_change(engine, automation_id, "enabled"))
    assert _matching(planner) == [automation_id]
    assert "orders.*.created" in planner._bound
    assert reads["query"] == 0
    assert reads["event_automations"] == 1  # the disable's release, checked against the database


async def test_a_delete_removes_it(engine: Engine, reads: Counter[str]) -> None:
    planner = _planner(engine)
    kept, deleted = await _create(engine, ORDERS), await _create(engine, ORDERS)
    for automation_id in (kept, deleted):
        await planner.on_change(_change(engine, automation_id, "created"))
    async with engine.store.transaction() as tx:
        await tx.automations.delete(deleted)
    await planner.on_change(_change(engine, deleted, "deleted"))
    assert _matching(planner) == [kept]
    assert "orders.*.created" in planner._bound
    assert reads["query"] == reads["event_automations"] == 0  # the pattern is still used here: no release


async def test_a_stale_read_does_not_undo_a_newer_one(engine: Engine) -> None:
    planner = _planner(engine)
    automation_id = await _create(engine, ORDERS)
    async with engine.store.transaction() as tx:
        old = (await tx.automations.get_many([automation_id]))[automation_id]
        newer = await tx.automations.update(automation_id, 1, AutomationChanges(
            trigger={"type": "event", "routing_key": "orders.*.paid"}))
    planner._event_index.apply(automation_id, newer)
    planner._event_index.apply(automation_id, old)  # a slower handler of the earlier change
    assert _matching(planner, "orders.eu.paid") == [automation_id]
    assert _matching(planner) == []


async def test_the_full_reload_reads_only_the_enabled_event_automations(engine: Engine,
                                                                       reads: Counter[str]) -> None:
    planner = _planner(engine)
    events = [await _create(engine, ORDERS) for _ in range(2)]
    for _ in range(3):
        await _create(engine, CRON)
    disabled = await _create(engine, ORDERS)
    async with engine.store.transaction() as tx:
        await tx.automations.set_enabled(disabled, False)
        paged = await tx.automations.event_automations(after_id=min(events), limit=10)
    await planner._bind_event_patterns()
    assert sorted(_matching(planner)) == sorted(events)
    assert [a.id for a in paged] == [max(events)]
    assert reads["query"] == 0


async def test_a_change_that_listens_to_no_event_reads_nothing_unless_the_index_holds_it(
        engine: Engine, reads: Counter[str]) -> None:
    planner = _planner(engine)
    cron, orders = await _create(engine, CRON), await _create(engine, ORDERS)
    await planner.on_change(_change(engine, cron, "created", "cron"))
    async with engine.store.transaction() as tx:
        await tx.automations.delete(cron)
    await planner.on_change(_change(engine, cron, "deleted"))
    assert reads["get_many"] == 0  # neither can index anything: no read
    await planner.on_change(_change(engine, orders, "created", "event"))
    assert reads["get_many"] == 1
    async with engine.store.transaction() as tx:
        await tx.automations.update(orders, 1, AutomationChanges(trigger=CRON))
    await planner.on_change(_change(engine, orders, "updated", "cron"))  # held: read, dropped, released
    assert reads["get_many"] == 2
    assert _matching(planner) == []
    assert "orders.*.created" not in planner._bound


async def test_a_message_without_the_trigger_type_is_read_as_before(engine: Engine, reads: Counter[str]) -> None:
    planner = _planner(engine)
    cron = await _create(engine, CRON)
    await planner.on_change(_change(engine, cron, "created"))
    assert reads["get_many"] == 1
    assert _matching(planner) == []


async def test_a_skipped_create_is_indexed_by_the_change_that_makes_it_an_event_automation(engine: Engine) -> None:
    planner = _planner(engine)
    automation_id = await _create(engine, CRON)
    async with engine.store.transaction() as tx:
        await tx.automations.update(automation_id, 1, AutomationChanges(trigger=ORDERS))
    # delivered out of order: the edit's message first, then the create's (which says cron and is skipped)
    await planner.on_change(_change(engine, automation_id, "updated", "event"))
    await planner.on_change(_change(engine, automation_id, "created", "cron"))
    assert _matching(planner) == [automation_id]
    assert "orders.*.created" in planner._bound
