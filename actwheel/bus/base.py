"""The bus port: publish envelopes to topic exchanges, consume them from durable queues.

Contract shared by every adapter (``memory``, ``amqp``), checked by one test suite:

- **Publishing** returns only once the broker has taken responsibility for the message
  (publisher confirm). An unroutable mandatory message raises :class:`Unroutable`, a
  full queue or a broker nack raises :class:`PublishRefused`, an unreachable broker
  raises :class:`BusUnavailable`. A retry after an error may duplicate a message:
  consumers dedupe by ``envelope.id``.
- **Ack by scope, outcome by exception.** A handler that returns acks the delivery;
  ``raise Retry(delay)`` requeues it (after ``delay`` seconds, held by the consumer);
  ``raise Reject(detail, reason=...)`` or :class:`InvalidMessage` dead-letters it at once
  with its reason (``rejected`` unless given: ``invalid_message``, ``unknown_type``,
  ``unauthenticated``, ``permission``, ...) in its headers; any other exception is logged
  and requeues it. Every requeue counts toward the queue's delivery limit, past which the
  message is dead-lettered with reason ``delivery_limit``. A handler that raises never stops its consumer.
- **Who published.** ``Delivery.publisher`` is the AMQP ``user_id`` property, which RabbitMQ
  refuses unless it names the publishing connection's own user (``None`` when the publisher did
  not set it). The memory bus is in-process: everything on it was published by this process, so
  its deliveries are ``trusted`` and carry no publisher; an amqp delivery is never trusted.
- A body that does not decode (malformed, oversized, unknown schema version) never
  reaches a handler: it is dead-lettered with its reason and counted.
- **Bindings** come with :meth:`Bus.declare_queue` or one at a time with :meth:`Bus.bind`;
  :meth:`Bus.unbind` removes one (a publish it routed is unroutable once no other binding
  matches).
- **Prefetch** bounds the deliveries a consumer has in flight at once.
- Messages a consumer had not acked when it was cancelled, or when its connection
  died, come back (``redelivered=True``) to another consumer. An ack that can no
  longer be sent (dead channel) is dropped and counted, never sent on a new channel.
"""

from __future__ import annotations

import asyncio
import enum
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from actwheel.bus.envelope import Envelope
from actwheel.bus.topology import QueueSpec, Topology, check_routing_key
from actwheel.errors import InvalidInput, InvalidMessage
from actwheel.logs import get_logger

__all__ = [
    "INVALID_MESSAGE",
    "REJECTED",
    "UNKNOWN_TYPE",
    "Bus",
    "BusState",
    "BusStats",
    "DeadLetter",
    "DeadLetterHandler",
    "Delivery",
    "Handler",
    "InFlight",
    "Reject",
    "Retry",
    "Subscription",
    "invalid_reason",
]

_log = get_logger("actwheel.bus")

#: How long :meth:`InFlight.drain` waits for cancelled handler tasks to finish. A task that
#: swallows its cancellation (or awaits something unbounded in a ``finally``) would otherwise
#: hang the consumer's cancel, and with it the bus's ``stop()``.
CANCEL_WAIT_S = 5.0

#: Headers actwheel sets when it dead-letters a message itself.
REASON_HEADER = "x-actwheel-reason"
DETAIL_HEADER = "x-actwheel-detail"
ORIGIN_QUEUE_HEADER = "x-actwheel-queue"
ORIGIN_EXCHANGE_HEADER = "x-actwheel-exchange"
ORIGIN_ROUTING_KEY_HEADER = "x-actwheel-routing-key"
#: The ``user_id`` the dead message was published with: a record for whoever reads the dead letter,
#: never authority (a dead letter is republished by someone else, with their own ``user_id``).
ORIGIN_PUBLISHER_HEADER = "x-actwheel-publisher"
#: Dead-letter reasons (``x-actwheel-reason``) of a message its handler refused: a well-formed request
#: refused as it stands (an unknown automation, a lost version race, ...); data that does not fit its
#: type (a missing or ill-typed field, an invalid trigger or action config); an envelope type the
#: queue does not take.
REJECTED = "rejected"
INVALID_MESSAGE = "invalid_message"
UNKNOWN_TYPE = "unknown_type"
#: Headers the broker sets when it dead-letters (delivery limit), emulated by the memory bus.
BROKER_REASON_HEADER = "x-first-death-reason"
BROKER_QUEUE_HEADER = "x-first-death-queue"
BROKER_EXCHANGE_HEADER = "x-first-death-exchange"
DELIVERY_COUNT_HEADER = "x-delivery-count"


