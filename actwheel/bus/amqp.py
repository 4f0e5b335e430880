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
re-consumes, every ``reconnect_interval`` seconds (fixed, no growing backoff) until the broker
answers. A publish made while it reconnects waits for the publisher channel to come back, within
``publish_timeout`` (confirm included): a broker restart of a few seconds is not an error.

A dead link that never closes (a peer that vanished, a dropped NAT entry: no FIN, no RST) is
noticed two ways: the AMQP heartbeat (``heartbeat_s``, put in the URL's ``heartbeat`` query, which
is where aiormq reads it; aiormq gives up after about three missed intervals) and a confirm that
does not come within ``publish_timeout``, after which one round trip on the admin channel decides:
unanswered within ``_PROBE_S``, the connection is closed so that aio-pika reconnects at once.

aio-pika has had bugs in its restore (consumers silently missing after a broker
restart, a broker-side ``basic.cancel`` never recovered), so after every reconnect
— and every ``consumer_check_interval`` seconds — each consumer checks that its
consumer tag is live on its current channel and otherwise reopens itself.

An ack for a message delivered on a channel that has since died is never sent on the
new channel (aio-pika raises ``ChannelInvalidStateError``); it is dropped and counted
(``stats.stale_settlements``) and the broker redelivers the message.

While a connection goes down, aio-pika's cancel, close and ack await futures that the closing
connection cancels: their CancelledError is not a cancellation of the caller's task. Cleanup steps
log it as a failed cleanup, calls raise :class:`BusUnavailable`; only a cancel request of the
caller's own task (``Task.cancelling()``) propagates as CancelledError.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

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
from actwheel.bus.wire import headers_per_item, message_headers
from actwheel.cancellation import cancel_requested
from actwheel.clock import Clock, SystemClock
from actwheel.errors import BusError, BusUnavailable, InvalidInput, InvalidMessage, PublishRefused, Unroutable
from actwheel.logs import get_logger
from actwheel.redact import redact_url

__all__ = ["DEFAULT_HEARTBEAT_S", "AmqpBus", "queue_arguments", "url_user", "with_heartbeat"]

