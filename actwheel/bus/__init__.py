"""The bus: one port (:class:`Bus`), two adapters (:class:`MemoryBus`, :class:`AmqpBus`).

``open_bus(None)`` or ``open_bus("memory://")`` gives the in-process bus of the embedded
default; ``open_bus("amqp://user:pass@host:5672/vhost")`` the RabbitMQ one. See
``docs/bus.md`` for the topology and the delivery contract.
"""

from __future__ import annotations

from typing import Any

from actwheel.bus.amqp import AmqpBus
from actwheel.bus.base import (
    Bus,
    BusState,
    BusStats,
    DeadLetter,
    DeadLetterHandler,
    Delivery,
    Handler,
    Reject,
    Retry,
    Subscription,
)
from actwheel.bus.envelope import Envelope, decode, encode
from actwheel.bus.memory import MemoryBus
from actwheel.bus.topology import (
    CDC,
    COMMANDS,
    DEAD_LETTERS,
    DEFAULT_TOPOLOGY,
    DLX,
    EVENTS,
    QueueSpec,
    Topology,
)
from actwheel.errors import BusUnavailable, InvalidInput, InvalidMessage, PublishRefused, Unroutable
from actwheel.redact import redact_url

__all__ = [
    "CDC",
    "COMMANDS",
    "DEAD_LETTERS",
    "DEFAULT_TOPOLOGY",
    "DLX",
    "EVENTS",
    "AmqpBus",
    "Bus",
    "BusState",
    "BusStats",
    "BusUnavailable",
    "DeadLetter",
    "DeadLetterHandler",
    "Delivery",
    "Envelope",
    "Handler",
    "InvalidMessage",
    "MemoryBus",
    "PublishRefused",
    "QueueSpec",
    "Reject",
    "Retry",
    "Subscription",
    "Topology",
    "Unroutable",
    "decode",
    "encode",
    "open_bus",
]


def open_bus(url: str | None, *, heartbeat_s: float | None = None, **options: Any) -> Bus:
    """A bus for ``url``: ``None`` or ``memory://`` → :class:`MemoryBus`, ``amqp://``/``amqps://`` →
    :class:`AmqpBus`. ``options`` go to the adapter (``topology``, ``clock``, ``grace``, ...);
    ``heartbeat_s`` to :class:`AmqpBus` only (the memory bus has no link to watch).
    The bus is not started.

    :raises InvalidInput: ``field="broker"`` for any other scheme
    """
    if url is None or url in ("memory://", "memory:"):
        return MemoryBus(**options)
    if url.startswith(("amqp://", "amqps://")):
        if heartbeat_s is not None:
            options["heartbeat_s"] = heartbeat_s
        return AmqpBus(url, **options)
    raise InvalidInput("broker", redact_url(url), "memory:// or amqp://user:password@host:port/vhost")
