"""RabbitMQ only: the connection dies under a busy consumer, and aio-pika's restore misses a consumer.

The network failure is real: the bus talks to the broker through a loopback TCP proxy
whose connections the test aborts (the broker sees the connection drop and requeues
what was unacked). Nothing here sleeps to synchronise: tests wait on deliveries.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from bus_harness import WAIT_S, Collector, TcpProxy, envelope, rabbitmq_url
from conftest import delete_topology, make_bus
from yarl import URL

from actwheel.bus import AmqpBus, Delivery, Envelope, QueueSpec, Topology
from actwheel.errors import BusUnavailable

pytestmark = pytest.mark.rabbitmq


@dataclass
class Proxied:
    bus: AmqpBus
    proxy: TcpProxy
    queue: str


@pytest.fixture
async def proxied() -> AsyncIterator[Proxied]:
    url = URL(rabbitmq_url())
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5672)
    port = await proxy.start()
    prefix = f"t-{uuid.uuid4().hex[:10]}."
    topology = Topology.prefixed(prefix)
    bus = make_bus("rabbitmq", topology, str(url.with_port(port)))
    assert isinstance(bus, AmqpBus)
    await bus.start()
    queue = f"{prefix}work"
    await bus.declare_queue(QueueSpec(queue, ((topology.events, "work.#"),)))
    try:
        yield Proxied(bus, proxy, queue)
    finally:
        await bus.stop(grace=0)
        await proxy.close()
        await delete_topology(str(url), topology, [queue])


async def publish_when_back(bus: AmqpBus, sent: Envelope) -> None:
    """Publish, retrying while the broker is unreachable — what every publisher must do."""
    async with asyncio.timeout(WAIT_S):
        while True:
            try:
                await bus.publish(bus.topology.events, "work.item", sent)
                return
            except BusUnavailable:
                await asyncio.sleep(0.05)  # backoff between attempts, not synchronisation


async def test_connection_drop_restores_the_consumer_and_never_acks_a_stale_tag(proxied: Proxied) -> None:
    bus = proxied.bus
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def hold_the_first(delivery: Delivery) -> None:
        if delivery.delivery_count == 1 and delivery.envelope.data.get("n") == 0:
            first_in.set()
            await release.wait()  # still holding it when the connection dies

    collector = Collector(hold_the_first)
    subscription = await bus.consume(proxied.queue, collector, prefetch=1)
    held = envelope("work.item", n=0)
    await bus.publish(bus.topology.events, "work.item", held)
    async with asyncio.timeout(WAIT_S):
        await first_in.wait()

    proxied.proxy.drop_all()

    # The broker requeued the unacked message; the restored consumer gets it again.
    again = (await collector.wait_for(2))[1]
    assert again.envelope == held
    assert again.redelivered is True
    assert again.delivery_count == 2
    after = envelope("work.item", n=1)
    await publish_when_back(bus, after)
    await collector.wait_for(3)
    assert collector.deliveries[2].envelope == after

    release.set()  # the stale handler finishes now; its delivery tag belongs to a dead channel
    await subscription.cancel(grace=WAIT_S)
    assert bus.stats.stale_settlements == 1
    assert bus.stats.acked == 2
    assert proxied.proxy.accepted >= 2, "the bus reconnected"

    # Nothing was acked twice or lost: a new consumer sees only what comes next.
    fresh = Collector()
    await bus.consume(proxied.queue, fresh, prefetch=1)
    last = envelope("work.item", n=2)
    await bus.publish(bus.topology.events, "work.item", last)
    await fresh.wait_for(1)
    assert fresh.ids() == [last.id]


async def test_a_consumer_that_aio_pika_fails_to_restore_is_reopened(proxied: Proxied) -> None:
    bus = proxied.bus
    collector = Collector()
    await bus.consume(proxied.queue, collector, prefetch=5)
    await bus.publish(bus.topology.events, "work.item", before := envelope("work.item"))
    await collector.wait_for(1)

    # Emulate aio-pika's known bug (consumers missing after a reconnect): make its
    # robust queue forget the consumer, so its own restore will not re-consume.
    [consumer] = bus._consumers
    assert consumer.queue is not None
    consumer.queue._consumers.clear()  # type: ignore[attr-defined]
    proxied.proxy.drop_all()

    after = envelope("work.item")
    await publish_when_back(bus, after)
    await collector.wait_for_id(after.id)  # (``before`` may come twice: its ack raced the drop)
    assert set(collector.ids()) == {before.id, after.id}
    assert bus.stats.consumers_restored == 1
    assert bus.stats.reconnects >= 1


async def test_a_cancelled_consumer_does_not_come_back_after_a_reconnect(proxied: Proxied) -> None:
    bus = proxied.bus
    old = await bus.consume(proxied.queue, Collector(), prefetch=5)
    proxied.proxy.drop_all()
    await old.cancel(grace=0)  # basic.cancel cannot reach the broker: aio-pika still lists the consumer

    current = Collector()
    sent = envelope("work.item")
    await publish_when_back(bus, sent)
    await bus.consume(proxied.queue, current, prefetch=5)
    await current.wait_for(1)
    assert current.ids() == [sent.id]
