"""The ``event`` trigger: fires when a bus message's routing key matches a topic pattern.

Spec::

    {"type": "event", "routing_key": "orders.*.created"}
    {"type": "event", "routing_key": "orders.#", "timezone": "Europe/Berlin"}

The pattern follows AMQP topic-exchange semantics: words separated by ``.``;
``*`` matches exactly one word, ``#`` matches zero or more words. A literal
word is made of ``A-Z a-z 0-9 _ -``; empty words (``a..b``, a leading or
trailing dot) and mixed words (``order*``) are refused. At most 255 bytes,
AMQP's limit for a routing key. Patterns in actwheel's own namespaces
(:data:`actwheel.topics.RESERVED_NAMESPACES`) or starting with a wildcard are refused:
an automation must not fire on the events actwheel itself publishes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from actwheel.errors import InvalidTrigger
from actwheel.topics import RESERVED_NAMESPACES, is_reserved_pattern, topic_matches
from actwheel.triggers.base import Fire, Trigger, check_fields, parse_zone, require_aware

__all__ = ["EventTrigger", "refuse_reserved_pattern", "topic_matches", "validate_topic_pattern"]

_FIELDS = ("type", "routing_key", "timezone")
_WORD = re.compile(r"[A-Za-z0-9_-]+|\*|#")
_MAX_BYTES = 255
_UTC = ZoneInfo("UTC")
_EXPECTED = ("an AMQP topic pattern: words of A-Z a-z 0-9 _ - separated by '.', "
             "'*' for exactly one word, '#' for zero or more (e.g. 'orders.*.created'), at most 255 bytes")
_EXPECTED_OWN = ("a pattern outside actwheel's own namespaces " + ", ".join(RESERVED_NAMESPACES)
                 + " that does not start with a wildcard")


def validate_topic_pattern(pattern: Any, field: str = "routing_key") -> str:
    """``pattern`` if it is a valid topic pattern.

    :raises InvalidTrigger: naming ``field``, the value and the word that is wrong
    """
    if not isinstance(pattern, str) or not pattern or len(pattern.encode()) > _MAX_BYTES:
        raise InvalidTrigger(field, pattern, _EXPECTED)
    for index, word in enumerate(pattern.split(".")):
        if not _WORD.fullmatch(word):
            raise InvalidTrigger(field, pattern, f"{_EXPECTED}; word {index + 1} ({word!r}) is not valid")
    return pattern


def refuse_reserved_pattern(pattern: str, field: str = "routing_key") -> str:
    """``pattern`` if it cannot match what actwheel publishes itself (its runs, actions, commands, CDC).

    :raises InvalidTrigger: naming ``field``, for a reserved prefix or a leading wildcard
    """
    if is_reserved_pattern(pattern):
        raise InvalidTrigger(field, pattern, _EXPECTED_OWN)
    return pattern


@dataclass(frozen=True, slots=True)
class EventTrigger(Trigger):
    """Fires on bus events whose routing key matches ``routing_key``; never on the clock.

    :ivar routing_key: the topic pattern
    :ivar tz: the zone the automation is written in (default UTC)
    """

    routing_key: str
    tz: ZoneInfo = _UTC
    end: datetime | None = field(default=None, init=False, repr=False, compare=False)  # no end bound

    type = "event"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Trigger:
        """An event trigger from ``{"type": "event", "routing_key": ..., "timezone": ...}``.

        :raises InvalidTrigger: naming the field, the value and what would be valid
        """
        check_fields(spec, _FIELDS, "an 'event' trigger")
        pattern = refuse_reserved_pattern(validate_topic_pattern(spec.get("routing_key")))
        zone = parse_zone(spec["timezone"]) if "timezone" in spec else _UTC
        return cls(pattern, zone)

    @property
    def zone(self) -> ZoneInfo:
        return self.tz

    @property
    def is_event(self) -> bool:
        return True

    def next_fire_after(self, instant: datetime) -> Fire | None:
        """Always ``None``: an event trigger fires when a matching message arrives, not at a time."""
        require_aware(instant)
        return None

    def matches(self, routing_key: str) -> bool:
        """True when a message with ``routing_key`` should fire this trigger."""
        return topic_matches(self.routing_key, routing_key)

    def describe(self) -> str:
        return f"on each event whose routing key matches {self.routing_key!r}"

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": self.type, "routing_key": self.routing_key}
        if self.tz.key != "UTC":
            spec["timezone"] = self.tz.key
        return spec
