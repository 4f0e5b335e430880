"""Watch actwheel's runs from any service: print every run event and every completed action.

Plain aio-pika and the standard library, no actwheel import. The service declares its
OWN durable quorum queue (actwheel declares only the queues of its own roles), binds it
to the topic exchange ``actwheel.events`` with ``run.#`` and ``action.completed``, and
for each message: decodes the envelope, prints one line per entry, then acks. Following
the contract in ``docs/asyncapi.yaml`` / ``docs/messages.md``:

- run events (type ``runs.transitioned``) and completed actions (``actions.completed``)
  are batched: one message carries many runs in ``data.runs`` / ``data.actions``;
- events are delivered at least once: dedupe by the envelope ``id`` (one entry of a
  batch is ``<envelope id>:<run id>``);
- a body that is not an actwheel envelope is rejected without requeue, so the broker
  dead-letters it to ``actwheel.dlx`` (routing key = this queue's name);
- a handler that fails leaves the message to be redelivered; past ``x-delivery-limit``
  the broker dead-letters it.

Run::

    python examples/subscriber.py [--url amqp://svc-example:svc-example@127.0.0.1:56720/] [--prefix t-1.]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue

__all__ = [
    "BATCHED",
    "DEFAULT_PATTERNS",
    "DEFAULT_QUEUE",
    "DEFAULT_URL",
    "EVENTS_EXCHANGE",
    "Event",
    "NotAnEnvelope",
    "declare_subscription",
    "entries",
    "format_lines",
    "main",
    "parse_event",
    "queue_arguments",
    "subscribe",
]

DEFAULT_URL = "amqp://svc-example:svc-example@127.0.0.1:56720/"  # ops/dev-services: the examples' own user
EVENTS_EXCHANGE = "actwheel.events"
DEAD_LETTER_EXCHANGE = "actwheel.dlx"
DEFAULT_QUEUE = "example.run-printer"
DEFAULT_PATTERNS = ("run.#", "action.completed")
SCHEMA_VERSION = 1
_ENVELOPE_FIELDS = ("id", "type", "occurred_at", "source", "data")
#: Batched envelope types and the key of their entries in ``data``.
BATCHED = {"runs.transitioned": "runs", "actions.completed": "actions"}


class NotAnEnvelope(ValueError):
    """The body is not an actwheel envelope of a schema version this subscriber reads."""


@dataclass(frozen=True)
class Event:
    """One delivered event: where it was routed and its decoded envelope."""

    routing_key: str
    envelope: dict[str, Any]
    redelivered: bool = False

    @property
    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = self.envelope["data"]
        return data


def parse_event(routing_key: str, body: bytes, headers: dict[str, Any] | None = None,
                redelivered: bool = False) -> Event:
    """Decode one message.

    :raises NotAnEnvelope: not JSON, not an object, a missing envelope field, or another schema version
    """
    version = (headers or {}).get("x-schema-version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise NotAnEnvelope(f"x-schema-version {version!r}, this subscriber reads {SCHEMA_VERSION}")
    try:
        envelope = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotAnEnvelope(f"body is not JSON: {exc}") from None
    if not isinstance(envelope, dict):
        raise NotAnEnvelope("body is not a JSON object")
    missing = [name for name in _ENVELOPE_FIELDS if name not in envelope]
    if missing or not isinstance(envelope["data"], dict):
        raise NotAnEnvelope(f"missing or ill-typed envelope fields: {missing or ['data']}")
    return Event(routing_key=routing_key, envelope=envelope, redelivered=redelivered)


def entries(event: Event) -> list[dict[str, Any]]:
    """The entries of a batched event (one per run or action), else the event's ``data`` alone."""
    key = BATCHED.get(str(event.envelope.get("type")))
    items = event.data.get(key) if key else None
    if isinstance(items, list):
        return [item for item in items if isinstance(item, dict)]
    return [event.data]


def format_lines(event: Event) -> list[str]:
    """One line per entry: time, routing key, then what matters for that kind of event."""
    head = f"{event.envelope['occurred_at']}  {event.routing_key:<18}"
    kind = event.envelope.get("type")
    if kind == "actions.completed":
        return [f"{head} {_describe_action(entry)}" for entry in entries(event)]
    if kind == "runs.transitioned":
        return [f"{head} {_describe_run(entry)}" for entry in entries(event)]
    return [f"{head} {json.dumps(event.data, sort_keys=True)}"]


def _describe_action(entry: dict[str, Any]) -> str:
    summary = (entry.get("result") or {}).get("summary")
    return f"run={entry.get('run_id')} action={entry.get('action_type')} summary={summary!r}"