class Retry(Exception):  # an outcome, not an error
    """Raised by a handler: requeue this delivery, after ``delay`` seconds when given.

    The consumer holds the delivery (it keeps its prefetch slot) during the delay.
    """

    def __init__(self, delay: float | None = None) -> None:
        if delay is not None and delay < 0:
            raise InvalidInput("delay", delay, "None or seconds >= 0")
        self.delay = delay
        super().__init__(f"retry after {delay}s" if delay else "retry")


class Reject(Exception):  # an outcome, not an error
    """Raised by a handler: dead-letter this delivery now, ``reason`` and ``detail`` in its headers.

    :param detail: what a human reads (``x-actwheel-detail``)
    :param reason: the machine-readable reason (``x-actwheel-reason``): ``rejected`` unless given
    """

    def __init__(self, detail: str, *, reason: str = REJECTED) -> None:
        self.detail = detail
        self.reason = reason
        super().__init__(detail)


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivery:
    """One delivery of an envelope to a consumer.

    :ivar delivery_count: 1 on the first delivery, 2 on the first redelivery, ...
    :ivar redelivered: the broker delivered this message before (to anyone)
    :ivar headers: the AMQP headers as sent, plus the broker's
    :ivar publisher: the broker-validated AMQP ``user_id`` of whoever published it; ``None`` when
        the publisher did not set one (RabbitMQ refuses a ``user_id`` other than the connection's user)
    :ivar trusted: published inside this process (the memory bus): no identity to check
    """

    envelope: Envelope
    queue: str
    exchange: str
    routing_key: str
    redelivered: bool
    delivery_count: int
    headers: Mapping[str, Any]
    publisher: str | None = None
    trusted: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class DeadLetter:
    """A message in the dead-letter queue and why it is there.

    :ivar reason: ``delivery_limit``, ``rejected``, ``invalid_message``, ``unknown_type``, ``malformed``,
        ``oversized``, ``unsupported_schema``, ``unauthenticated`` or ``permission`` (a handler's
        :class:`Reject` may name others; ``expired``/``maxlen`` from the broker are passed on)
    :ivar detail: a human-readable explanation when actwheel dead-lettered it
    :ivar queue: the queue it was dead-lettered from
    :ivar envelope: the decoded envelope, ``None`` when the body does not decode
    """

    reason: str
    detail: str
    queue: str
    exchange: str
    routing_key: str
    body: bytes
    headers: Mapping[str, Any]
    envelope: Envelope | None


def invalid_reason(exc: InvalidInput) -> str:
    """The dead-letter reason of input a handler refused: ``unknown_type`` for an envelope type it does
    not take (an :class:`InvalidMessage` naming ``type``), ``invalid_message`` for everything else."""
    return UNKNOWN_TYPE if isinstance(exc, InvalidMessage) and exc.field == "type" else INVALID_MESSAGE


Handler = Callable[[Delivery], Awaitable[None]]
DeadLetterHandler = Callable[[DeadLetter], Awaitable[None]]


@dataclass(slots=True)
class BusStats:
    """Counters for the metrics actor; adapters only ever increase them."""

    published: int = 0
    delivered: Counter[str] = field(default_factory=Counter)  # by queue
    redelivered: Counter[str] = field(default_factory=Counter)  # by queue
    acked: int = 0
    requeued: int = 0
    dead_lettered: Counter[str] = field(default_factory=Counter)  # by reason
    handler_errors: int = 0
    stale_settlements: int = 0  # acks/nacks dropped because their channel had died
    reconnects: int = 0
    consumers_restored: int = 0
    dead_links: int = 0  # connections closed after a missing confirm and an unanswered probe


