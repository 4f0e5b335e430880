"""The CDC emitter (the outbox relay) on real stores: emitters of several instances split the outbox
(PostgreSQL row locks), and on SQLite one emitter publishes everything in order."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from services import isolated_postgres_url

from actwheel.actors.cdc import CdcEmitter
from actwheel.bus import MemoryBus, QueueSpec
from actwheel.bus.base import Delivery
from actwheel.bus.envelope import decode
from actwheel.clock import SystemClock, VirtualClock
from actwheel.events import EventFactory
from actwheel.storage import open_store
from actwheel.storage.base import Store

T0 = datetime(2030, 1, 1, tzinfo=UTC)
ROWS = 1200


async def _recording_bus() -> tuple[MemoryBus, list[str], asyncio.Event]:
    """A bus whose queue bound to everything records envelope ids; the event is set at ROWS of them."""
    bus = MemoryBus(clock=VirtualClock(T0))
    await bus.start()
    await bus.declare_queue(QueueSpec("seen", ((bus.topology.events, "#"),), max_length=10 * ROWS))
    seen: list[str] = []
    all_seen = asyncio.Event()

    async def record(delivery: Delivery) -> None:
        seen.append(delivery.envelope.id)
        if len(seen) >= ROWS:
            all_seen.set()

    await bus.consume("seen", record, prefetch=256)
    return bus, seen, all_seen


async def _fill_outbox(store: Store, bus: MemoryBus) -> list[str]:
    events = EventFactory(topology=bus.topology, clock=VirtualClock(T0), source="actwheel/test")
    rows = [events.automation_gone(f"a{i}", "deleted") for i in range(ROWS)]
    async with store.transaction() as tx:
        await tx.outbox.append_many(rows)
    return [row.routing_key for row in rows]


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    async with isolated_postgres_url() as url:
        yield url


async def test_relays_of_several_instances_publish_each_row_once(postgres_url: str) -> None:
    stores = [open_store(postgres_url, clock=SystemClock()) for _ in range(3)]
    for store in stores:
        await store.start()
    bus, seen, all_seen = await _recording_bus()
    try:
        assert all(store.row_locks for store in stores)
        await _fill_outbox(stores[0], bus)
        relays = [CdcEmitter(store=store, bus=bus, clock=SystemClock(), batch=50) for store in stores]
        moved = await asyncio.gather(*(relay.relay_until_empty(max_rounds=1000) for relay in relays))
        await asyncio.wait_for(all_seen.wait(), 30)
        assert sum(moved) == ROWS  # together they took every row once
        assert sum(1 for m in moved if m) >= 2  # and they did share the work
        duplicates = [i for i, n in collections.Counter(seen).items() if n > 1]
        assert duplicates == []
        async with stores[0].transaction() as tx:
            assert await tx.outbox.backlog() == 0
    finally:
        await bus.stop()
        for store in stores:
            await store.stop()


async def test_one_sqlite_relay_publishes_everything_in_order(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'relay.db'}", clock=VirtualClock(T0))
    await store.start()
    bus, seen, all_seen = await _recording_bus()
    try:
        assert not store.row_locks
        await _fill_outbox(store, bus)
        async with store.transaction() as tx:
            expected = [row.id for row in await tx.outbox.take_batch(ROWS)]
        relay = CdcEmitter(store=store, bus=bus, clock=VirtualClock(T0), batch=100)
        assert await relay.relay_until_empty() == ROWS
        await asyncio.wait_for(all_seen.wait(), 30)
        assert len(seen) == len(set(seen)) == len(expected)
        async with store.transaction() as tx:
            assert await tx.outbox.backlog() == 0
    finally:
        await bus.stop()
        await store.stop()


async def test_an_idle_relay_stops_at_once_not_after_its_poll_interval(tmp_path: Path) -> None:
    """It waited out ``poll_s`` (1 s by default) on every engine stop: the wait now ends with the stop."""
    store = open_store(f"sqlite:///{tmp_path / 'relay.db'}", clock=VirtualClock(T0))
    await store.start()
    bus = MemoryBus(clock=VirtualClock(T0))
    await bus.start()
    try:
        relay = CdcEmitter(store=store, bus=bus, clock=VirtualClock(T0), poll_s=3600.0)
        running = asyncio.create_task(relay.run())
        await asyncio.wait_for(relay.ready.wait(), 5)
        for _ in range(20):
            await asyncio.sleep(0)  # let it reach its idle wait
        relay.request_stop()
        await asyncio.wait_for(running, 5)  # a bound for the test, against the relay's 3600 s
    finally:
        await bus.stop()
        await store.stop()


async def test_a_rows_headers_travel_with_it_and_a_row_whose_headers_cannot_is_dead_lettered(tmp_path: Path) -> None:
    """The relay publishes each row with its headers (the router's audited mark among them); a row whose
    headers the bus cannot carry is dead-lettered ``bad_headers`` and the rows around it still go."""
    store = open_store(f"sqlite:///{tmp_path / 'headers.db'}", clock=VirtualClock(T0))
    await store.start()
    bus = MemoryBus(clock=VirtualClock(T0))
    await bus.start()
    await bus.declare_queue(QueueSpec("seen", ((bus.topology.events, "#"),)))
    seen: list[Delivery] = []
    two = asyncio.Event()
    await bus.consume("seen", _append_to(seen, two, at=2), prefetch=16)
    events = EventFactory(topology=bus.topology, clock=VirtualClock(T0), source="actwheel/test")
    good, bad, after = (events.automation_gone(f"a{i}", "deleted") for i in range(3))
    rows = [replace(good, headers={**good.headers, "x-mark": True}),
            replace(bad, headers={"x-nested": {"not": "a scalar"}}), after]
    try:
        async with store.transaction() as tx:
            await tx.outbox.append_many(rows)
        relay = CdcEmitter(store=store, bus=bus, clock=VirtualClock(T0), batch=10)
        assert await relay.relay_until_empty() == 3
        await asyncio.wait_for(two.wait(), 30)  # a hang detector, not synchronisation
        assert [d.envelope.id for d in seen] == [decode(good.body).id, decode(after.body).id]
        assert seen[0].headers["x-mark"] is True
        assert "x-mark" not in seen[1].headers
        async with store.transaction() as tx:
            [letter] = await tx.dead_letters.query(source="outbox")
            assert await tx.outbox.backlog() == 0
        assert letter.reason == "bad_headers"
    finally:
        await bus.stop()
        await store.stop()


def _append_to(sink: list[Delivery], reached: asyncio.Event, *, at: int):  # type: ignore[no-untyped-def]
    async def record(delivery: Delivery) -> None:
        sink.append(delivery)
        if len(sink) >= at:
            reached.set()

    return record
