"""The ``once`` trigger: one instant, then the schedule has ended.

Spec::

    {"type": "once", "at": "2027-01-01T09:00:00+08:00"}
    {"type": "once", "at": "2027-01-01T09:00+08:00[Asia/Shanghai]"}     # Java's ZonedDateTime form
    {"type": "once", "at": "2027-01-01T01:00:00Z", "timezone": "Asia/Shanghai"}

A time without an offset or a zone is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from actwheel.errors import InvalidTrigger
from actwheel.triggers.base import (
    EXPECTED_DATETIME,
    Fire,
    Trigger,
    check_fields,
    parse_datetime,
    parse_zone,
    require_aware,
)

__all__ = ["OnceTrigger", "zone_of_offset"]

_FIELDS = ("type", "at", "timezone")
_EXPECTED_AT = EXPECTED_DATETIME


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
    end: datetime | None = field(default=None, init=False, repr=False, compare=False)  # no end bound

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
