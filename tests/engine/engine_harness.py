"""Build engines on either stack for tests, and watch the events they publish."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from actwheel.actors.queues import role_queues
from actwheel.bus import AmqpBus, Bus, Delivery, MemoryBus, QueueSpec, Topology
from actwheel.clock import Clock, SystemClock, VirtualClock
from actwheel.engine import Engine
from actwheel.messages import AutomationsDue, RunsReady
from actwheel.settings import Settings
from actwheel.storage import open_store

_QUIET_KEYS = {RunsReady.TYPE: RunsReady.QUIET_KEY, AutomationsDue.TYPE: AutomationsDue.QUIET_KEY}


def _entries(delivery: Delivery) -> list[dict[str, Any]]:
    data = delivery.envelope.data
    batched = {"runs.transitioned": "runs", "actions.completed": "actions"}.get(delivery.envelope.type)
    return list(data[batched]) if batched else [data]


@dataclass
class EventLog:
    """Every event on the events exchange matching ``patterns``, in arrival order."""

    deliveries: list[Delivery] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def record(self, delivery: Delivery) -> None:
        async with self.changed:
            self.deliveries.append(delivery)
            self.changed.notify_all()

    def of(self, routing_key: str) -> list[dict[str, Any]]:
        """The events seen on ``routing_key``: each entry of a batched lifecycle message is one event.
        ``run.ready`` and ``automation.due`` include their quiet lane's (``run.ready.quiet``): the same
        message on a key of its own when it is small."""
        keys = {routing_key, _QUIET_KEYS.get(routing_key, routing_key)}
        return [entry for d in self.deliveries if d.routing_key in keys for entry in _entries(d)]

    async def wait_for(self, predicate: Callable[[EventLog], bool], within: float = 15.0) -> None:
        """Wait until ``predicate(self)`` holds (woken by each new event), or fail after ``within`` s."""
        async with asyncio.timeout(within):
            async with self.changed:
                await self.changed.wait_for(lambda: predicate(self))

    async def wait_count(self, routing_key: str, count: int, within: float = 15.0) -> list[dict[str, Any]]:
        await self.wait_for(lambda log: len(log.of(routing_key)) >= count, within)
        return self.of(routing_key)


@dataclass
class Stack:
    kind: str
    clock: Clock
    database_url: str
    broker_url: str | None
    topology: Topology
    prefix: str
    queues: set[str] = field(default_factory=set)

    def engine(self, instance: str = "test-1", **settings: Any) -> Engine:
        values: dict[str, Any] = {"database_url": self.database_url, "broker_url": self.broker_url or "memory://",
                                  "instance": instance, "lease_s": 5.0, "sweep_interval_s": 1.0, "grace_s": 3.0,
                                  "stale_pending_s": 5.0, "auth": False}
        values.update(settings)
        self.queues.add(f"{self.prefix}actwheel.ticker.{values['instance']}")
        store = open_store(self.database_url, clock=self.clock)
        bus: Bus
        if self.broker_url is None:
            bus = self.shared_memory_bus
        else:
            bus = AmqpBus(self.broker_url, topology=self.topology, grace=2.0, reconnect_interval=0.2)
        return Engine(Settings(**values), clock=self.clock, store=store, bus=bus, topology=self.topology,
                      queue_prefix=self.prefix)

    @property
    def shared_memory_bus(self) -> MemoryBus:
        if not hasattr(self, "_memory_bus"):
            self._memory_bus = MemoryBus(topology=self.topology, clock=self.clock, grace=2.0)
        return self._memory_bus

    @contextlib.asynccontextmanager
    async def watch(self, engine: Engine, *patterns: str) -> AsyncIterator[EventLog]:
        """Record events matching ``patterns`` (default: every run and action event) from ``engine``'s bus."""
        log = EventLog()
        bindings = tuple((self.topology.events, p) for p in (patterns or ("run.#", "action.#")))
        spec = QueueSpec(f"{self.prefix}test.watch.{uuid.uuid4().hex[:6]}", bindings, delivery_limit=1)
        self.queues.add(spec.name)
        await engine.bus.declare_queue(spec)
        subscription = await engine.bus.consume(spec.name, log.record, prefetch=500)
        try:
            yield log
        finally:
            await subscription.cancel()


async def delete_broker_topology(stack: Stack) -> None:
    """Remove every queue and exchange a services-stack test declared on the shared broker (best effort)."""
    if stack.broker_url is None:
        return
    import aio_pika

    connection = await aio_pika.connect(stack.broker_url, timeout=10)
    async with connection:
        channel = await connection.channel()
        roles = {spec.name for spec in role_queues(stack.topology, stack.prefix)}
        names = stack.queues | roles | {stack.topology.dead_letters}
        for queue in sorted(names):
            with contextlib.suppress(Exception):
                await channel.queue_delete(queue)
        for exchange in (*stack.topology.exchanges, stack.topology.dlx):
            with contextlib.suppress(Exception):
                await channel.exchange_delete(exchange)


def new_stack(kind: str, database_url: str, broker_url: str | None) -> Stack:
    prefix = f"t-{uuid.uuid4().hex[:8]}."
    clock: Clock = VirtualClock() if kind == "embedded" else SystemClock()
    topology = Topology.prefixed(prefix) if broker_url else Topology()
    return Stack(kind=kind, clock=clock, database_url=database_url, broker_url=broker_url, topology=topology,
                 prefix=prefix if broker_url else "")


async def pass_time(stack: Stack, seconds: float) -> None:
    """In half-second steps on the virtual clock (each instant announced in its own step)."""
    if not isinstance(stack.clock, VirtualClock):
        await asyncio.sleep(seconds)
        return
    while seconds > 0:
        await stack.clock.advance_and_settle(min(0.5, seconds))
        await asyncio.sleep(0.05)  # the database thread's work is not the loop's: let it land
        seconds -= 0.5
