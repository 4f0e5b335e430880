"""The ``repeat`` trigger: the seed design's NONE / DAILY / WEEKLY / MONTHLY / WORKDAYS / CUSTOM.

Spec (every field is documented, with examples, in ``docs/triggers.md``)::

    {"type": "repeat", "repeat": "WORKDAYS", "execute_time": "09:30",
     "calendar": "CN", "timezone": "Asia/Shanghai"}
    {"type": "repeat", "repeat": "MONTHLY", "month_day": 25, "execute_time": "10:00",
     "calendar": "CN", "on_holiday": "previous_workday", "timezone": "Asia/Shanghai"}
    {"type": "repeat", "repeat": "CUSTOM", "interval": 90, "time_unit": "MINUTES",
     "start_date_time": "2026-01-01T08:00:00+08:00"}

Wall-clock kinds (all but CUSTOM in SECONDS / MINUTES / HOURS) produce naive
wall times that :func:`actwheel.triggers.dst.first_fire_after` resolves in the
trigger zone under its DST policy. Calendar moves happen on dates, before DST
resolution; a move never goes backwards past an earlier fire, and fires that
land on the same date merge into one.
"""

from __future__ import annotations

import calendar as _monthcal
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from actwheel.errors import InvalidTrigger, NotAvailable
from actwheel.triggers.base import Fire, Trigger, check_fields, parse_datetime, parse_zone, require_aware
from actwheel.triggers.calendars import (
    AdjustedCalendar,
    Calendar,
    DayOff,
    WeekdaysCalendar,
    parse_calendar,
    parse_date_list,
)
from actwheel.triggers.dst import DstPolicy, first_fire_after

__all__ = ["HolidayRule", "RepeatKind", "RepeatTrigger", "TimeUnit"]


class RepeatKind(StrEnum):
    NONE = "NONE"
    DAILY = "DAILY"
    WEEKLY = "WEEKLY"
    MONTHLY = "MONTHLY"
    WORKDAYS = "WORKDAYS"
    CUSTOM = "CUSTOM"


class TimeUnit(StrEnum):
    SECONDS = "SECONDS"
    MINUTES = "MINUTES"
    HOURS = "HOURS"
    DAYS = "DAYS"
    WEEKS = "WEEKS"
    MONTHS = "MONTHS"


class HolidayRule(StrEnum):
    SKIP = "skip"
    NEXT_WORKDAY = "next_workday"
    PREVIOUS_WORKDAY = "previous_workday"


_E = TypeVar("_E", bound=StrEnum)
_DEFAULT_DST = DstPolicy()
_ELAPSED = {TimeUnit.SECONDS: 1, TimeUnit.MINUTES: 60, TimeUnit.HOURS: 3600}
_WEEKDAY_NAMES = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
_MAX_INTERVAL = 1_000_000
_MAX_SHIFT_DAYS = 366  # a move looks this far for a workday
_NOTE_ITEMS = 3  # dates listed in a note before "and N more"
_TIME = re.compile(r"([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?")

_COMMON = ("type", "repeat", "timezone", "dst")
_WINDOW = ("start_date_time", "end_date_time")
_CALENDAR = ("calendar", "extra_holidays", "extra_workdays", "on_holiday")
_FIELDS: Mapping[RepeatKind, tuple[str, ...]] = {
    RepeatKind.NONE: (*_COMMON, "execute_date_time"),
    RepeatKind.DAILY: (*_COMMON, "execute_time", *_WINDOW, *_CALENDAR),
    RepeatKind.WEEKLY: (*_COMMON, "execute_time", "weekdays", *_WINDOW, *_CALENDAR),
    RepeatKind.MONTHLY: (*_COMMON, "execute_time", "month_day", *_WINDOW, *_CALENDAR),
    RepeatKind.WORKDAYS: (*_COMMON, "execute_time", *_WINDOW, "calendar", "extra_holidays", "extra_workdays"),
    RepeatKind.CUSTOM: (*_COMMON, "interval", "time_unit", *_WINDOW),
}
_REQUIRED: Mapping[RepeatKind, tuple[str, ...]] = {
    RepeatKind.NONE: ("execute_date_time",),
    RepeatKind.DAILY: ("execute_time",),
    RepeatKind.WEEKLY: ("execute_time", "weekdays"),
    RepeatKind.MONTHLY: ("execute_time", "month_day"),
    RepeatKind.WORKDAYS: ("execute_time",),
    RepeatKind.CUSTOM: ("interval", "time_unit", "start_date_time"),
}
_EXPECTED_DT = ("an ISO-8601 date-time, with an offset ('2026-10-01T09:00:00+08:00') "
                "or without one (a wall time in 'timezone')")


