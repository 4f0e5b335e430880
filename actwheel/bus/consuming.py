"""What a consumer does with a delivery, the same for every adapter.

An adapter turns the broker's message into bytes + headers, asks :func:`decide`
for an :class:`Outcome` (decode, run the handler, map its exception), then
settles: ack, requeue, or dead-letter with :func:`dead_letter_headers`.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actwheel.bus.base import (
    BROKER_EXCHANGE_HEADER,
    BROKER_QUEUE_HEADER,
    BROKER_REASON_HEADER,
    DETAIL_HEADER,
    ORIGIN_EXCHANGE_HEADER,
    ORIGIN_PUBLISHER_HEADER,
    ORIGIN_QUEUE_HEADER,
    ORIGIN_ROUTING_KEY_HEADER,
    REASON_HEADER,
    DeadLetter,
    DeadLetterHandler,
    Delivery,
    Handler,
    Reject,
    Retry,
    invalid_reason,
)
from actwheel.bus.envelope import SCHEMA_VERSION, SCHEMA_VERSION_HEADER, Envelope, decode
from actwheel.clock import Clock
from actwheel.errors import InvalidMessage
from actwheel.logs import get_logger

__all__ = ["Action", "Outcome", "RawMessage", "dead_letter_headers", "decide", "decide_dead_letter"]

_log = get_logger("actwheel.bus")
_MAX_DETAIL = 500


class Action(enum.Enum):
    ACK = "ack"
    REQUEUE = "requeue"
    DEAD_LETTER = "dead_letter"


@dataclass(frozen=True, slots=True)
class Outcome:
    action: Action
    reason: str = ""
    detail: str = ""


ACK = Outcome(Action.ACK)
REQUEUE = Outcome(Action.REQUEUE)


@dataclass(frozen=True, kw_only=True, slots=True)
class RawMessage:
    """A broker message reduced to what the contract needs."""

    body: bytes
    headers: Mapping[str, Any]
    queue: str
    exchange: str
    routing_key: str
    redelivered: bool
    delivery_count: int
    publisher: str | None = None
    trusted: bool = False


async def decide(raw: RawMessage, handler: Handler, *, max_bytes: int, clock: Clock) -> Outcome:
    """Decode ``raw`` and run ``handler``; the outcome says how to settle the delivery."""
    try:
        envelope = _decode(raw, max_bytes)
    except InvalidMessage as exc:
        return _undecodable(raw, exc)
    return await _run(handler, _delivery(raw, envelope), clock)


async def decide_dead_letter(raw: RawMessage, handler: DeadLetterHandler, *, clock: Clock) -> Outcome:
    """Run a dead-letter ``handler``; ``Reject`` removes the dead letter, other errors requeue it."""
    try:
        await handler(to_dead_letter(raw))
    except Reject as exc:
        _log.warning("bus.dead_letter_dropped", queue=raw.queue, reason=exc.reason, detail=exc.detail)
        return ACK
    except Retry as exc:
        await _hold(exc.delay, clock)
        return REQUEUE
    except Exception:
        _log.exception("bus.dead_letter_handler_failed", queue=raw.queue)
        return REQUEUE
    return ACK


def _decode(raw: RawMessage, max_bytes: int) -> Envelope:
    version = raw.headers.get(SCHEMA_VERSION_HEADER, SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise InvalidMessage(f"headers.{SCHEMA_VERSION_HEADER}", version, f"{SCHEMA_VERSION}")
    return decode(raw.body, max_bytes=max_bytes)


def _undecodable(raw: RawMessage, exc: InvalidMessage) -> Outcome:
    _log.warning("bus.undecodable", queue=raw.queue, routing_key=raw.routing_key, error=str(exc))
    return Outcome(Action.DEAD_LETTER, _undecodable_reason(exc), _detail(exc))


def _undecodable_reason(exc: InvalidMessage) -> str:
    if exc.field.startswith("headers."):
        return "unsupported_schema"
    if exc.field == "body.size":
        return "oversized"
    return "malformed"


def _delivery(raw: RawMessage, envelope: Envelope) -> Delivery:
    return Delivery(
        envelope=envelope,
        queue=raw.queue,
        exchange=raw.exchange,
        routing_key=raw.routing_key,
        redelivered=raw.redelivered,
        delivery_count=raw.delivery_count,
        headers=raw.headers,
        publisher=raw.publisher,
        trusted=raw.trusted,
    )


async def _run(handler: Handler, delivery: Delivery, clock: Clock) -> Outcome:
    try:
        await handler(delivery)
    except Retry as exc:
        await _hold(exc.delay, clock)
        return REQUEUE
    except Reject as exc:
        return Outcome(Action.DEAD_LETTER, exc.reason, _detail(exc))
    except InvalidMessage as exc:
        return Outcome(Action.DEAD_LETTER, invalid_reason(exc), _detail(exc))
    except Exception:
        _log.exception("bus.handler_failed", queue=delivery.queue, message_id=delivery.envelope.id,
                       type=delivery.envelope.type, delivery_count=delivery.delivery_count)
        return Outcome(Action.REQUEUE, "handler_error")
    return ACK


async def _hold(delay: float | None, clock: Clock) -> None:
    if delay:
        await clock.sleep(delay)
    else:
        await asyncio.sleep(0)


def _detail(exc: BaseException) -> str:
    return str(exc)[:_MAX_DETAIL]


def dead_letter_headers(raw: RawMessage, outcome: Outcome) -> dict[str, Any]:
    """The original headers plus where the message came from and why it is dead."""
    headers = dict(raw.headers)
    headers.update({
        REASON_HEADER: outcome.reason,
        DETAIL_HEADER: outcome.detail,
        ORIGIN_QUEUE_HEADER: raw.queue,
        ORIGIN_EXCHANGE_HEADER: raw.exchange,
        ORIGIN_ROUTING_KEY_HEADER: raw.routing_key,
    })
    if raw.publisher:
        headers[ORIGIN_PUBLISHER_HEADER] = raw.publisher
    return headers


def to_dead_letter(raw: RawMessage) -> DeadLetter:
    """Read a message from the dead-letter queue, whoever dead-lettered it (actwheel or the broker)."""
    headers = raw.headers
    ours = REASON_HEADER in headers
    envelope: Envelope | None
    try:
        envelope = decode(raw.body, max_bytes=max(len(raw.body), 1))
    except InvalidMessage:
        envelope = None
    return DeadLetter(
        reason=str(headers.get(REASON_HEADER if ours else BROKER_REASON_HEADER, "unknown")),
        detail=str(headers.get(DETAIL_HEADER, "")),
        queue=str(headers.get(ORIGIN_QUEUE_HEADER if ours else BROKER_QUEUE_HEADER, raw.routing_key)),
        exchange=str(headers.get(ORIGIN_EXCHANGE_HEADER if ours else BROKER_EXCHANGE_HEADER, "")),
        routing_key=_original_routing_key(headers, ours),
        body=raw.body,
        headers=headers,
        envelope=envelope,
    )


def _original_routing_key(headers: Mapping[str, Any], ours: bool) -> str:
    if ours:
        return str(headers.get(ORIGIN_ROUTING_KEY_HEADER, ""))
    deaths = headers.get("x-death") or [{}]
    keys = deaths[0].get("routing-keys") or [""]
    return str(keys[0])
