"""The RabbitMQ link itself under faults, one AmqpBus at a time, on a throwaway broker of this module
(:mod:`instances`, shared with test_faults.py), never the shared one:

- a link that goes half-open (the proxy swallows everything, no FIN, no RST) is noticed and torn down,
  by a missing confirm or by the heartbeat alone, and the bus publishes and consumes again;
- a publish made while the broker restarts waits for the reconnect instead of failing at once (the
  engine's ticker crashed on that once per broker outage).

Every wait is bounded and waits on an outcome (a delivery, a publish returning); the faults last
what the scenario says.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from instances import Instances
from proxy import FaultProxy, proxied

from actwheel.bus import AmqpBus, Delivery, Envelope, QueueSpec, Topology
from actwheel.errors import BusUnavailable

pytestmark = [pytest.mark.rabbitmq, pytest.mark.slow, pytest.mark.xdist_group("faults")]


@pytest.fixture
def broker(fault_services: Instances) -> Instances:
    return fault_services


class Inbox:
    """A consumer's deliveries, by envelope id."""

    def __init__(self) -> None:
        self.ids: asyncio.Queue[str] = asyncio.Queue()

    async def handle(self, delivery: Delivery) -> None:
        await self.ids.put(delivery.envelope.id)

    async def expect(self, envelope_id: str, within: float) -> None:
        """Until ``envelope_id`` is delivered (others, e.g. redeliveries, are skipped)."""
        async with asyncio.timeout(within):
            while await self.ids.get() != envelope_id:
                pass


def _envelope() -> Envelope:
    return Envelope.new(type="work.item", data={"n": uuid.uuid4().hex}, source="faults")


@contextlib.asynccontextmanager
async def _bus(url: str, topology: Topology | None = None, *, consume: bool = True,
               **options: Any) -> AsyncIterator[tuple[AmqpBus, Inbox]]:
    """A started bus with a prefixed topology, one queue bound to ``work.#`` and (``consume``) its consumer."""
    topology = topology or Topology.prefixed(f"t-{uuid.uuid4().hex[:8]}.")
    bus = AmqpBus(url, topology=topology, grace=0.0, reconnect_interval=0.2, **options)
    await bus.start()
    queue = f"{topology.events}.work"
    inbox = Inbox()
    try:
        await bus.declare_queue(QueueSpec(queue, ((topology.events, "work.#"),)))
        if consume:
            await bus.consume(queue, inbox.handle, prefetch=10)
        yield bus, inbox
    finally:
        await bus.stop(grace=0)


def _via(url: str, proxy: FaultProxy) -> str:
    credentials = url.split("://", 1)[1].split("@", 1)[0]
    return f"amqp://{credentials}@127.0.0.1:{proxy.port}/"


async def _publish_until_accepted(bus: AmqpBus, envelope: Envelope, within: float) -> int:
    """Publish until the broker confirms (what every publisher of the engine does); returns the failures."""
    failures = 0
    async with asyncio.timeout(within):
        while True:
            try:
                await bus.publish(bus.topology.events, "work.item", envelope)
                return failures
            except BusUnavailable:
                failures += 1
                await asyncio.sleep(0.2)  # a retry pause, as the outbox relay takes one


async def _until(condition: Callable[[], bool], *, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {within}s waiting for {what}"
        await asyncio.sleep(0.05)  # polling a counter another task raises


async def test_a_half_open_link_is_torn_down_after_a_missing_confirm_and_the_bus_works_again(
        broker: Instances) -> None:
    """With aiormq's default heartbeat (60 s: a silent link is given up after 183 s) nothing came back.

    The broker still counts the silent connection's consumer until it misses two of its heartbeats
    (3 s each here), and may hand it the message meanwhile: hence the longer bound for the delivery."""
    async with proxied("127.0.0.1", broker.rmq_port) as proxy, \
            _bus(_via(broker.broker_url, proxy), publish_timeout=3.0, heartbeat_s=3) as (bus, inbox):
        first = _envelope()
        await bus.publish(bus.topology.events, "work.item", first)
        await inbox.expect(first.id, within=10)

        proxy.half_open()
        began = time.monotonic()
        with pytest.raises(BusUnavailable, match="no confirm"):
            await bus.publish(bus.topology.events, "work.item", _envelope())
        assert time.monotonic() - began < 3.0 + 1.0, "the confirm wait is bounded by publish_timeout"
        proxy.heal()  # new connections work again; the silent one stays silent for good

        healed = time.monotonic()
        after = _envelope()
        await _publish_until_accepted(bus, after, within=15)
        assert time.monotonic() - healed < 15
        await inbox.expect(after.id, within=40 - (time.monotonic() - healed))
        assert bus.stats.dead_links == 1, bus.stats
        assert bus.stats.reconnects >= 1, bus.stats
        assert proxy.stats.silenced == 1, proxy.stats  # the one connection, before the heal
        assert proxy.stats.accepted >= 2, proxy.stats  # and a new one after it


async def test_a_half_open_link_without_publishes_is_dropped_by_the_heartbeat_and_the_consumer_returns(
        broker: Instances) -> None:
    """Only a consumer on the link: the heartbeat (2 s here, through the URL's ``heartbeat`` query) alone
    notices it; a ``heartbeat`` given to connect_robust as a keyword is ignored by aio-pika."""
    async with proxied("127.0.0.1", broker.rmq_port) as proxy, \
            _bus(_via(broker.broker_url, proxy), heartbeat_s=2) as (bus, inbox), \
            _bus(broker.broker_url, bus.topology, consume=False) as (direct, _):
        proxy.half_open()
        proxy.heal()
        healed = time.monotonic()
        sent = _envelope()
        await direct.publish(direct.topology.events, "work.item", sent)
        # aiormq gives up after 3 x (2 + 1) s without a frame, then aio-pika reconnects and consumes again;
        # the broker drops the silent consumer after two of its heartbeats and requeues what it held
        await inbox.expect(sent.id, within=25)
        assert time.monotonic() - healed < 25
        # aio-pika calls the reconnect callbacks after restoring the channels: the delivery may come first
        await _until(lambda: bus.stats.reconnects >= 1, within=10, what=f"the reconnect counted: {bus.stats}")
        assert bus.stats.dead_links == 0, "no publish on that link: the heartbeat alone did it"


async def test_a_publish_while_the_broker_restarts_waits_for_the_reconnect_instead_of_failing(
        broker: Instances) -> None:
    """It raised ``BusUnavailable("... reconnecting?")`` at once: the ticker crashed on it every outage.

    The routing key reaches no queue (``mandatory=False``): the exchange confirms at once, so the wait
    measured is the reconnect's, not a just-restarted quorum queue's (which can take long to confirm)."""
    async with _bus(broker.broker_url, publish_timeout=45.0, consume=False) as (bus, _):
        await asyncio.to_thread(broker.kill_broker)
        publishing = asyncio.create_task(
            bus.publish(bus.topology.events, "nobody.listens", _envelope(), mandatory=False))
        await asyncio.to_thread(broker.restart_broker)
        await asyncio.wait_for(publishing, timeout=45)  # returns once confirmed; raised at once before
        # aio-pika calls the reconnect callbacks after restoring the channels: the confirm may come first
        await _until(lambda: bus.stats.reconnects >= 1, within=10, what=f"the reconnect counted: {bus.stats}")
        assert bus.stats.reconnects == 1, bus.stats
        assert bus.stats.published == 1, bus.stats
