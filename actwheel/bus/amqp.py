"""The RabbitMQ bus, wrapping aio-pika's robust connection.

Topology: durable topic exchanges; durable **quorum** queues with an explicit
``x-delivery-limit``, ``x-dead-letter-exchange`` (routing key = the queue name),
``x-overflow: reject-publish`` and ``x-dead-letter-strategy: at-least-once`` (the
broker keeps a message until the dead-letter queue has confirmed it).

Channels: one publisher channel (publisher confirms, ``basic.return`` raises), one
admin channel for declarations (a refused declaration closes only that channel), and
one channel per consumer so that ``basic.qos`` is that consumer's prefetch and a
consumer's channel error harms nobody else.

Reconnection is aio-pika's ``connect_robust``: it reopens channels, re-declares and
re-consumes. aio-pika has had bugs there (consumers silently missing after a broker
restart, a broker-side ``basic.cancel`` never recovered), so after every reconnect
— and every ``consumer_check_interval`` seconds — each consumer checks that its
consumer tag is live on its current channel and otherwise reopens itself.

An ack for a message delivered on a channel that has since died is never sent on the
new channel (aio-pika raises ``ChannelInvalidStateError``); it is dropped and counted
(``stats.stale_settlements``) and the broker redelivers the message.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import aio_pika
import aiormq
from aio_pika.abc import (
    AbstractIncomingMessage,
    AbstractRobustChannel,
    AbstractRobustConnection,
    AbstractRobustQueue,
    DeliveryMode,
    ExchangeType,
)
from aio_pika.exceptions import CONNECTION_EXCEPTIONS, DeliveryError, PublishError
from pamqp.commands import Basic

from actwheel.bus.base import (
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
from actwheel.bus.envelope import CONTENT_TYPE, DEFAULT_MAX_BYTES, Envelope, encode
from actwheel.bus.topology import DEFAULT_TOPOLOGY, QueueSpec, Topology, check_routing_key
from actwheel.bus.wire import message_headers
from actwheel.clock import Clock, SystemClock
from actwheel.errors import BusError, BusUnavailable, InvalidInput, InvalidMessage, PublishRefused, Unroutable
from actwheel.logs import get_logger
from actwheel.redact import redact_url

__all__ = ["AmqpBus", "queue_arguments", "url_user"]

_log = get_logger("actwheel.bus.amqp")
_Process = Callable[[RawMessage], Awaitable[Outcome]]
#: Upper bound for every cleanup step (cancel, close): cleanup never hangs on a dead broker.
_CLEANUP_S = 5.0
#: Errors that mean the channel or connection is gone, not that the request was wrong.
_GONE = (*CONNECTION_EXCEPTIONS, asyncio.TimeoutError)
#: Messages written before their confirms are awaited, per round trip of publish_many.
_PIPELINE = 1000
_PERSISTENT = int(DeliveryMode.PERSISTENT)


def queue_arguments(spec: QueueSpec, topology: Topology) -> dict[str, Any]:
    """The ``x-`` arguments of a consuming quorum queue."""
    arguments: dict[str, Any] = {
        "x-queue-type": "quorum",
        "x-delivery-limit": spec.delivery_limit,
        "x-dead-letter-exchange": topology.dlx,
        "x-dead-letter-routing-key": spec.name,
        # at-least-once dead-lettering needs reject-publish; a drop-head feed does not dead-letter drops
        "x-dead-letter-strategy": "at-least-once" if spec.overflow == "reject-publish" else "at-most-once",
        "x-overflow": spec.overflow,
    }
    if spec.max_length is not None:
        arguments["x-max-length"] = spec.max_length
    if spec.expires_s is not None:
        arguments["x-expires"] = int(spec.expires_s * 1000)
    return arguments


class AmqpBus(Bus):
    """A :class:`Bus` on RabbitMQ (3.10+: quorum queues with delivery limits).

    :param url: ``amqp://user:password@host:port/vhost`` (never logged with its password)
    :param publish_timeout: seconds to wait for a confirm before :class:`BusUnavailable`
    :param consumer_check_interval: seconds between checks that every consumer is live
    :param user_id: the ``user_id`` property of every envelope this bus publishes (RabbitMQ refuses it
        unless it is the connection's user, so a consumer can tell who published); default: the URL's
        user. ``""``: none (an authentication mechanism where the user is not the URL's, e.g. EXTERNAL).
        Raw publishes (dead-letter copies, replays) never carry one.
    """

    def __init__(
        self,
        url: str,
        *,
        topology: Topology = DEFAULT_TOPOLOGY,
        clock: Clock | None = None,
        grace: float = 10.0,
        max_message_bytes: int = DEFAULT_MAX_BYTES,
        publish_timeout: float = 10.0,
        connect_timeout: float = 10.0,
        reconnect_interval: float = 1.0,
        consumer_check_interval: float = 30.0,
        dead_letter_max_length: int = 100_000,
        connection_name: str = "actwheel",
        user_id: str | None = None,
    ) -> None:
        self.topology = topology
        self.stats = BusStats()
        self.state = BusState.NEW
        self._url = url
        self._clock = clock or SystemClock()
        self._grace = grace
        self._max_bytes = max_message_bytes
        self._publish_timeout = publish_timeout
        self._connect_timeout = connect_timeout
        self._reconnect_interval = reconnect_interval
        self._check_interval = consumer_check_interval
        self._dead_letter_max_length = dead_letter_max_length
        self._connection_name = connection_name
        self._user_id = url_user(url) if user_id is None else (user_id or None)
        self._connection: AbstractRobustConnection | None = None
        self._admin: AbstractRobustChannel | None = None
        self._publisher: AbstractRobustChannel | None = None
        self._specs: dict[str, QueueSpec] = {}
        self._consumers: set[_Consumer] = set()
        self._tasks = InFlight()

    def __repr__(self) -> str:
        return f"<AmqpBus {redact_url(self._url)} state={self.state.value} consumers={len(self._consumers)}>"

    @property
    def connection(self) -> AbstractRobustConnection:
        """The robust connection (tests use it to break the transport)."""
        if self._connection is None:
            raise BusUnavailable("the AMQP bus is not started")
        return self._connection

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self.state is BusState.RUNNING:
            return
        self.state = BusState.STARTING
        try:
            await self._connect()
            await self._declare_exchanges()
        except BaseException:
            await self._close_connection()
            self.state = BusState.NEW
            raise
        self._tasks.spawn(self._watch_consumers())
        self.state = BusState.RUNNING

    async def _connect(self) -> None:
        try:
            self._connection = await aio_pika.connect_robust(
                self._url,
                timeout=self._connect_timeout,
                reconnect_interval=self._reconnect_interval,
                client_properties={"connection_name": self._connection_name},
            )
        except _GONE as exc:
            where = redact_url(self._url)
            raise BusUnavailable(f"cannot reach the broker at {where}: {_describe(exc)}") from None
        self._connection.reconnect_callbacks.add(self._on_reconnect)
        connection = self._connection
        self._admin = await _open_channel(connection, publisher_confirms=False)
        self._publisher = await _open_channel(connection, publisher_confirms=True, on_return_raises=True)

    async def _declare_exchanges(self) -> None:
        admin, _ = self._require_channels()
        for name in (*self.topology.exchanges, self.topology.dlx):
            await admin.declare_exchange(name, ExchangeType.TOPIC, durable=True)
        dead_letters = await admin.declare_queue(
            self.topology.dead_letters,
            durable=True,
            arguments={"x-queue-type": "quorum", "x-max-length": self._dead_letter_max_length,
                       "x-overflow": "drop-head"},
        )
        await dead_letters.bind(self.topology.dlx, "#")

    async def stop(self, *, grace: float | None = None) -> None:
        if self.state in (BusState.NEW, BusState.STOPPED, BusState.STOPPING):
            return
        self.state = BusState.STOPPING
        consumers = tuple(self._consumers)
        await asyncio.gather(*(consumer.subscription.cancel(grace=grace) for consumer in consumers))
        await self._tasks.drain(0)
        await self._close_connection()
        self.state = BusState.STOPPED

    async def _close_connection(self) -> None:
        connection, self._connection = self._connection, None
        self._admin = self._publisher = None
        if connection is not None:
            await _bounded(connection.close(), "close connection")

    def _require_open(self) -> None:
        if self.state not in (BusState.RUNNING, BusState.STOPPING) or self._connection is None:
            raise BusUnavailable(f"the AMQP bus is {self.state.value}; call start() first")

    def _require_channels(self) -> tuple[AbstractRobustChannel, AbstractRobustChannel]:
        if self._admin is None or self._publisher is None:
            raise BusUnavailable("the AMQP bus is not started")
        return self._admin, self._publisher

    # -- topology ----------------------------------------------------------------------------

    async def declare_queue(self, spec: QueueSpec) -> None:
        self._require_open()
        known = (*self.topology.exchanges, self.topology.dlx)
        for i, (exchange, _) in enumerate(spec.bindings):
            if exchange not in known:
                raise InvalidInput(f"queue.bindings[{i}].exchange", exchange, "an exchange the bus declared")
        admin, _ = self._require_channels()
        queue = await self._declare_on(admin, spec)
        for exchange, pattern in spec.bindings:
            await _call(queue.bind(exchange, pattern), "bind queue")
        self._specs[spec.name] = spec

    async def bind(self, queue: str, exchange: str, pattern: str) -> None:
        # Through the underlying channel, not a RobustQueue: aio-pika re-binds a RobustQueue's bindings on
        # every reconnect, so a pattern bound that way would come back after unbind. Bindings of a durable
        # queue live on the broker; a reconnect does not lose them.
        self._require_open()
        check_binding(self.topology, self._specs, queue, exchange, pattern)
        admin, _ = self._require_channels()
        channel = await _call(admin.get_underlay_channel(), "bind queue")
        await _call(channel.queue_bind(queue, exchange, routing_key=pattern), "bind queue")

    async def unbind(self, queue: str, exchange: str, pattern: str) -> None:
        self._require_open()
        check_binding(self.topology, self._specs, queue, exchange, pattern)
        admin, _ = self._require_channels()
        channel = await _call(admin.get_underlay_channel(), "unbind queue")
        await _call(channel.queue_unbind(queue, exchange, routing_key=pattern), "unbind queue")

    async def _declare_on(self, channel: AbstractRobustChannel, spec: QueueSpec) -> AbstractRobustQueue:
        try:
            return await channel.declare_queue(
                spec.name, durable=True, arguments=queue_arguments(spec, self.topology))
        except aiormq.exceptions.ChannelPreconditionFailed as exc:
            raise InvalidInput("queue", spec.name, f"the arguments it was declared with ({exc})") from None
        except _GONE as exc:
            raise BusUnavailable(f"declare queue {spec.name!r}: {_describe(exc)}") from None

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
        check_exchange(self.topology, exchange)
        check_routing_key("routing_key", routing_key)
        await self._send(exchange, [(routing_key, *self._frame(envelope, headers))], mandatory)

    async def publish_many(
        self,
        exchange: str,
        items: Sequence[tuple[str, Envelope]],
        *,
        mandatory: bool = True,
    ) -> None:
        self._require_open()
        check_exchange(self.topology, exchange)
        _check_unique_ids(items)
        frames = [(check_routing_key("routing_key", key), *self._frame(env, None)) for key, env in items]
        for start in range(0, len(frames), _PIPELINE):
            await self._send(exchange, frames[start:start + _PIPELINE], mandatory)

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
        check_exchange(self.topology, exchange)
        check_routing_key("routing_key", routing_key)
        await self._send(exchange, [(routing_key, bytes(body), _raw_properties(headers))], mandatory)

    def _frame(self, envelope: Envelope, headers: Mapping[str, Any] | None) -> tuple[bytes, Any]:
        body = encode(envelope)
        if len(body) > self._max_bytes:
            raise InvalidMessage("body.size", len(body), f"at most {self._max_bytes} bytes")
        properties = Basic.Properties(
            headers=message_headers(headers),
            content_type=CONTENT_TYPE,
            delivery_mode=_PERSISTENT,
            message_id=envelope.id,
            message_type=envelope.type,
            correlation_id=envelope.correlation_id,
            timestamp=envelope.occurred_at,
            app_id=envelope.source,
            user_id=self._user_id,
        )
        return body, properties

    async def _send(self, exchange: str, frames: Sequence[tuple[str, bytes, Any]], mandatory: bool) -> None:
        """Write every frame at once, then wait for all the confirms; raise the first failure in order.

        aio-pika's ``Exchange.publish`` waits for the socket to drain after each message;
        writing them all to aiormq's channel first and awaiting the confirms together is
        what makes a batch cheap (see bench/bus.py).
        """
        channel = await self._writable_channel()
        try:
            async with asyncio.timeout(self._publish_timeout):
                results = await asyncio.gather(
                    *(channel.basic_publish(body, exchange=exchange, routing_key=key, properties=properties,
                                            mandatory=mandatory, wait=False)
                      for key, body, properties in frames),
                    return_exceptions=True,
                )
        except TimeoutError:
            raise BusUnavailable(f"no confirm from the broker within {self._publish_timeout}s") from None
        for (key, _, _), result in zip(frames, results, strict=True):
            if isinstance(result, BaseException):
                raise _publish_error(exchange, key, result)
        self.stats.published += len(frames)

    async def _writable_channel(self) -> Any:
        if self._publisher is None or self._publisher.is_closed:
            raise BusUnavailable("the AMQP bus has no open publisher channel (reconnecting?)")
        try:
            return await self._publisher.get_underlay_channel()
        except _GONE as exc:
            raise BusUnavailable(f"publisher channel: {_describe(exc)}") from None

    # -- consuming ---------------------------------------------------------------------------

    async def consume(self, queue: str, handler: Handler, *, prefetch: int) -> Subscription:
        self._require_open()
        check_prefetch(prefetch)
        if queue == self.topology.dead_letters:
            raise InvalidInput("queue", queue, "a consuming queue (dead letters: consume_dead_letters)")

        async def process(raw: RawMessage) -> Outcome:
            return await decide(raw, handler, max_bytes=self._max_bytes, clock=self._clock)

        return await self._subscribe(queue, prefetch, process)

    async def consume_dead_letters(self, handler: DeadLetterHandler, *, prefetch: int) -> Subscription:
        self._require_open()
        check_prefetch(prefetch)

        async def process(raw: RawMessage) -> Outcome:
            return await decide_dead_letter(raw, handler, clock=self._clock)

        return await self._subscribe(self.topology.dead_letters, prefetch, process)

    async def _subscribe(self, queue: str, prefetch: int, process: _Process) -> Subscription:
        consumer = _Consumer(self, queue, prefetch, process)
        await consumer.open()
        self._consumers.add(consumer)
        return consumer.subscription

    async def _on_reconnect(self, *_: Any) -> None:
        self.stats.reconnects += 1
        _log.info("bus.reconnected", broker=redact_url(self._url), consumers=len(self._consumers))
        # A task, not inline: the check opens channels, and this callback runs inside
        # aio-pika's reconnection routine.
        self._tasks.spawn(self._verify_consumers())

    async def _verify_consumers(self) -> None:
        for consumer in tuple(self._consumers):
            await consumer.verify()

    async def _watch_consumers(self) -> None:
        while True:
            await self._clock.sleep(self._check_interval)
            await self._verify_consumers()

    # -- settling ----------------------------------------------------------------------------

    async def _settle(self, message: AbstractIncomingMessage, raw: RawMessage, outcome: Outcome) -> None:
        try:
            await self._apply(message, raw, outcome)
        except _GONE as exc:
            # The channel that delivered this message is gone; its tag means nothing on any
            # other channel. The broker requeued the message when the channel died.
            self.stats.stale_settlements += 1
            _log.warning("bus.settle_dropped", queue=raw.queue, action=outcome.action.value,
                         error=_describe(exc))

    async def _apply(self, message: AbstractIncomingMessage, raw: RawMessage, outcome: Outcome) -> None:
        if outcome.action is Action.ACK:
            await message.ack()
            self.stats.acked += 1
        elif outcome.action is Action.REQUEUE:
            await self._requeue(message, raw)
        elif await self._dead_letter(raw, outcome):
            self.stats.dead_lettered[outcome.reason] += 1  # the dead-letter queue has it now
            await message.ack()
        else:
            await self._requeue(message, raw)

    async def _requeue(self, message: AbstractIncomingMessage, raw: RawMessage) -> None:
        await message.nack(requeue=True)
        self.stats.requeued += 1
        spec = self._specs.get(raw.queue)
        if spec is not None and raw.delivery_count > spec.delivery_limit:
            self.stats.dead_lettered["delivery_limit"] += 1  # the broker dead-letters it now

    async def _dead_letter(self, raw: RawMessage, outcome: Outcome) -> bool:
        """Publish a copy to the dead-letter exchange, with the reason; True once confirmed."""
        headers = dead_letter_headers(raw, outcome)
        headers.pop(DELIVERY_COUNT_HEADER, None)
        try:
            await self._send(self.topology.dlx, [(raw.queue, raw.body, _raw_properties(headers))], True)
        except BusError as exc:
            _log.warning("bus.dead_letter_failed", queue=raw.queue, reason=outcome.reason, error=str(exc))
            return False
        return True


class _Consumer:
    """One consumer: its own channel (prefetch), its tag, its in-flight handlers."""

    def __init__(self, bus: AmqpBus, queue: str, prefetch: int, process: _Process) -> None:
        self.bus = bus
        self.queue_name = queue
        self.prefetch = prefetch
        self.process = process
        self.inflight = InFlight()
        self.active = True
        self.channel: AbstractRobustChannel | None = None
        self.queue: AbstractRobustQueue | None = None
        self.tag: str | None = None
        self.subscription = Subscription(queue, self.cancel)
        self._reopening = asyncio.Lock()

    async def open(self) -> None:
        connection = self.bus.connection
        self.channel = channel = await _open_channel(connection, publisher_confirms=False)
        try:
            await channel.set_qos(prefetch_count=self.prefetch)
            self.queue = await self._declare(channel)
            self.tag = await self.queue.consume(self._on_message)
        except BaseException:
            await _close_for_good(connection, channel)
            raise
        self.subscription.ready.set()

    async def _declare(self, channel: AbstractRobustChannel) -> AbstractRobustQueue:
        spec = self.bus._specs.get(self.queue_name)
        if spec is not None:
            return await self.bus._declare_on(channel, spec)
        try:
            return await channel.declare_queue(self.queue_name, passive=True)
        except aiormq.exceptions.ChannelNotFoundEntity:
            raise InvalidInput("queue", self.queue_name, "a queue declared with declare_queue") from None
        except _GONE as exc:
            raise BusUnavailable(f"consume {self.queue_name!r}: {_describe(exc)}") from None

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        if self.active:
            self.inflight.spawn(self._handle(message))
        # else: left unacked; closing the channel on cancel returns it to the queue

    async def _handle(self, message: AbstractIncomingMessage) -> None:
        raw = _raw(message, self.queue_name)
        self.bus.stats.delivered[raw.queue] += 1
        if raw.redelivered:
            self.bus.stats.redelivered[raw.queue] += 1
        # Cancelled (consumer cancelled past its grace): no settlement; the channel close
        # that follows hands the message back to the broker.
        outcome = await self.process(raw)
        await self.bus._settle(message, raw, outcome)

    async def verify(self) -> None:
        """Reopen this consumer unless its tag is live on its current channel."""
        if not self.active or await self._is_live():
            return
        async with self._reopening:
            if not self.active or await self._is_live():
                return
            _log.warning("bus.consumer_missing", queue=self.queue_name, consumer_tag=self.tag)
            await self._reopen()

    async def _is_live(self) -> bool:
        if self.channel is None or self.channel.is_closed or self.tag is None:
            return False
        try:
            async with asyncio.timeout(_CLEANUP_S):
                underlay = await self.channel.get_underlay_channel()
        except _GONE:
            return False
        consumers: Mapping[str, Any] = getattr(underlay, "consumers", {})
        return not underlay.is_closed and self.tag in consumers

    async def _reopen(self) -> None:
        old, self.channel = self.channel, None
        if old is not None:
            await _close_for_good(self.bus.connection, old)
        try:
            await self.open()
        except (BusError, InvalidInput, *_GONE) as exc:
            _log.error("bus.consumer_reopen_failed", queue=self.queue_name, error=_describe(exc))
            return
        self.bus.stats.consumers_restored += 1
        _log.info("bus.consumer_restored", queue=self.queue_name, consumer_tag=self.tag)

    async def cancel(self, grace: float | None) -> None:
        """Stop intake, drain in-flight handlers, close the channel (returning what is unacked)."""
        self.active = False
        if self.queue is not None and self.tag is not None:
            await _bounded(self.queue.cancel(self.tag), "cancel consumer")
        await self.inflight.drain(self.bus._grace if grace is None else grace)
        if self.channel is not None and self.bus._connection is not None:
            await _close_for_good(self.bus._connection, self.channel)
        self.bus._consumers.discard(self)


def _raw(message: AbstractIncomingMessage, queue: str) -> RawMessage:
    headers = dict(message.headers or {})
    returned = headers.get(DELIVERY_COUNT_HEADER, 0)
    return RawMessage(
        body=message.body,
        headers=headers,
        queue=queue,
        exchange=message.exchange or "",
        routing_key=message.routing_key or "",
        redelivered=bool(message.redelivered),
        delivery_count=(returned if isinstance(returned, int) else 0) + 1,
        publisher=message.user_id or None,  # validated by the broker against the publisher's connection
    )


def url_user(url: str) -> str | None:
    """The user an ``amqp://user:password@host/vhost`` URL logs in as (``None``: none given)."""
    username = urlsplit(url).username
    return unquote(username) if username else None


async def _open_channel(connection: AbstractRobustConnection, **options: bool) -> AbstractRobustChannel:
    channel = connection.channel(**options)
    await channel
    return channel


async def _close_for_good(connection: AbstractRobustConnection, channel: AbstractRobustChannel) -> None:
    """Close a channel so that no reconnect brings it back.

    aio-pika's robust connection reopens every channel it still references on reconnect,
    closed ones included, with their queues and consumers: a cancelled consumer would come
    back as a zombie holding messages. Forget its queues and drop it from the connection.
    """
    for registry in ("_queues", "_exchanges"):
        entries = getattr(channel, registry, None)
        if isinstance(entries, dict):
            entries.clear()
    channels = getattr(connection, "_RobustConnection__channels", None)
    if channels is not None:
        channels.discard(channel)
    await _bounded(channel.close(), "close channel")


def _raw_properties(headers: Mapping[str, Any] | None) -> Any:
    return Basic.Properties(
        headers=dict(headers or {}), delivery_mode=_PERSISTENT, message_id=uuid.uuid4().hex)


def _publish_error(exchange: str, routing_key: str, exc: BaseException) -> BaseException:
    if isinstance(exc, PublishError):  # basic.return: mandatory and no queue bound
        return Unroutable(exchange, routing_key)
    if isinstance(exc, DeliveryError):  # basic.nack
        return PublishRefused(exchange, routing_key, "the broker nacked it (a queue is full?)")
    if isinstance(exc, _GONE):
        return BusUnavailable(f"publish to {exchange!r}: {_describe(exc)}")
    return exc


def _check_unique_ids(items: Sequence[tuple[str, Envelope]]) -> None:
    seen: set[str] = set()
    for i, (_, envelope) in enumerate(items):
        if envelope.id in seen:
            raise InvalidInput(f"items[{i}].id", envelope.id, "envelope ids unique within one publish_many")
        seen.add(envelope.id)


async def _call(awaitable: Awaitable[Any], what: str) -> Any:
    try:
        return await awaitable
    except _GONE as exc:
        raise BusUnavailable(f"{what}: {_describe(exc)}") from None


async def _bounded(awaitable: Awaitable[Any], what: str) -> None:
    """Run a cleanup step for at most ``_CLEANUP_S``; a failure is logged, never raised."""
    try:
        async with asyncio.timeout(_CLEANUP_S):
            await awaitable
    except _GONE as exc:
        _log.debug("bus.cleanup_failed", step=what, error=_describe(exc))


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
