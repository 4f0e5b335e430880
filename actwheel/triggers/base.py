"""The trigger port: a pure function from an instant to the next fire.

A trigger never does IO and never reads a clock: callers pass the instant. The
spec helpers every trigger kind shares (:func:`check_fields`, :func:`parse_datetime`,
:func:`parse_zone`) live here too.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from actwheel.errors import InvalidTrigger

__all__ = [
    "EXPECTED_DATETIME",
    "Fire",
    "ParsedDateTime",
    "Trigger",
    "check_fields",
    "parse_datetime",
    "parse_zone",
    "require_aware",
]

_ISO = re.compile(
    r"(?P<wall>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?P<frac>\.\d{1,9})?)?)"
    r"(?P<offset>Z|[+-]\d{2}:\d{2}(?::\d{2})?)?"
    r"(?:\[(?P<zone>[^\[\]]+)\])?"
)
#: What an ISO date-time field accepts, for messages that name it.
EXPECTED_DATETIME = ("an ISO-8601 date-time with an offset ('2027-01-01T09:00:00+08:00') "
                     "or Java's form with a zone ('2027-01-01T09:00+08:00[Asia/Shanghai]')")


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

    #: The instant after which the schedule never fires (aware), or ``None`` when it has no end:
    #: the spec's ``end`` (cron) or ``end_date_time`` (repeat) as parsed, ``None`` for kinds
    #: without such a bound (once, event), so callers never read the spec by key name.
    #: Declared, not defined: every subclass is a dataclass with an ``end`` field (a default
    #: here would become the default of those fields).
    end: datetime | None

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


def check_fields(spec: Mapping[str, Any], allowed: Collection[str], what: str) -> None:
    """Refuse fields that ``what`` does not use, so that a typo is never silently ignored.

    :raises InvalidTrigger: naming the first unknown field
    """
    unknown = sorted((key for key in spec if key not in allowed), key=str)
    if unknown:
        field = unknown[0]
        expected = f"no such field for {what}; fields: " + ", ".join(allowed)
        raise InvalidTrigger(str(field), spec[field], expected)


@dataclass(frozen=True, slots=True)
class ParsedDateTime:
    """An ISO date-time as written: naive or aware, and the zone named in brackets if any."""

    value: datetime
    zone: ZoneInfo | None


def parse_datetime(value: Any, field: str, expected: str = EXPECTED_DATETIME) -> ParsedDateTime:
    """An ISO-8601 date-time, optionally with Java's ``[Zone/Name]`` suffix.

    A bracketed zone makes the result aware: its offset, when written, must be
    the zone's offset at that instant; without an offset the wall time must
    exist exactly once in the zone. Without offset and zone the result is naive.

    :raises InvalidTrigger: naming ``field``
    """
    match = _ISO.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidTrigger(field, value, expected)
    wall = _wall(match, value, field, expected)
    offset = match.group("offset")
    aware = wall if offset is None else _with_offset(wall, offset, value, field, expected)
    zone_name = match.group("zone")
    if zone_name is None:
        return ParsedDateTime(aware, None)
    zone = parse_zone(zone_name, f"{field} (zone in brackets)")
    return ParsedDateTime(_in_zone(aware, zone, value, field), zone)


def _wall(match: re.Match[str], value: str, field: str, expected: str) -> datetime:
    text = match.group("wall")
    frac = match.group("frac")
    if frac is not None and len(frac) > 7:  # Java prints nanoseconds; Python keeps microseconds.
        text = text.replace(frac, frac[:7])
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InvalidTrigger(field, value, expected) from None


def _with_offset(wall: datetime, offset: str, value: str, field: str, expected: str) -> datetime:
    try:
        return datetime.fromisoformat(wall.isoformat() + ("+00:00" if offset == "Z" else offset))
    except ValueError:
        raise InvalidTrigger(field, value, expected) from None


def _in_zone(parsed: datetime, zone: ZoneInfo, value: str, field: str) -> datetime:
    if parsed.tzinfo is not None:
        actual = parsed.astimezone(zone)
        if actual.utcoffset() != parsed.utcoffset():
            raise InvalidTrigger(field, value, f"an offset valid in {zone.key} at that time "
                                 f"({_offset_text(actual.utcoffset() or timedelta(0))}), or no offset")
        return actual
    first = parsed.replace(tzinfo=zone, fold=0)
    second = parsed.replace(tzinfo=zone, fold=1)
    if first.utcoffset() != second.utcoffset():
        raise InvalidTrigger(field, value, f"a wall time that exists exactly once in {zone.key} "
                             "(this one falls in a DST gap or fold): add the offset")
    return first


def _offset_text(offset: timedelta) -> str:
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