def _utc(instant: datetime) -> datetime:
    # Aware datetimes sharing a tzinfo compare by wall time, ignoring fold: compare in UTC.
    # An instant already in UTC (either spelling) has no fold: it is returned as it is.
    return instant if instant.tzinfo is UTC or instant.tzinfo is _ZONE_UTC else instant.astimezone(UTC)


_ZONE_UTC = ZoneInfo("UTC")  # ZoneInfo caches: every ZoneInfo("UTC") is this object
_ZERO = timedelta(0)
_STEPS: dict[tuple[int, str], timedelta] = {}
_ANCHORS: dict[datetime, datetime] = {}
_ANCHORS_MAX = 100_000


def _step(interval: int, unit: TimeUnit) -> timedelta:
    """An elapsed schedule's step (memoised: building a timedelta costs more than the arithmetic)."""
    key = (interval, unit.value)
    step = _STEPS.get(key)
    if step is None:
        if len(_STEPS) >= _ANCHORS_MAX:
            _STEPS.clear()
        step = _STEPS[key] = timedelta(seconds=interval * _ELAPSED[unit])
    return step


def _anchor_in_utc_zone(start: datetime) -> datetime:
    """``start`` as a ``ZoneInfo("UTC")`` datetime (memoised by instant: speed only, the value is pure)."""
    anchor = _ANCHORS.get(start)
    if anchor is None:
        if len(_ANCHORS) >= _ANCHORS_MAX:
            _ANCHORS.clear()
        anchor = _ANCHORS[start] = start.astimezone(_ZONE_UTC)
    return anchor


# ---------------------------------------------------------------- the trigger


