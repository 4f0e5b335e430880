"""Fixtures: one started bus per test, parametrized over memory and RabbitMQ, with unique names."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import aio_pika
import pytest
from bus_harness import Harness, rabbitmq_url

from actwheel.bus import AmqpBus, Bus, MemoryBus, Topology

MAX_BYTES = 64 * 1024


def make_bus(kind: str, topology: Topology, url: str | None = None) -> Bus:
    if kind == "memory":
        return MemoryBus(topology=topology, grace=2.0, max_message_bytes=MAX_BYTES)
    assert url is not None
    return AmqpBus(url, topology=topology, grace=2.0, max_message_bytes=MAX_BYTES, publish_timeout=10.0,
                   reconnect_interval=0.2, connection_name="actwheel-tests")


async def delete_topology(url: str, topology: Topology, queues: list[str]) -> None:
    """Remove what a test declared on the shared broker (bounded, best effort)."""
    connection = await aio_pika.connect(url, timeout=5)
    async with connection:
        channel = await connection.channel()
        for queue in (*queues, topology.dead_letters):
            with contextlib.suppress(Exception):
                await channel.queue_delete(queue)
        for exchange in (*topology.exchanges, topology.dlx):
            with contextlib.suppress(Exception):
                await channel.exchange_delete(exchange)


@pytest.fixture(params=["memory", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def bus_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def harness(bus_kind: str) -> AsyncIterator[Harness]:
    prefix = f"t-{uuid.uuid4().hex[:10]}."
    topology = Topology.prefixed(prefix)
    url = rabbitmq_url() if bus_kind == "rabbitmq" else None
    bus = make_bus(bus_kind, topology, url)
    await bus.start()
    h = Harness(bus=bus, kind=bus_kind, prefix=prefix)
    try:
        yield h
    finally:
        await bus.stop(grace=0)
        if url is not None:
            await delete_topology(url, topology, h.declared)
