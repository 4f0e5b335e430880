"""The in-process bus: RabbitMQ's semantics without a broker, for the embedded default.

Product code, not a test double: it passes the same contract suite as the AMQP adapter.

- Topic routing exactly as a RabbitMQ topic exchange (:mod:`actwheel.topics`);
  a queue bound by several matching patterns receives one copy.
- Queues are bounded by ``QueueSpec.max_length``. A publish that would overflow any
  target queue is refused as a whole with :class:`PublishRefused` (RabbitMQ's
  ``reject-publish`` nacks too, but still fills the queues that had room). The
  caller (the outbox relay) retries later; nothing is dropped silently.
  The dead-letter queue alone drops its oldest entry when full (counted).
- Deliveries go round-robin to the consumers with a free prefetch slot; a message
  that a consumer gives back (``Retry``, an error, a cancelled consumer) goes to the
  back of the queue with its delivery count raised, and past the queue's delivery
  limit to the dead-letter queue with the broker's headers (``x-first-death-reason:
  delivery_limit``).
- Nothing survives the process: messages live in memory only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actwheel.bus.base import (
    BROKER_EXCHANGE_HEADER,
    BROKER_QUEUE_HEADER,
    BROKER_REASON_HEADER,
    DELIVERY_COUNT_HEADER,
    Bus,
    BusState,
    BusStats,
    DeadLetterHandler,
    Handler,
    InFlight,
    Subscription,
    check_binding,
    check_exchange,
    check_prefetch,
)
from actwheel.bus.consuming import (
    Action,
    Outcome,
    RawMessage,
    dead_letter_headers,
    decide,
    decide_dead_letter,
)
from actwheel.bus.envelope import DEFAULT_MAX_BYTES, Envelope, encode
from actwheel.bus.topology import DEFAULT_TOPOLOGY, QueueSpec, Topology, check_routing_key
from actwheel.bus.wire import headers_per_item, message_headers
from actwheel.clock import Clock, SystemClock
from actwheel.errors import BusUnavailable, InvalidInput, InvalidMessage, PublishRefused, Unroutable
from actwheel.logs import get_logger
from actwheel.topics import topic_matches

__all__ = ["MemoryBus"]

_log = get_logger("actwheel.bus.memory")
_Process = Callable[[RawMessage], Awaitable[Outcome]]


@dataclass(slots=True, eq=False)
class _Message:
    body: bytes
    headers: dict[str, Any]
    exchange: str
    routing_key: str
    returned: int = 0  # times given back to the queue: RabbitMQ's x-delivery-count
    delivered: bool = False


class _Consumer:
    def __init__(self, prefetch: int, process: _Process) -> None:
        self.prefetch = prefetch
        self.process = process
        self.unacked = 0
        self.active = True
        self.inflight = InFlight()

    @property
    def has_room(self) -> bool:
        return self.active and self.unacked < self.prefetch


class _Queue:
    def __init__(self, name: str, spec: QueueSpec | None, max_length: int | None) -> None:
        self.name = name
        self.spec = spec
        self.max_length = max_length
        self.ready: deque[_Message] = deque()
        self.consumers: list[_Consumer] = []
        self._turn = 0

    @property
    def full(self) -> bool:
        return self.max_length is not None and len(self.ready) >= self.max_length

    def next_consumer(self) -> _Consumer | None:
        """The next consumer with a free slot, round-robin."""
        for _ in range(len(self.consumers)):
            self._turn = (self._turn + 1) % len(self.consumers)
            consumer = self.consumers[self._turn]
            if consumer.has_room:
                return consumer
        return None


class MemoryBus(Bus):
    """An in-process :class:`Bus`. ``clock`` times ``Retry`` delays; ``grace`` is the default drain time."""

    def __init__(
        self,
        *,
        topology: Topology = DEFAULT_TOPOLOGY,
        clock: Clock | None = None,
        grace: float = 10.0,
        max_message_bytes: int = DEFAULT_MAX_BYTES,
        dead_letter_max_length: int = 100_000,
    ) -> None:
        self.topology = topology
        self.stats = BusStats()
        self.state = BusState.NEW
        self._clock = clock or SystemClock()
        self._grace = grace
        self._max_bytes = max_message_bytes
        self._dead_letter_max_length = dead_letter_max_length
        self._bindings: dict[str, set[tuple[str, str]]] = {}  # exchange -> {(pattern, queue)}
        self._queues: dict[str, _Queue] = {}
        self._routes: dict[tuple[str, str], tuple[_Queue, ...]] = {}
        self._subscriptions: set[Subscription] = set()

    def __repr__(self) -> str:
        return f"<MemoryBus state={self.state.value} queues={len(self._queues)}>"

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self.state is BusState.RUNNING:
            return
        for exchange in (*self.topology.exchanges, self.topology.dlx):
            self._bindings.setdefault(exchange, set())
        if self.topology.dead_letters not in self._queues:
            self._queues[self.topology.dead_letters] = _Queue(
                self.topology.dead_letters, None, self._dead_letter_max_length)
        self._bind(self.topology.dlx, "#", self.topology.dead_letters)
        self.state = BusState.RUNNING

    async def stop(self, *, grace: float | None = None) -> None:
        if self.state in (BusState.NEW, BusState.STOPPED, BusState.STOPPING):
            self.state = BusState.STOPPED if self.state is BusState.NEW else self.state
            return
        self.state = BusState.STOPPING
        for subscription in tuple(self._subscriptions):
            await subscription.cancel(grace=grace)
        self.state = BusState.STOPPED

    def _require_open(self) -> None:
        if self.state not in (BusState.RUNNING, BusState.STOPPING):
            raise BusUnavailable(f"the memory bus is {self.state.value}; call start() first")

    # -- topology ----------------------------------------------------------------------------

    async def declare_queue(self, spec: QueueSpec) -> None:
        self._require_open()
        for i, (exchange, _) in enumerate(spec.bindings):
            if exchange not in self._bindings:
                raise InvalidInput(f"queue.bindings[{i}].exchange", exchange, "an exchange the bus declared")
        queue = self._queues.get(spec.name)
        if queue is None:
            self._queues[spec.name] = _Queue(spec.name, spec, spec.max_length)
        elif queue.spec is None or _arguments(queue.spec) != _arguments(spec):
            raise InvalidInput("queue", spec.name, f"the arguments it was declared with ({queue.spec})")
        for exchange, pattern in spec.bindings:
            self._bind(exchange, pattern, spec.name)

    def _bind(self, exchange: str, pattern: str, queue: str) -> None:
        self._bindings[exchange].add((pattern, queue))
        self._routes.clear()

    async def bind(self, queue: str, exchange: str, pattern: str) -> None:
        self._require_open()
        check_binding(self.topology, self._declared(), queue, exchange, pattern)
        self._bind(exchange, pattern, queue)

    async def unbind(self, queue: str, exchange: str, pattern: str) -> None:
        self._require_open()
        check_binding(self.topology, self._declared(), queue, exchange, pattern)
        self._bindings[exchange].discard((pattern, queue))
        self._routes.clear()

    def _declared(self) -> set[str]:
        return {name for name, queue in self._queues.items() if queue.spec is not None}

    def _route(self, exchange: str, routing_key: str) -> tuple[_Queue, ...]:
        key = (exchange, routing_key)
        queues = self._routes.get(key)
        if queues is None:
            names = {q for pattern, q in self._bindings[exchange] if topic_matches(pattern, routing_key)}
            queues = self._routes[key] = tuple(self._queues[name] for name in sorted(names))
        return queues

    # -- publishing --------------------------------------------------------------------------

    async def publish(
        self,
        exchange: str,
        routing_key: str,
        envelope: Envelope,
        *,
        headers: Mapping[str, Any] | None = None,
        mandatory: bool = True,
    ) -> None:
        self._require_open()
        body = self._encode(envelope)
        self._enqueue(exchange, routing_key, body, message_headers(headers), mandatory)

    async def publish_many(
        self,
        exchange: str,
        items: Sequence[tuple[str, Envelope]],
        *,
        mandatory: bool = True,
        headers: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> None:
        for (routing_key, envelope), item_headers in zip(items, headers_per_item(items, headers), strict=True):
            await self.publish(exchange, routing_key, envelope, headers=item_headers, mandatory=mandatory)

    async def publish_raw(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        *,
        headers: Mapping[str, Any] | None = None,
        mandatory: bool = True,
    ) -> None:
        self._require_open()
        self._enqueue(exchange, routing_key, bytes(body), dict(headers or {}), mandatory)

    def _encode(self, envelope: Envelope) -> bytes:
        body = encode(envelope)
        if len(body) > self._max_bytes:
            raise InvalidMessage("body.size", len(body), f"at most {self._max_bytes} bytes")
        return body

    def _enqueue(self, exchange: str, routing_key: str, body: bytes, headers: dict[str, Any],
                 mandatory: bool) -> None:
        check_exchange(self.topology, exchange)
        check_routing_key("routing_key", routing_key)
        targets = self._route(exchange, routing_key)
        if not targets:
            if mandatory:
                raise Unroutable(exchange, routing_key)
            return
        for queue in targets:
            if queue.full and (queue.spec is None or queue.spec.overflow == "reject-publish"):
                reason = f"queue {queue.name!r} is full ({queue.max_length})"
                raise PublishRefused(exchange, routing_key, reason)
        for queue in targets:
            self._append(queue, _Message(body, dict(headers), exchange, routing_key))
        self.stats.published += 1

    def _append(self, queue: _Queue, message: _Message) -> None:
        if queue.full:  # only drop-head queues (and the dead-letter queue) get here: drop the oldest
            queue.ready.popleft()
            _log.warning("bus.dead_letter_queue_full", queue=queue.name, dropped=1)
        queue.ready.append(message)
        self._pump(queue)

    # -- consuming ---------------------------------------------------------------------------

    async def consume(self, queue: str, handler: Handler, *, prefetch: int) -> Subscription:
        self._require_open()
        check_prefetch(prefetch)
        if queue == self.topology.dead_letters:
            raise InvalidInput("queue", queue, "a consuming queue (dead letters: consume_dead_letters)")
        target = self._queues.get(queue)
        if target is None:
            raise InvalidInput("queue", queue, "a queue declared with declare_queue")

        async def process(raw: RawMessage) -> Outcome:
            return await decide(raw, handler, max_bytes=self._max_bytes, clock=self._clock)

        return self._subscribe(target, prefetch, process)

    async def consume_dead_letters(self, handler: DeadLetterHandler, *, prefetch: int) -> Subscription:
        self._require_open()
        check_prefetch(prefetch)

        async def process(raw: RawMessage) -> Outcome:
            return await decide_dead_letter(raw, handler, clock=self._clock)

        return self._subscribe(self._queues[self.topology.dead_letters], prefetch, process)

    def _subscribe(self, queue: _Queue, prefetch: int, process: _Process) -> Subscription:
        consumer = _Consumer(prefetch, process)
        queue.consumers.append(consumer)

        async def cancel(grace: float | None) -> None:
            await self._cancel(queue, consumer, subscription, grace)

        subscription = Subscription(queue.name, cancel)
        self._subscriptions.add(subscription)
        subscription.ready.set()
        self._pump(queue)
        return subscription

    async def _cancel(self, queue: _Queue, consumer: _Consumer, subscription: Subscription,
                      grace: float | None) -> None:
        consumer.active = False
        queue.consumers.remove(consumer)
        await consumer.inflight.drain(self._grace if grace is None else grace)
        self._subscriptions.discard(subscription)
        self._pump(queue)

    def _pump(self, queue: _Queue) -> None:
        while queue.ready:
            consumer = queue.next_consumer()
            if consumer is None:
                return
            message = queue.ready.popleft()
            consumer.unacked += 1
            consumer.inflight.spawn(self._deliver(queue, consumer, message))

    async def _deliver(self, queue: _Queue, consumer: _Consumer, message: _Message) -> None:
        raw = self._raw(queue, message)
        outcome = Outcome(Action.REQUEUE, "consumer_cancelled")
        try:
            outcome = await consumer.process(raw)
        finally:
            consumer.unacked -= 1
            self._settle(queue, message, raw, outcome)
            self._pump(queue)

    def _raw(self, queue: _Queue, message: _Message) -> RawMessage:
        redelivered, message.delivered = message.delivered, True
        self.stats.delivered[queue.name] += 1
        if redelivered:
            self.stats.redelivered[queue.name] += 1
        return RawMessage(
            body=message.body,
            headers={**message.headers, DELIVERY_COUNT_HEADER: message.returned},
            queue=queue.name,
            exchange=message.exchange,
            routing_key=message.routing_key,
            redelivered=redelivered,
            delivery_count=message.returned + 1,
            trusted=True,  # in-process: only this process can publish here
        )

    # -- settling ----------------------------------------------------------------------------

    def _settle(self, queue: _Queue, message: _Message, raw: RawMessage, outcome: Outcome) -> None:
        if outcome.action is Action.ACK:
            self.stats.acked += 1
        elif outcome.action is Action.REQUEUE:
            self._give_back(queue, message)
        else:
            self._dead_letter(queue, dead_letter_headers(raw, outcome), message, outcome.reason)

    def _give_back(self, queue: _Queue, message: _Message) -> None:
        self.stats.requeued += 1
        message.returned += 1
        if queue.spec is not None and message.returned > queue.spec.delivery_limit:
            self._dead_letter(queue, _broker_death_headers(queue, message), message, "delivery_limit")
        else:
            queue.ready.append(message)

    def _dead_letter(self, queue: _Queue, headers: dict[str, Any], message: _Message, reason: str) -> None:
        self.stats.dead_lettered[reason] += 1
        headers.pop(DELIVERY_COUNT_HEADER, None)
        for target in self._route(self.topology.dlx, queue.name):
            self._append(target, _Message(message.body, headers, self.topology.dlx, queue.name))


def _arguments(spec: QueueSpec) -> tuple[int, int | None]:
    return (spec.delivery_limit, spec.max_length)


def _broker_death_headers(queue: _Queue, message: _Message) -> dict[str, Any]:
    """What RabbitMQ adds when a quorum queue dead-letters at its delivery limit."""
    return {
        **message.headers,
        BROKER_REASON_HEADER: "delivery_limit",
        BROKER_QUEUE_HEADER: queue.name,
        BROKER_EXCHANGE_HEADER: message.exchange,
        "x-death": [{
            "count": 1,
            "reason": "delivery_limit",
            "queue": queue.name,
            "exchange": message.exchange,
            "routing-keys": [message.routing_key],
        }],
    }