class BusState(enum.Enum):
    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class InFlight:
    """The handler tasks a consumer owns, and their bounded drain.

    :param cancel_wait_s: how long :meth:`drain` waits for the tasks it cancelled
    """

    def __init__(self, *, cancel_wait_s: float = CANCEL_WAIT_S) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._cancel_wait_s = cancel_wait_s

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def drain(self, grace: float) -> None:
        """Let tasks finish for ``grace`` seconds, then cancel the rest and wait for them, at most
        ``cancel_wait_s``: a task that ignores its cancellation is logged and left behind rather
        than allowed to hang shutdown."""
        pending = set(self._tasks)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=grace)
        for task in late:
            task.cancel()
        if late:
            await self._await_cancelled(late)

    async def _await_cancelled(self, cancelled: set[asyncio.Task[None]]) -> None:
        _, stuck = await asyncio.wait(cancelled, timeout=self._cancel_wait_s)
        if stuck:
            _log.warning("inflight_tasks_ignored_cancel", count=len(stuck),
                         tasks=sorted(task.get_name() for task in stuck), cancel_wait_s=self._cancel_wait_s)


class Subscription:
    """A live consumer on one queue.

    :ivar ready: set once the broker has registered the consumer
    """

    def __init__(self, queue: str, canceller: Callable[[float | None], Awaitable[None]]) -> None:
        self.queue = queue
        self.ready = asyncio.Event()
        self._canceller = canceller
        self._cancelled: asyncio.Task[None] | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled is not None

    async def cancel(self, *, grace: float | None = None) -> None:
        """Stop intake, give in-flight handlers ``grace`` seconds (the bus default when
        ``None``), then cancel them; their unacked messages are redelivered. Idempotent."""
        if self._cancelled is None:
            self._cancelled = asyncio.ensure_future(self._canceller(grace))
        await asyncio.shield(self._cancelled)

    def __repr__(self) -> str:
        return f"<Subscription queue={self.queue!r} ready={self.ready.is_set()} cancelled={self.cancelled}>"


