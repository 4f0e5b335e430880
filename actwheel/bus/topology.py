"""The bus topology: exchange names, the dead-letter pair, and how a consuming queue is declared.

Three durable topic exchanges carry all traffic:

- ``actwheel.events``   — what happened (``run.succeeded``, ``automation.created``, ...)
- ``actwheel.commands`` — what someone asks for (``command.automation.create``, ``action.request``)
- ``actwheel.cdc``      — change data capture of the records (``cdc.run.updated``, ...)

Every consuming queue dead-letters into the topic exchange ``actwheel.dlx`` with its
own name as routing key; the queue ``actwheel.dead-letters`` is bound to it with ``#``.

A :class:`Topology` holds these names; :meth:`Topology.prefixed` makes an isolated copy
(tests, several engines on one vhost). :data:`DEFAULT_TOPOLOGY` is what production uses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from actwheel.errors import InvalidInput

__all__ = [
    "CDC",
    "COMMANDS",
    "DEAD_LETTERS",
    "DEFAULT_TOPOLOGY",
    "DLX",
    "EVENTS",
    "QueueSpec",
    "Topology",
]

EVENTS = "actwheel.events"
COMMANDS = "actwheel.commands"
CDC = "actwheel.cdc"
DLX = "actwheel.dlx"
DEAD_LETTERS = "actwheel.dead-letters"

_NAME = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")
_MAX_ROUTING_KEY = 255


def check_name(field_name: str, value: object) -> str:
    """``value`` if it is a usable exchange or queue name, else :class:`InvalidInput`."""
    if not isinstance(value, str) or not _NAME.match(value) or value.startswith("amq."):
        raise InvalidInput(field_name, value, "1-200 characters of [A-Za-z0-9_.:-], not starting with 'amq.'")
    return value


def check_routing_key(field_name: str, value: object) -> str:
    """``value`` if it is a routing key or binding pattern AMQP accepts, else :class:`InvalidInput`."""
    if not isinstance(value, str) or len(value.encode()) > _MAX_ROUTING_KEY:
        raise InvalidInput(field_name, value, f"a string of at most {_MAX_ROUTING_KEY} bytes")
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class Topology:
    """The names of the shared exchanges and of the dead-letter pair."""

    events: str = EVENTS
    commands: str = COMMANDS
    cdc: str = CDC
    dlx: str = DLX
    dead_letters: str = DEAD_LETTERS

    @classmethod
    def prefixed(cls, prefix: str) -> Topology:
        """The same topology with every name prefixed (``"t-1a2b."`` → ``t-1a2b.actwheel.events``)."""
        check_name("prefix", prefix + "x")
        return cls(
            events=prefix + EVENTS,
            commands=prefix + COMMANDS,
            cdc=prefix + CDC,
            dlx=prefix + DLX,
            dead_letters=prefix + DEAD_LETTERS,
        )

    @property
    def exchanges(self) -> tuple[str, str, str]:
        """The exchanges a publisher may name: events, commands, CDC."""
        return (self.events, self.commands, self.cdc)


DEFAULT_TOPOLOGY = Topology()


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A durable consuming queue and its bindings.

    :ivar name: the queue name, one per consuming role (``actwheel.planner``)
    :ivar bindings: ``(exchange, pattern)`` pairs; patterns use ``*`` (one word) and ``#`` (zero or more)
    :ivar delivery_limit: failed deliveries tolerated; a message is delivered at most
        ``delivery_limit + 1`` times, then dead-lettered with reason ``delivery_limit``
        (RabbitMQ's ``x-delivery-limit`` semantics)
    :ivar max_length: ready messages the queue holds; a publish beyond it is refused
        (:class:`~actwheel.bus.base.PublishRefused`), never silently dropped. ``None``: unbounded
    :ivar overflow: ``reject-publish`` (default) or ``drop-head`` for queues whose old messages are
        worthless once newer ones exist (a ticker's per-instance change feed): the oldest is dropped
    :ivar expires_s: delete the queue after it has had no consumer this long (per-instance queues
        of instances that died); ``None``: never
    """

    name: str
    bindings: tuple[tuple[str, str], ...] = ()
    delivery_limit: int = 5
    max_length: int | None = 100_000
    overflow: str = "reject-publish"
    expires_s: float | None = None

    def __post_init__(self) -> None:
        check_name("queue.name", self.name)
        object.__setattr__(self, "bindings", _check_bindings(self.bindings))
        if not isinstance(self.delivery_limit, int) or not 0 <= self.delivery_limit <= 1000:
            raise InvalidInput("queue.delivery_limit", self.delivery_limit, "an integer from 0 to 1000")
        if self.max_length is not None and (not isinstance(self.max_length, int) or self.max_length < 1):
            raise InvalidInput("queue.max_length", self.max_length, "a positive integer or None")
        if self.overflow not in ("reject-publish", "drop-head"):
            raise InvalidInput("queue.overflow", self.overflow, "'reject-publish' or 'drop-head'")
        if self.expires_s is not None and not self.expires_s > 0:
            raise InvalidInput("queue.expires_s", self.expires_s, "None or seconds > 0")


def _check_bindings(bindings: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    checked: list[tuple[str, str]] = []
    for i, pair in enumerate(bindings):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise InvalidInput(f"queue.bindings[{i}]", pair, "an (exchange, pattern) pair")
        exchange = check_name(f"queue.bindings[{i}].exchange", pair[0])
        pattern = check_routing_key(f"queue.bindings[{i}].pattern", pair[1])
        checked.append((exchange, pattern))
    return tuple(checked)
