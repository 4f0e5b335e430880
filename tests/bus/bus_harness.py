"""Helpers for the bus contract suite: collectors that wait on events, a TCP proxy, the RabbitMQ URL."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import services  # type: ignore[import-not-found]  # tests/services.py, on sys.path via tests/conftest.py

from actwheel.bus import Bus, DeadLetter, Delivery, Envelope, QueueSpec
from actwheel.bus.envelope import new_id

WAIT_S = 15.0


def rabbitmq_url() -> str:
    """The shared test RabbitMQ (tests/services.py): skips loudly on a dev machine, fails under CI."""
    return str(services.rabbitmq_url())


def envelope(type_: str = "test.happened", **data: Any) -> Envelope:
    return Envelope.new(type=type_, data=data, source="tests")


@dataclass
class Harness:
    """A started bus plus unique names for this test."""

    bus: Bus
    kind: str
    prefix: str
    declared: list[str] = field(default_factory=list)

    def name(self, suffix: str) -> str:
        return f"{self.prefix}{suffix}"

    async def queue(self, suffix: str, *bindings: tuple[str, str], delivery_limit: int = 5,
                    max_length: int | None = 100_000) -> str:
        spec = QueueSpec(self.name(suffix), tuple(bindings), delivery_limit, max_length)
        await self.bus.declare_queue(spec)
        self.declared.append(spec.name)
        return spec.name

    @property
    def events(self) -> str:
        return self.bus.topology.events


class Collector:
    """A handler that records deliveries and lets a test wait for a count, with a timeout."""

    def __init__(self, behaviour: Callable[[Delivery], Awaitable[None]] | None = None) -> None:
        self.deliveries: list[Delivery] = []
        self._behaviour = behaviour
        self._changed = asyncio.Event()

    async def __call__(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)
        self._changed.set()
        if self._behaviour is not None:
            await self._behaviour(delivery)

    async def wait_for(self, count: int) -> list[Delivery]:
        async with asyncio.timeout(WAIT_S):
            while len(self.deliveries) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.deliveries

    async def wait_for_id(self, message_id: str) -> Delivery:
        async with asyncio.timeout(WAIT_S):
            while True:
                for delivery in self.deliveries:
                    if delivery.envelope.id == message_id:
                        return delivery
                self._changed.clear()
                await self._changed.wait()

    def ids(self) -> list[str]:
        return [d.envelope.id for d in self.deliveries]


class DeadLetters:
    """A dead-letter handler that records what it sees."""

    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []
        self._changed = asyncio.Event()

    async def __call__(self, letter: DeadLetter) -> None:
        self.letters.append(letter)
        self._changed.set()

    async def wait_for(self, count: int) -> list[DeadLetter]:
        async with asyncio.timeout(WAIT_S):
            while len(self.letters) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.letters


class TcpProxy:
    """A loopback TCP proxy to the broker; :meth:`drop_all` cuts every connection like a network failure."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._transports: set[asyncio.StreamWriter] = set()
        self.accepted = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._transports.update((writer, up_writer))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True)

    def drop_all(self) -> None:
        for writer in tuple(self._transports):
            writer.transport.abort()
        self._transports.clear()

    async def close(self) -> None:
        self.drop_all()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.transport.abort()


def unique_envelopes(count: int) -> list[Envelope]:
    return [Envelope.new(type="test.numbered", data={"n": i}, source="tests") for i in range(count)]


__all__ = ["Collector", "DeadLetters", "Harness", "TcpProxy", "envelope", "new_id", "rabbitmq_url"]