@dataclass(frozen=True, slots=True)
class RepeatTrigger(Trigger):
    """A repeating wall-clock or elapsed-time schedule; see the module docstring.

    Build one with :meth:`from_spec`. ``weekdays`` holds Python weekday numbers
    (0 = Monday); ``start``/``end`` are aware instants (``end`` inclusive).
    """

    repeat: RepeatKind
    tz: ZoneInfo
    dst: DstPolicy = _DEFAULT_DST
    execute_time: time | None = None
    execute_date_time: datetime | None = None
    weekdays: tuple[int, ...] = ()
    month_day: int | None = None
    interval: int | None = None
    time_unit: TimeUnit | None = None
    start: datetime | None = None
    end: datetime | None = None
    calendar: Calendar | None = None
    on_holiday: HolidayRule | None = None

    type = "repeat"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Trigger:
        """A repeat trigger from its JSON spec.

        :raises InvalidTrigger: naming the field (``weekdays[2]``), the value and what would be valid
        """
        return _parse(spec)

    @property
    def zone(self) -> ZoneInfo:
        return self.tz

    def next_after(self, instant: datetime) -> datetime | None:
        """As :meth:`next_fire_after` ``.at``; an elapsed-time schedule (CUSTOM in SECONDS/MINUTES/HOURS)
        is answered by arithmetic alone, without the :class:`Fire` (it never carries a note): the ticker
        and the planner ask this once per instant of every automation."""
        if self.time_unit not in _ELAPSED:
            return Trigger.next_after(self, instant)  # (a slots dataclass: no zero-argument super())
        require_aware(instant)
        return self._elapsed_at(_utc(instant))

    def _elapsed_at(self, instant: datetime) -> datetime | None:
        """The elapsed-time answer for ``instant`` (in UTC): the bounds, then :meth:`_elapsed_after`'s rule."""
        assert self.start is not None
        assert self.interval is not None
        assert self.time_unit is not None
        start = _utc(self.start)
        end = None if self.end is None else _utc(self.end)
        if end is not None and instant >= end:
            return None
        step = _step(self.interval, self.time_unit)
        elapsed = instant - start
        count = 0 if elapsed < _ZERO else elapsed // step + 1
        try:
            at = start + count * step
            if end is not None and at > end:
                return None
            if self.tz is _ZONE_UTC:  # a fixed offset: wall-time arithmetic from the anchor in the zone is exact
                return _anchor_in_utc_zone(self.start) + count * step
            return at.astimezone(self.tz)
        except OverflowError:  # past year 9999 (or its wall time in the zone): the schedule has ended
            return None

    def next_fire_after(self, instant: datetime) -> Fire | None:
        """The first fire strictly after ``instant`` within ``start_date_time``..``end_date_time``.

        :raises ValueError: if ``instant`` is naive
        :raises NotAvailable: when the answer depends on calendar data that does not exist yet
        """
        require_aware(instant)
        if self.end is not None and _utc(instant) >= _utc(self.end):
            return None
        if self.start is not None and _utc(instant) < _utc(self.start):
            instant = self.start - timedelta(microseconds=1)
        try:
            fire = self._first_after(instant)
        except OverflowError:  # past year 9999: the schedule has ended
            return None
        if fire is None or (self.end is not None and _utc(fire.at) > _utc(self.end)):
            return None
        return fire

    def _first_after(self, instant: datetime) -> Fire | None:
        if self.time_unit in _ELAPSED:
            return self._elapsed_after(instant)
        if self.repeat is RepeatKind.NONE and self.execute_date_time is not None \
                and self.execute_date_time.tzinfo is not None:
            at = self.execute_date_time
            return Fire(at.astimezone(self.tz)) if _utc(at) > _utc(instant) else None
        return self._wall_clock_after(instant)

    def _elapsed_after(self, instant: datetime) -> Fire:
        """CUSTOM in SECONDS/MINUTES/HOURS: real elapsed time from the anchor, no DST question."""
        assert self.start is not None
        assert self.interval is not None
        assert self.time_unit is not None
        step = timedelta(seconds=self.interval * _ELAPSED[self.time_unit])
        elapsed = _utc(instant) - _utc(self.start)
        count = 0 if elapsed < timedelta(0) else elapsed // step + 1
        return Fire((_utc(self.start) + count * step).astimezone(self.tz))

    def _wall_clock_after(self, instant: datetime) -> Fire | None:
        walk = _Walk(self.calendar.name if self.calendar is not None else "weekdays")

        def walls(start: datetime) -> Iterator[datetime]:
            return walk.guard(self._walls(start, walk))

        fire = first_fire_after(instant, self.tz, self.dst, walls, fixed_hour=True)
        if fire is None:
            if walk.error is not None:
                raise walk.error
            return None
        return walk.annotate(fire, self.tz)

    def _walls(self, start: datetime, walk: _Walk) -> Iterator[datetime]:
        if self.repeat is RepeatKind.NONE:
            assert self.execute_date_time is not None
            yield self.execute_date_time
            return
        if self.repeat is RepeatKind.CUSTOM:
            yield from self._custom_walls(start, walk)
            return
        assert self.execute_time is not None
        for day in self._days_from(start.date(), walk):
            yield datetime.combine(day, self.execute_time)

    def _beyond_end(self, day: date) -> bool:
        """True once ``day`` is past ``end_date_time``'s local date.

        A DST rule moves a fire within its own date (a gap shifts it to the jump, a fold
        repeats it), so a fire dated after the end's local date is after the end. Walks stop
        there, and a schedule that ends never asks a calendar for a year it has no data for.
        """
        return self.end is not None and day > self.end.astimezone(self.tz).date()

    # --------------------------------------------------------- dates of a day-based schedule

    def _days_from(self, first: date, walk: _Walk) -> Iterator[date]:
        """The schedule's dates from about ``first`` on, increasing, after holiday moves."""
        origin = self._lookback(first)
        if self.repeat is RepeatKind.WORKDAYS:
            yield from self._workdays_from(origin, walk)
        elif self.calendar is None:
            yield from self._nominal_from(origin, walk)
        else:
            yield from self._moved(self._nominal_from(origin, walk), walk)

    def _lookback(self, first: date) -> date:
        """The last workday before ``first``: a date moved forward from before it may land after it."""
        if self.calendar is None:
            return first
        day = first - timedelta(days=1)
        for _ in range(_MAX_SHIFT_DAYS):
            if self.calendar.is_workday(day):
                return day
            day -= timedelta(days=1)
        return day

    def _nominal_from(self, origin: date, walk: _Walk) -> Iterator[date]:
        if self.repeat is RepeatKind.MONTHLY:
            yield from self._month_days_from(origin, walk)
            return
        day = origin
        while not self._beyond_end(day):
            if self.repeat is RepeatKind.DAILY or day.weekday() in self.weekdays:
                yield day
            day += timedelta(days=1)

    def _month_days_from(self, origin: date, walk: _Walk) -> Iterator[date]:
        assert self.month_day is not None
        year, month = origin.year, origin.month
        while not self._beyond_end(date(year, month, 1)):
            day = _clamped_day(year, month, self.month_day)
            if day >= origin:
                if self.month_day > 0 and day.day != self.month_day:
                    walk.note(day, f"month_day {self.month_day}: {day:%Y-%m} has {day.day} days; "
                                   f"fired on its last day")
                yield day
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)

    def _workdays_from(self, origin: date, walk: _Walk) -> Iterator[date]:
        calendar = self.calendar or WeekdaysCalendar()
        day = origin
        while not self._beyond_end(day):
            off = calendar.day_off(day)
            if off is None:
                walk.note_workday(day, calendar.workday_note(day))
                yield day
            elif not calendar.is_weekend(day):
                walk.skip(day, off)
            day += timedelta(days=1)

    def _moved(self, nominal: Iterator[date], walk: _Walk) -> Iterator[date]:
        """Apply ``on_holiday`` to each nominal date; merge dates that land on the same day."""
        assert self.calendar is not None
        last: date | None = None
        for day in nominal:
            target = self._target(day, walk)
            if target is not None and (last is None or target > last):
                last = target
                walk.note_workday(target, self.calendar.workday_note(target))
                yield target

    def _target(self, day: date, walk: _Walk) -> date | None:
        """Where the fire of nominal ``day`` goes (itself on a workday), or None when it is skipped."""
        assert self.calendar is not None
        off = self.calendar.day_off(day)
        if off is None:
            return day
        target = self._move(day)
        if target is None:
            if off.holiday:
                walk.skip(day, off)
        else:
            walk.moved(day, off, target)
        return target

    def _move(self, day: date) -> date | None:
        """Where ``on_holiday`` moves a fire from a day off, or None to skip it."""
        assert self.calendar is not None
        if self.on_holiday in (None, HolidayRule.SKIP):
            return None
        step = timedelta(days=1 if self.on_holiday is HolidayRule.NEXT_WORKDAY else -1)
        target = day + step
        for _ in range(_MAX_SHIFT_DAYS):
            if self._beyond_end(target):
                return None  # it would land after end_date_time
            if self.calendar.is_workday(target):
                return target
            target += step
        raise NotAvailable(f"a workday within {_MAX_SHIFT_DAYS} days of {day} in {self.calendar.name}")

    # --------------------------------------------------------- CUSTOM in DAYS / WEEKS / MONTHS

    def _custom_walls(self, start: datetime, walk: _Walk) -> Iterator[datetime]:
        assert self.start is not None
        assert self.interval is not None
        anchor = self.start.astimezone(self.tz).replace(tzinfo=None)
        if self.time_unit is TimeUnit.MONTHS:
            yield from _month_steps(anchor, self.interval, start, walk)
            return
        step = timedelta(days=self.interval * (7 if self.time_unit is TimeUnit.WEEKS else 1))
        count = max(0, (start - anchor) // step)
        while True:
            yield anchor + count * step
            count += 1

    # --------------------------------------------------------- description and spec

    def describe(self) -> str:
        parts = [_describe_when(self)]
        if self.calendar is not None and self.repeat is not RepeatKind.WORKDAYS:
            parts.append(_describe_holidays(self.calendar, self.on_holiday))
        if self.start is not None and self.repeat is not RepeatKind.CUSTOM:
            parts.append(f"from {self.start.astimezone(self.tz).isoformat()}")
        if self.end is not None:
            parts.append(f"until {self.end.astimezone(self.tz).isoformat()}")
        dst = self.dst.to_spec()
        if dst is not None:
            parts.append(f"dst={dst}")
        return ", ".join([*parts, self.tz.key])

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": self.type, "repeat": self.repeat.value, "timezone": self.tz.key}
        spec.update(_optional_fields(self))
        spec.update(_calendar_fields(self.calendar, self.on_holiday))
        dst = self.dst.to_spec()
        if dst is not None:
            spec["dst"] = dst
        return spec


# ---------------------------------------------------------------- walking helpers


@dataclass
class _Walk:
    """Notes gathered while walking a schedule's dates, and the error that stopped the walk."""

    calendar: str
    notes: dict[date, list[str]] = field(default_factory=dict)
    skipped: list[tuple[date, DayOff]] = field(default_factory=list)
    moves: dict[date, list[tuple[date, DayOff]]] = field(default_factory=dict)
    error: NotAvailable | None = None

    def guard(self, walls: Iterator[datetime]) -> Iterator[datetime]:
        """Stop at missing calendar data; the caller raises only if no fire was found before it."""
        try:
            yield from walls
        except NotAvailable as exc:
            self.error = exc

    def note(self, day: date, text: str) -> None:
        self.notes.setdefault(day, []).append(text)

    def skip(self, day: date, off: DayOff) -> None:
        self.skipped.append((day, off))

    def note_workday(self, day: date, made_up: str | None) -> None:
        """``day`` fires: hand it the holidays skipped since the previous fire."""
        if self.skipped:
            self.note(day, f"skipped holidays in {self.calendar}: {_list_days(self.skipped)}")
            self.skipped = []
        if made_up:
            self.note(day, made_up)

    def moved(self, day: date, off: DayOff, target: date) -> None:
        self.moves.setdefault(target, []).append((day, off))

    def annotate(self, fire: Fire, zone: ZoneInfo) -> Fire:
        day = fire.at.astimezone(zone).date()
        texts = [_moves_text(self.moves[day], day, self.calendar)] if day in self.moves else []
        texts += self.notes.get(day, [])
        if fire.note:
            texts.append(fire.note)
        return Fire(fire.at, "; ".join(texts)) if texts else fire


def _list_days(days: list[tuple[date, DayOff]]) -> str:
    shown = ", ".join(f"{day.isoformat()} ({off.name})" for day, off in days[:_NOTE_ITEMS])
    more = len(days) - _NOTE_ITEMS
    return shown + (f" and {more} more" if more > 0 else "")


def _moves_text(moves: list[tuple[date, DayOff]], target: date, calendar: str) -> str:
    if len(moves) == 1:
        day, off = moves[0]
        where = f"in {calendar}" if off.holiday else f"(not a workday in {calendar})"
        return f"{day.isoformat()} is {off} {where}; moved to {target.isoformat()}"
    return f"{_list_days(moves)} are days off in {calendar}; moved to {target.isoformat()} as one fire"


def _clamped_day(year: int, month: int, month_day: int) -> date:
    length = _monthcal.monthrange(year, month)[1]
    return date(year, month, length if month_day == -1 else min(month_day, length))


def _month_steps(anchor: datetime, interval: int, start: datetime, walk: _Walk) -> Iterator[datetime]:
    """CUSTOM MONTHS: the anchor's day of month every ``interval`` months, clamped to short months."""
    months_since = (start.year - anchor.year) * 12 + start.month - anchor.month
    count = max(0, months_since // interval - 1)
    while True:
        index = anchor.month - 1 + count * interval
        year, month = anchor.year + index // 12, index % 12 + 1
        if year > 9999:
            return
        day = _clamped_day(year, month, anchor.day)
        if day.day != anchor.day:
            walk.note(day, f"{day:%Y-%m} has no day {anchor.day}; fired on its last day")
        yield datetime.combine(day, anchor.time())
        count += 1


# ---------------------------------------------------------------- describing


def _describe_when(t: RepeatTrigger) -> str:
    at = _format_time(t.execute_time) if t.execute_time is not None else ""
    if t.repeat is RepeatKind.NONE:
        assert t.execute_date_time is not None
        return f"once at {t.execute_date_time.isoformat()}"
    if t.repeat is RepeatKind.DAILY:
        return f"every day at {at}"
    if t.repeat is RepeatKind.WEEKLY:
        return f"every {', '.join(_WEEKDAY_NAMES[d] for d in t.weekdays)} at {at}"
    if t.repeat is RepeatKind.MONTHLY:
        return f"monthly on {_describe_month_day(t.month_day)} at {at}"
    if t.repeat is RepeatKind.WORKDAYS:
        return f"every workday ({(t.calendar or WeekdaysCalendar()).describe()}) at {at}"
    return _describe_custom(t)


def _describe_month_day(month_day: int | None) -> str:
    if month_day == -1:
        return "the last day"
    if month_day is not None and month_day > 28:
        return f"day {month_day} (the last day in shorter months)"
    return f"day {month_day}"


def _describe_custom(t: RepeatTrigger) -> str:
    assert t.start is not None
    assert t.time_unit is not None
    unit = t.time_unit.value.lower()
    every = f"every {unit[:-1]}" if t.interval == 1 else f"every {t.interval} {unit}"
    return f"{every} from {t.start.astimezone(t.tz).isoformat()}"


def _describe_holidays(calendar: Calendar, rule: HolidayRule | None) -> str:
    if rule is HolidayRule.NEXT_WORKDAY:
        return f"days off ({calendar.describe()}) move to the next workday"
    if rule is HolidayRule.PREVIOUS_WORKDAY:
        return f"days off ({calendar.describe()}) move to the previous workday"
    return f"skipping days off ({calendar.describe()})"


def _format_time(value: time) -> str:
    return value.strftime("%H:%M:%S" if value.second else "%H:%M")


def _optional_fields(t: RepeatTrigger) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "execute_time": _format_time(t.execute_time) if t.execute_time is not None else None,
        "execute_date_time": t.execute_date_time.isoformat() if t.execute_date_time is not None else None,
        "weekdays": [_WEEKDAY_NAMES[d] for d in t.weekdays] or None,
        "month_day": t.month_day,
        "interval": t.interval,
        "time_unit": t.time_unit.value if t.time_unit is not None else None,
        "start_date_time": t.start.isoformat() if t.start is not None else None,
        "end_date_time": t.end.isoformat() if t.end is not None else None,
    }
    return {key: value for key, value in fields.items() if value is not None}


def _calendar_fields(calendar: Calendar | None, rule: HolidayRule | None) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    base = calendar.base if isinstance(calendar, AdjustedCalendar) else calendar
    if base is not None:
        fields["calendar"] = base.name
    if isinstance(calendar, AdjustedCalendar):
        if calendar.extra_holidays:
            fields["extra_holidays"] = sorted(d.isoformat() for d in calendar.extra_holidays)
        if calendar.extra_workdays:
            fields["extra_workdays"] = sorted(d.isoformat() for d in calendar.extra_workdays)
    if rule is not None:
        fields["on_holiday"] = rule.value
    return fields


# ---------------------------------------------------------------- parsing


def _parse(spec: Mapping[str, Any]) -> RepeatTrigger:
    if not isinstance(spec, Mapping):
        raise InvalidTrigger("trigger", spec, "a JSON object")
    kind = _enum(RepeatKind, spec.get("repeat"), "repeat")
    check_fields(spec, _FIELDS[kind], f"repeat={kind.value}")
    for name in _REQUIRED[kind]:
        if name not in spec:
            expected = f"a value: repeat={kind.value} requires {', '.join(_REQUIRED[kind])}"
            raise InvalidTrigger(name, None, expected)
    zone = parse_zone(spec.get("timezone", "UTC"))
    unit = _enum(TimeUnit, spec["time_unit"], "time_unit") if "time_unit" in spec else None
    trigger = RepeatTrigger(
        repeat=kind,
        tz=zone,
        dst=_dst(spec, unit),
        execute_time=_execute_time(spec["execute_time"]) if "execute_time" in spec else None,
        execute_date_time=_execute_date_time(spec, zone),
        weekdays=_weekdays(spec["weekdays"]) if "weekdays" in spec else (),
        month_day=_month_day(spec["month_day"]) if "month_day" in spec else None,
        interval=_interval(spec["interval"]) if "interval" in spec else None,
        time_unit=unit,
        start=_bound(spec, "start_date_time", zone),
        end=_bound(spec, "end_date_time", zone),
        calendar=_calendar(spec, kind),
        on_holiday=_on_holiday(spec, kind),
    )
    _check_window(trigger, spec)
    return trigger


def _enum(kind: type[_E], value: Any, name: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        raise InvalidTrigger(name, value, "one of " + ", ".join(repr(m.value) for m in kind)) from None


def _dst(spec: Mapping[str, Any], unit: TimeUnit | None) -> DstPolicy:
    if "dst" in spec and unit in _ELAPSED:
        raise InvalidTrigger("dst", spec["dst"], "no 'dst': SECONDS, MINUTES and HOURS count real elapsed "
                             "time, so DST never moves them (dst applies to DAYS, WEEKS and MONTHS)")
    return DstPolicy.parse(spec.get("dst"))


def _execute_time(value: Any) -> time:
    match = _TIME.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidTrigger("execute_time", value, "a 24-hour time 'HH:MM' or 'HH:MM:SS' such as '09:30'")
    return time(int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))


def _execute_date_time(spec: Mapping[str, Any], zone: ZoneInfo) -> datetime | None:
    if "execute_date_time" not in spec:
        return None
    return _datetime(spec["execute_date_time"], "execute_date_time", zone, resolve=False)


def _bound(spec: Mapping[str, Any], name: str, zone: ZoneInfo) -> datetime | None:
    return _datetime(spec[name], name, zone, resolve=True) if name in spec else None


def _datetime(value: Any, name: str, zone: ZoneInfo, *, resolve: bool) -> datetime:
    """An ISO date-time; naive ones are wall times in ``zone`` (resolved to an instant if ``resolve``)."""
    parsed = parse_datetime(value, name, _EXPECTED_DT)
    if parsed.zone is not None and parsed.zone != zone:
        raise InvalidTrigger(name, value, f"no zone in brackets, or the trigger's timezone ({zone.key})")
    if parsed.value.tzinfo is not None or not resolve:
        return parsed.value
    return _resolve_wall(parsed.value, zone, name, value)


def _resolve_wall(wall: datetime, zone: ZoneInfo, name: str, value: Any) -> datetime:
    """A wall time as an instant: the first of two in a fold; refused in a gap."""
    aware = wall.replace(tzinfo=zone, fold=0)
    if _utc(aware).astimezone(zone).replace(tzinfo=None) != wall:
        raise InvalidTrigger(name, value, f"a wall time that exists in {zone.key} (this one falls in a "
                             "DST gap), or an offset")
    return aware


def _weekdays(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise InvalidTrigger("weekdays", value, "a non-empty list of days: 'MON'..'SUN' or 1..7 (1 = Monday)")
    return tuple(sorted({_weekday(item, f"weekdays[{index}]") for index, item in enumerate(value)}))


def _weekday(value: Any, name: str) -> int:
    if isinstance(value, str) and value.upper() in _WEEKDAY_NAMES:
        return _WEEKDAY_NAMES.index(value.upper())
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 7:
        return value - 1
    raise InvalidTrigger(name, value, "a day name 'MON'..'SUN' or an ISO day number 1..7 (1 = Monday)")


def _month_day(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and (1 <= value <= 31 or value == -1):
        return value
    raise InvalidTrigger("month_day", value, "a day of the month 1..31 (clamped to shorter months) "
                         "or -1 for the last day")


def _interval(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= _MAX_INTERVAL:
        return value
    raise InvalidTrigger("interval", value, f"an integer from 1 to {_MAX_INTERVAL}")


def _calendar(spec: Mapping[str, Any], kind: RepeatKind) -> Calendar | None:
    if "calendar" not in spec:
        for name in ("extra_holidays", "extra_workdays", "on_holiday"):
            if name in spec and kind is not RepeatKind.WORKDAYS:
                raise InvalidTrigger(name, spec[name], "to be used with a 'calendar'")
    base = parse_calendar(spec["calendar"]) if "calendar" in spec else None
    holidays = parse_date_list(spec["extra_holidays"], "extra_holidays") if "extra_holidays" in spec else None
    workdays = parse_date_list(spec["extra_workdays"], "extra_workdays") if "extra_workdays" in spec else None
    if not holidays and not workdays:
        return base
    _check_disjoint(spec, holidays or frozenset(), workdays or frozenset())
    return AdjustedCalendar(base or WeekdaysCalendar(), holidays or frozenset(), workdays or frozenset())


def _check_disjoint(spec: Mapping[str, Any], holidays: frozenset[date], workdays: frozenset[date]) -> None:
    both = holidays & workdays
    if both:
        day = min(both).isoformat()
        index = spec["extra_workdays"].index(day)
        raise InvalidTrigger(f"extra_workdays[{index}]", day, "a date not also listed in extra_holidays")


def _on_holiday(spec: Mapping[str, Any], kind: RepeatKind) -> HolidayRule | None:
    if "on_holiday" in spec:
        return _enum(HolidayRule, spec["on_holiday"], "on_holiday")
    return HolidayRule.SKIP if "calendar" in spec and kind is not RepeatKind.WORKDAYS else None


def _check_window(t: RepeatTrigger, spec: Mapping[str, Any]) -> None:
    if t.start is not None and t.end is not None and _utc(t.end) < _utc(t.start):
        raise InvalidTrigger("end_date_time", spec["end_date_time"],
                             f"an instant at or after start_date_time ({spec['start_date_time']})")
