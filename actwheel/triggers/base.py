"""The trigger port: a pure function from an instant to the next fire.

A trigger never does IO and never reads a clock: callers pass the instant.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from actwheel.errors import InvalidTrigger

__all__ = ["Fire", "Trigger", "parse_zone", "require_aware"]


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire time, carrying the trigger zone's offset, and why it moved if it did.

    :ivar at: the instant, timezone-aware, in the trigger's zone
    :ivar note: set when a DST rule or a holiday moved this fire or skipped others
    """

    at: datetime
    note: str | None = None


class Trigger(ABC):
    """When something fires. Subclasses are frozen and built by :func:`actwheel.triggers.parse`."""

    type: ClassVar[str]

    @property
    @abstractmethod
    def zone(self) -> ZoneInfo:
        """The IANA zone the schedule is written in."""

    @abstractmethod
    def next_fire_after(self, instant: datetime) -> Fire | None:
        """The first fire strictly after ``instant``, or ``None`` once the schedule has ended.

        :raises ValueError: if ``instant`` is naive
        """

    @abstractmethod
    def describe(self) -> str:
        """A one-line human description ("at 18:30:00 on MON-FRI, Asia/Shanghai")."""

    @abstractmethod
    def to_spec(self) -> dict[str, Any]:
        """The normalised JSON spec; ``parse(t.to_spec())`` gives an equal trigger."""

    def next_after(self, instant: datetime) -> datetime | None:
        """The first fire time strictly after ``instant`` (aware, in the trigger zone), or ``None``."""
        fire = self.next_fire_after(instant)
        return None if fire is None else fire.at

    @property
    def is_event(self) -> bool:
        """True for triggers that fire on bus events rather than on the clock."""
        return False


def require_aware(instant: datetime, name: str = "instant") -> datetime:
    """Refuse a naive datetime: an instant without an offset is ambiguous."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got naive {instant.isoformat()}")
    return instant


def parse_zone(value: Any, field: str = "timezone") -> ZoneInfo:
    """An IANA zone from its name, or :class:`InvalidTrigger` naming the field."""
    if not isinstance(value, str) or not value:
        raise InvalidTrigger(field, value, "an IANA time zone name such as 'Asia/Shanghai'")
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidTrigger(field, value, "an IANA time zone name such as 'Asia/Shanghai'") from None
