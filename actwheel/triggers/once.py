"""The ``once`` trigger: one instant, then the schedule has ended.

Spec::

    {"type": "once", "at": "2027-01-01T09:00:00+08:00"}
    {"type": "once", "at": "2027-01-01T09:00+08:00[Asia/Shanghai]"}     # Java's ZonedDateTime form
    {"type": "once", "at": "2027-01-01T01:00:00Z", "timezone": "Asia/Shanghai"}

A time without an offset or a zone is refused. The helpers here
(:func:`check_fields`, :func:`parse_datetime`) are shared with ``repeat``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from actwheel.errors import InvalidTrigger
from actwheel.triggers.base import Fire, Trigger, parse_zone, require_aware

__all__ = ["OnceTrigger", "check_fields", "parse_datetime", "zone_of_offset"]

_FIELDS = ("type", "at", "timezone")
_ISO = re.compile(
    r"(?P<wall>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?P<frac>\.\d{1,9})?)?)"
    r"(?P<offset>Z|[+-]\d{2}:\d{2}(?::\d{2})?)?"
    r"(?:\[(?P<zone>[^\[\]]+)\])?"
)
_EXPECTED_AT = ("an ISO-8601 date-time with an offset ('2027-01-01T09:00:00+08:00') "
                "or Java's form with a zone ('2027-01-01T09:00+08:00[Asia/Shanghai]')")


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


def parse_datetime(value: Any, field: str, expected: str = _EXPECTED_AT) -> ParsedDateTime:
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


def zone_of_offset(instant: datetime) -> ZoneInfo:
    """The IANA ``Etc/GMT±N`` zone of a whole-hour offset, else UTC (the instant keeps its own offset)."""
    offset = instant.utcoffset() or timedelta(0)
    hours, rest = divmod(int(offset.total_seconds()), 3600)
    if rest or hours == 0 or abs(hours) > 14:
        return ZoneInfo("UTC")
    return ZoneInfo(f"Etc/GMT{-hours:+d}")  # POSIX signs: Etc/GMT-8 is UTC+08:00


@dataclass(frozen=True, slots=True)
class OnceTrigger(Trigger):
    """Fires once, at ``at``.

    :ivar at: the instant, with the offset it was written with
    :ivar display: the zone fires are shown in (``timezone``, else the zone in brackets)
    """

    at: datetime
    display: ZoneInfo | None = None

    type = "once"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Trigger:
        """A once trigger from ``{"type": "once", "at": ..., "timezone": ...}``.

        :raises InvalidTrigger: naming the field, the value and what would be valid
        """
        check_fields(spec, _FIELDS, "a 'once' trigger")
        if "at" not in spec:
            raise InvalidTrigger("at", None, _EXPECTED_AT)
        parsed = parse_datetime(spec["at"], "at")
        if parsed.value.tzinfo is None:
            raise InvalidTrigger("at", spec["at"], _EXPECTED_AT + "; a time without an offset is ambiguous")
        display = parse_zone(spec["timezone"]) if "timezone" in spec else parsed.zone
        return cls(parsed.value, display)

    @property
    def zone(self) -> ZoneInfo:
        return self.display or zone_of_offset(self.at)

    def next_fire_after(self, instant: datetime) -> Fire | None:
        require_aware(instant)
        return Fire(self._shown()) if self.at > instant else None

    def describe(self) -> str:
        where = f" ({self.display.key})" if self.display else ""
        return f"once at {self._shown().isoformat()}{where}"

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": self.type, "at": self._shown().isoformat()}
        if self.display is not None:
            spec["timezone"] = self.display.key
        return spec

    def _shown(self) -> datetime:
        return self.at.astimezone(self.display) if self.display else self.at