def _describe_run(entry: dict[str, Any]) -> str:
    tail = "".join(f" {k}={entry[k]!r}" for k in ("reason", "summary", "error") if entry.get(k))
    return (f"run={entry.get('run_id')} status={entry.get('status')} attempt={entry.get('attempt')}"
            f" action={entry.get('action_type')} automation={entry.get('automation_id')}{tail}")


def print_event(event: Event) -> None:
    for line in format_lines(event):
        print(line, flush=True)


def queue_arguments(queue_name: str, prefix: str = "", delivery_limit: int = 5) -> dict[str, Any]:
    """A quorum queue that dead-letters poison messages to actwheel's DLX, like actwheel's own queues."""
    return {
        "x-queue-type": "quorum",
        "x-delivery-limit": delivery_limit,
        "x-dead-letter-exchange": prefix + DEAD_LETTER_EXCHANGE,
        "x-dead-letter-routing-key": queue_name,
    }


async def declare_subscription(channel: AbstractChannel, queue_name: str, patterns: Sequence[str],
                               prefix: str = "") -> AbstractQueue:
    """Declare the exchanges (idempotent, same arguments as actwheel), our queue, and its bindings."""
    topic = aio_pika.ExchangeType.TOPIC
    events = await channel.declare_exchange(prefix + EVENTS_EXCHANGE, topic, durable=True)
    await channel.declare_exchange(prefix + DEAD_LETTER_EXCHANGE, topic, durable=True)
    arguments = queue_arguments(queue_name, prefix)
    queue = await channel.declare_queue(queue_name, durable=True, arguments=arguments)
    for pattern in patterns:
        await queue.bind(events, pattern)
    return queue


class _RecentIds:
    """The ids of the last ``size`` events: redeliveries and duplicates are acked, not handled twice."""

    def __init__(self, size: int = 10_000) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._size = size

    def first_time(self, event_id: str) -> bool:
        if event_id in self._ids:
            return False
        self._ids[event_id] = None
        if len(self._ids) > self._size:
            self._ids.popitem(last=False)
        return True


def _handler(on_event: Callable[[Event], None],
             recent: _RecentIds) -> Callable[[AbstractIncomingMessage], Any]:
    async def handle(message: AbstractIncomingMessage) -> None:
        try:
            event = parse_event(message.routing_key or "", message.body, dict(message.headers or {}),
                                bool(message.redelivered))
        except NotAnEnvelope as exc:
            print(f"dead-lettering a message on {message.routing_key}: {exc}", file=sys.stderr, flush=True)
            await message.reject(requeue=False)
            return
        # process(): ack when the block ends, reject with requeue when on_event raises.
        async with message.process(requeue=True):
            if recent.first_time(str(event.envelope["id"])):
                on_event(event)

    return handle


async def subscribe(url: str, prefix: str = "", *, queue_name: str = DEFAULT_QUEUE,
                    patterns: Sequence[str] = DEFAULT_PATTERNS,
                    on_event: Callable[[Event], None] = print_event,
                    ready: asyncio.Event | None = None, stop: asyncio.Event | None = None,
                    prefetch: int = 32) -> None:
    """Consume until ``stop`` is set (forever without one). ``ready`` is set once the consumer is live."""
    stop = stop or asyncio.Event()
    connection = await aio_pika.connect_robust(url, timeout=10)
    async with connection:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=prefetch)
        queue = await declare_subscription(channel, queue_name, patterns, prefix)
        tag = await queue.consume(_handler(on_event, _RecentIds()))
        if ready is not None:
            ready.set()
        await stop.wait()
        await queue.cancel(tag)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="AMQP URL (default: the ops/dev-services broker)")
    parser.add_argument("--prefix", default="", help="exchange name prefix of the engine (default: none)")
    parser.add_argument("--queue", default=DEFAULT_QUEUE, help=f"our queue's name (default: {DEFAULT_QUEUE})")
    parser.add_argument("--pattern", action="append", dest="patterns",
                        help="binding pattern on actwheel.events, repeatable "
                             "(default: run.# and action.completed)")
    return parser


async def _until_signalled(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # not on Windows
            loop.add_signal_handler(sig, stop.set)
    ready = asyncio.Event()
    task = asyncio.create_task(subscribe(args.url, args.prefix, queue_name=args.queue,
                                         patterns=args.patterns or DEFAULT_PATTERNS, ready=ready, stop=stop))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if ready.is_set():
        print(f"listening on {args.prefix}{EVENTS_EXCHANGE} with queue {args.queue}; Ctrl-C stops",
              flush=True)
    await task


def main(argv: Sequence[str] | None = None) -> int:
    asyncio.run(_until_signalled(_parser().parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