_log = get_logger("actwheel.bus.amqp")
#: The AMQP heartbeat, seconds (aiormq's own default is 60: a silent link noticed after ~3 min).
DEFAULT_HEARTBEAT_S = 10.0
_Process = Callable[[RawMessage], Awaitable[Outcome]]
#: Upper bound for every cleanup step (cancel, close): cleanup never hangs on a dead broker.
_CLEANUP_S = 5.0
#: Errors that mean the channel or connection is gone, not that the request was wrong.
_GONE = (*CONNECTION_EXCEPTIONS, asyncio.TimeoutError)
#: A frame's outcome that says its link dropped before the confirm (its confirm future is cancelled as the
#: connection closes): it is written again on the restored channel (:meth:`AmqpBus._write_until_confirmed`).
#: Not a nack, a return or a channel error (refused access, no such exchange): those are answers, never re-sent.
_LINK_LOST = (ConnectionError, aiormq.exceptions.ChannelInvalidStateError, asyncio.CancelledError)
#: Seconds between two writes of frames whose link dropped, while aio-pika notices and reconnects.
_RESEND_PAUSE_S = 0.2
#: Messages written before their confirms are awaited, per round trip of publish_many.
_PIPELINE = 1000
_PERSISTENT = int(DeliveryMode.PERSISTENT)
#: Seconds a liveness round trip may take after a missing confirm before the connection is torn down.
_PROBE_S = 5.0


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
    :param heartbeat_s: the AMQP heartbeat (whole seconds, 0 = off) unless the URL has a ``heartbeat`` query;
        a silent link is dropped after about three of them (aiormq), the broker drops ours after two
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
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        dead_letter_max_length: int = 100_000,
        connection_name: str = "actwheel",
        user_id: str | None = None,
    ) -> None:
        self.topology = topology
        self.stats = BusStats()
        self.state = BusState.NEW
        self._url = url
        self._connect_url = with_heartbeat(url, heartbeat_s)
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
        self._probing = False

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
                self._connect_url,
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
            async with asyncio.timeout(self._publish_timeout):
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
        headers: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> None:
        self._require_open()
        check_exchange(self.topology, exchange)
        _check_unique_ids(items)
        frames = [(check_routing_key("routing_key", key), *self._frame(env, item_headers))
                  for (key, env), item_headers in zip(items, headers_per_item(items, headers), strict=True)]
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
        try:
            async with asyncio.timeout(self._publish_timeout):
                results = await self._write_until_confirmed(exchange, frames, mandatory)
        except TimeoutError:
            self._suspect_connection()
            raise BusUnavailable(f"no confirm from the broker within {self._publish_timeout}s") from None
        for (key, _, _), result in zip(frames, results, strict=True):
            if isinstance(result, BaseException):
                raise _publish_error(exchange, key, result)
        self.stats.published += len(frames)

    async def _write_until_confirmed(self, exchange: str, frames: Sequence[tuple[str, bytes, Any]],
                                     mandatory: bool) -> list[Any]:
        """Each frame's outcome: its confirm, or the exception it ended with. A frame whose link dropped
        before its confirm — a broker restarting under a publish that had not noticed it yet — is written
        again once aio-pika has restored the channel: delivery is at least once (docs/messages.md), and the
        caller's timeout bounds the wait."""
        outcomes: list[Any] = [None] * len(frames)
        todo = list(range(len(frames)))
        while True:
            channel = await self._writable_channel()
            sent = await asyncio.gather(
                *(channel.basic_publish(frames[i][1], exchange=exchange, routing_key=frames[i][0],
                                        properties=frames[i][2], mandatory=mandatory, wait=False) for i in todo),
                return_exceptions=True,
            )
            for i, outcome in zip(todo, sent, strict=True):
                outcomes[i] = outcome
            todo = [i for i, outcome in zip(todo, sent, strict=True) if isinstance(outcome, _LINK_LOST)]
            if not todo:
                return outcomes
            await asyncio.sleep(_RESEND_PAUSE_S)  # let aio-pika see the dead link before the next look

    async def _writable_channel(self) -> Any:
        """The publisher's aiormq channel; while aio-pika reconnects, once it has restored it (the caller
        bounds the wait)."""
        publisher, connection = self._publisher, self._connection
        if publisher is None or connection is None or connection.is_closed:
            raise BusUnavailable("the AMQP bus has no open publisher channel (stopped?)")
        try:
            if publisher.is_closed:
                await _reopened(publisher)
            return await publisher.get_underlay_channel()
        except CONNECTION_EXCEPTIONS as exc:
            raise BusUnavailable(f"publisher channel: {_describe(exc)}") from None

    def _suspect_connection(self) -> None:
        """A confirm did not come: check the link once (in the background) unless a check is under way."""
        if not self._probing and self.state is BusState.RUNNING:
            self._probing = True
            self._tasks.spawn(self._probe_connection())

    async def _probe_connection(self) -> None:
        """One round trip on the admin channel; unanswered within ``_PROBE_S``, close the connection so
        that aio-pika reconnects now instead of after the heartbeat's three missed intervals."""
        try:
            connection = self._connection
            transport = None if connection is None else connection.transport
            if transport is None or _is_blocked(transport.connection):
                return  # reconnecting already, or flow control (a memory alarm): no confirm, yet alive
            try:
                async with asyncio.timeout(_PROBE_S):
                    admin = await self._require_channels()[0].get_underlay_channel()
                    await admin.exchange_declare(self.topology.events, exchange_type="topic", durable=True,
                                                 passive=True)
                return
            except _GONE as exc:
                _log.warning("bus.connection_dead", broker=redact_url(self._url), error=_describe(exc),
                             probe_s=_PROBE_S)
            self.stats.dead_links += 1
            await transport.connection.close()  # what aio-pika's own reconnect() does; its factory reconnects
        finally:
            self._probing = False

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
            connection = self._connection
            if connection is not None and connection.connected.is_set():
                await self._verify_consumers()
            # else: reconnecting; _on_reconnect checks them once the connection is back

    # -- settling ----------------------------------------------------------------------------

    async def _settle(self, message: AbstractIncomingMessage, raw: RawMessage, outcome: Outcome) -> None:
        try:
            await self._apply(message, raw, outcome)
        except (*_GONE, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and cancel_requested():
                raise
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


def with_heartbeat(url: str, heartbeat_s: float) -> str:
    """``url`` with ``heartbeat=<whole seconds>`` in its query unless it has one (the URL's own wins).

    aiormq reads the heartbeat from the URL only (a ``connect_robust`` keyword is ignored when a URL
    is given) and parses it as an integer: ``heartbeat=10.0`` would silently mean *off*.
    """
    if not math.isfinite(heartbeat_s) or heartbeat_s < 0 or heartbeat_s >= 65535:
        raise InvalidInput("heartbeat_s", heartbeat_s, "whole seconds from 0 (off) to 65534")
    parts = urlsplit(url)
    if any(key == "heartbeat" for key, _ in parse_qsl(parts.query, keep_blank_values=True)):
        return url
    query = f"{parts.query}&heartbeat={round(heartbeat_s)}" if parts.query else f"heartbeat={round(heartbeat_s)}"
    return urlunsplit(parts._replace(query=query))


async def _reopened(channel: AbstractRobustChannel) -> None:
    """Until aio-pika has reopened ``channel`` after a reconnect (the caller bounds the wait).

    Not ``RobustChannel.ready()``: it can return while the dead aiormq channel is still in place, and a
    publish on that one never gets its confirm. ``reopen_callbacks`` run once the new one is open.
    """
    reopened = asyncio.Event()

    def on_reopen(*_: Any) -> None:
        reopened.set()

    channel.reopen_callbacks.add(on_reopen)
    try:
        while channel.is_closed:
            await reopened.wait()
            reopened.clear()
    finally:
        with contextlib.suppress(RuntimeError):  # a collection aio-pika froze while closing
            channel.reopen_callbacks.discard(on_reopen)


def _is_blocked(connection: Any) -> bool:
    """True while the broker has blocked the connection (``connection.blocked``: a resource alarm)."""
    unblocked = getattr(connection, "_Connection__connection_unblocked", None)
    return isinstance(unblocked, asyncio.Event) and not unblocked.is_set()


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
    if isinstance(exc, asyncio.CancelledError):  # its confirm future, cancelled as the connection closed
        return BusUnavailable(f"publish to {exchange!r}: the connection closed before the confirm")
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
    except asyncio.CancelledError:
        if cancel_requested():
            raise
        raise BusUnavailable(f"{what}: the connection closed under it") from None


async def _bounded(awaitable: Awaitable[Any], what: str) -> None:
    """Run a cleanup step for at most ``_CLEANUP_S``; a failure is logged, never raised.

    A failure includes a CancelledError that is not a cancellation of this task: aio-pika's cancel or
    close on a connection that is going down awaits futures the closing connection cancels. Raised,
    it would replace the error the cleanup runs for (a ``finally`` of a crashing actor) with what
    looks like a request to stop, and the actor would not be restarted.
    """
    try:
        async with asyncio.timeout(_CLEANUP_S):
            await awaitable
    except _GONE as exc:
        _log.debug("bus.cleanup_failed", step=what, error=_describe(exc))
    except asyncio.CancelledError:
        if cancel_requested():
            raise
        _log.debug("bus.cleanup_failed", step=what, error="cancelled by the closing connection")


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