class Bus(ABC):
    """A topic message bus. See the module docstring for the delivery contract.

    Use as ``async with bus:`` or call :meth:`start` and :meth:`stop`.

    :ivar topology: the exchange and dead-letter names this bus uses
    :ivar stats: counters for the metrics actor
    """

    topology: Topology
    stats: BusStats

    @abstractmethod
    async def start(self) -> None:
        """Connect and declare the exchanges and the dead-letter pair (idempotent on the broker).

        :raises BusUnavailable: the broker cannot be reached
        """

    @abstractmethod
    async def stop(self, *, grace: float | None = None) -> None:
        """Drain and close: cancel every consumer (no new deliveries), give in-flight handlers
        ``grace`` seconds, cancel the rest (their messages are redelivered), then close the
        channels and the connection. Idempotent; never raises for a broker that is gone."""

    @abstractmethod
    async def declare_queue(self, spec: QueueSpec) -> None:
        """Declare a durable queue with its delivery limit, dead-lettering and bindings.

        Idempotent for the same spec; adding bindings to an existing queue is allowed.

        :raises InvalidInput: ``queue`` exists with other arguments, or a binding names an unknown exchange
        :raises BusUnavailable: the broker cannot be reached
        """

    @abstractmethod
    async def bind(self, queue: str, exchange: str, pattern: str) -> None:
        """Bind the declared ``queue`` to ``exchange`` with ``pattern``; idempotent.

        :raises InvalidInput: ``queue`` was never declared, ``exchange`` is unknown, or ``pattern`` is bad
        :raises BusUnavailable: the broker cannot be reached
        """

    @abstractmethod
    async def unbind(self, queue: str, exchange: str, pattern: str) -> None:
        """Remove the binding of ``queue`` to ``exchange`` with ``pattern``; a binding that is not there is
        no error. From then on a publish that only this binding routed is unroutable.

        :raises InvalidInput: ``queue`` was never declared, ``exchange`` is unknown, or ``pattern`` is bad
        :raises BusUnavailable: the broker cannot be reached
        """

    @abstractmethod
    async def publish(
        self,
        exchange: str,
        routing_key: str,
        envelope: Envelope,
        *,
        headers: Mapping[str, Any] | None = None,
        mandatory: bool = True,
    ) -> None:
        """Publish one persistent message and wait for the broker's confirm.

        :raises InvalidInput: ``exchange`` is not one of ``topology.exchanges``, or the routing key is bad
        :raises InvalidMessage: the envelope does not encode or is larger than the bus allows
        :raises Unroutable: ``mandatory`` and no queue is bound for ``routing_key``
        :raises PublishRefused: a target queue is full, or the broker nacked the message
        :raises BusUnavailable: the broker cannot be reached or did not confirm in time
        """

    @abstractmethod
    async def publish_many(
        self,
        exchange: str,
        items: Sequence[tuple[str, Envelope]],
        *,
        mandatory: bool = True,
        headers: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> None:
        """Publish ``(routing_key, envelope)`` pairs in order and wait for all confirms together.

        ``headers``: each item's headers (as :meth:`publish` takes them), in the order of ``items``.

        :raises InvalidInput: ``headers`` is not as long as ``items`` (nothing is published)

        Not atomic: when it raises (the first failure, in ``items`` order, with the errors of
        :meth:`publish`), some messages may have been published; retrying them all is safe.
        """

    @abstractmethod
    async def publish_raw(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        *,
        headers: Mapping[str, Any] | None = None,
        mandatory: bool = True,
    ) -> None:
        """Publish ``body`` as is (replaying a dead letter, bridging a foreign publisher).

        The body is not validated; a consumer dead-letters it if it does not decode.

        :raises: as :meth:`publish`
        """

    @abstractmethod
    async def consume(self, queue: str, handler: Handler, *, prefetch: int) -> Subscription:
        """Deliver the messages of ``queue`` to ``handler``, at most ``prefetch`` at a time.

        Returns once the consumer is live (``subscription.ready`` is set).

        :raises InvalidInput: ``queue`` was never declared, or ``prefetch`` is not 1..65535
        :raises BusUnavailable: the broker cannot be reached
        """

    @abstractmethod
    async def consume_dead_letters(self, handler: DeadLetterHandler, *, prefetch: int) -> Subscription:
        """Deliver the dead-letter queue to ``handler``. Returning acks (removes) the dead letter;
        ``Retry`` or another exception requeues it; ``Reject`` removes it (logged).

        :raises BusUnavailable: the broker cannot be reached
        """

    async def __aenter__(self) -> Bus:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


def check_prefetch(prefetch: int) -> int:
    """``prefetch`` if it is a valid consumer prefetch, else :class:`InvalidInput`."""
    if not isinstance(prefetch, int) or not 1 <= prefetch <= 65535:
        raise InvalidInput("prefetch", prefetch, "an integer from 1 to 65535")
    return prefetch


def check_exchange(topology: Topology, exchange: str) -> str:
    """``exchange`` if publishers may name it, else :class:`InvalidInput`."""
    if exchange not in topology.exchanges:
        raise InvalidInput("exchange", exchange, f"one of {', '.join(topology.exchanges)}")
    return exchange



def check_binding(topology: Topology, declared: Collection[str], queue: str, exchange: str, pattern: str) -> None:
    """Refuse a :meth:`Bus.bind` / :meth:`Bus.unbind` of an undeclared queue, to an unknown exchange, or
    with a pattern AMQP does not take (:class:`InvalidInput` naming ``queue``, ``exchange`` or ``pattern``)."""
    if queue not in declared:
        raise InvalidInput("queue", queue, "a queue declared with declare_queue")
    check_exchange(topology, exchange)
    check_routing_key("pattern", pattern)
