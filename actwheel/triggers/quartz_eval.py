"""Evaluate a parsed Quartz expression: the next fire time, exactly as Quartz 2.3.2 finds it.

Quartz walks a lenient ``java.util.GregorianCalendar`` forward field by field
(second, minute, hour, day, month, year), restarting from the seconds each
time it has to move a larger field. Its results — including what it does in a
DST gap or a repeated hour, and the ``W`` / ``L`` / ``#`` corner cases — follow
from two things, which this module reproduces:

- the order in which it sets and reads calendar fields (the walk below), and
- how a lenient Java calendar turns wall-clock fields into an instant:
  out-of-range fields roll over (day 32 is the 1st of the next month, hour 24
  is midnight of the next day); a wall time skipped by DST is read with the
  offset in force *before* the jump (02:30 on a New York spring-forward day
  becomes 03:30 EDT); a wall time that occurs twice is read as its *second*
  occurrence. Both amount to "use the smaller of the two candidate offsets".

A consequence worth knowing: a start instant inside the first occurrence of a
repeated hour is itself read back as the second occurrence, so Quartz never
fires during the first pass through a repeated hour.
"""

from __future__ import annotations

from bisect import bisect_left
from datetime import date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from actwheel.triggers.quartz_parse import (
    DAY_OF_MONTH,
    DAY_OF_WEEK,
    HOUR,
    MAX_YEAR,
    MINUTE,
    MONTH,
    SECOND,
    YEAR,
    QuartzExpression,
)

__all__ = ["next_fire_seconds"]

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_EPOCH = datetime(1970, 1, 1)
_LOOP_YEAR_LIMIT = 2999  # Quartz gives up once its calendar passes this year
_SATURDAY, _SUNDAY = 7, 1  # Java's DAY_OF_WEEK numbering
# Java's time-zone tables stop at 2037; zones whose future changes are listed one by one
# in tzdata (no recurring rule: Morocco's Ramadan changes) keep their 2038 offset for ever.
_FAR = 200_000_000_000  # about year 8300, in seconds
_JAVA_TABLE_END = 2145916800  # 2038-01-01T00:00:00Z
_FROZEN_AFTER_TABLE = frozenset({"Africa/Casablanca", "Africa/El_Aaiun"})


class QuartzLoops(Exception):
    """Quartz would never return for this expression from this start (its walk revisits a state).

    Happens with ``L-nW`` when ``n`` reaches back past the start of a short month: the
    nearest weekday lies in the previous month, Quartz moves there, then forward again.
    Internal to the triggers, so not exported: :mod:`actwheel.triggers.cron` turns it into the
    ``InvalidTrigger`` the caller sees.
    """


def next_fire_seconds(expr: QuartzExpression, zone: ZoneInfo | None, after_seconds: int) -> int | None:
    """The first fire at or after epoch second ``after_seconds`` (Quartz adds the 1 s itself).

    ``zone=None`` evaluates in pure wall-clock time (UTC), which the DST policies
    other than ``quartz`` use to enumerate wall times.

    :raises QuartzLoops: where Quartz itself would loop forever
    """
    return _Walk(expr, _Calendar(zone, after_seconds), after_seconds).run()


def _ceiling(values: tuple[int, ...], value: int) -> int | None:
    """The smallest member >= value (Java's ``tailSet(value).first()``), or None."""
    index = bisect_left(values, value)
    return values[index] if index < len(values) else None


def _days_in_month(month: int, year: int) -> int:
    if month == 2:
        return 29 if (year % 4 == 0 and year % 100 != 0) or year % 400 == 0 else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _java_dow(ordinal: int) -> int:
    """Java's DAY_OF_WEEK (1 = Sunday .. 7 = Saturday) of a proleptic Gregorian ordinal."""
    return ordinal % 7 + 1


@lru_cache(maxsize=8192)
def _steady_offset(zone: ZoneInfo, day: int) -> int | None:
    """The zone's offset (s) if it holds from two days before UTC day ``day`` to two days after, else None.

    Sampled at both ends and the middle: no zone changes its offset and back within two
    days. This lets the calendar skip most zoneinfo look-ups on days without a transition.
    """
    start = (day - 2) * 86400
    first = _zone_offset(zone, start)
    if _zone_offset(zone, start + 2 * 86400 + 43200) != first or _zone_offset(zone, start + 5 * 86400) != first:
        return None
    return first


def _zone_offset(zone: ZoneInfo, utc: int) -> int:
    if utc >= _JAVA_TABLE_END and zone.key in _FROZEN_AFTER_TABLE:
        utc = _JAVA_TABLE_END
    utc = min(max(utc, -_FAR), _FAR)  # outside years 1..9999 only "past year 2999" matters
    offset = datetime.fromtimestamp(utc, zone).utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date, for any year (H. Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The inverse of :func:`_days_from_civil`."""
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (month <= 2), month, day


def _local_seconds(year: int, month0: int, day: int, hour: int, minute: int, second: int) -> int:
    """Wall-clock seconds since 1970 of lenient calendar fields (month 0-based, any may overflow)."""
    year += month0 // 12
    days = _days_from_civil(year, month0 % 12 + 1, 1) + day - 1
    return days * 86400 + hour * 3600 + minute * 60 + second


class _Calendar:
    """Just enough of a lenient ``GregorianCalendar`` in one zone: set fields, read them back."""

    __slots__ = ("_dirty", "day", "dow", "hour", "minute", "month0", "second", "utc", "year", "zone")

    def __init__(self, zone: ZoneInfo | None, utc: int) -> None:
        self.zone = zone
        self._from_utc(utc)
        # Quartz then sets MILLISECOND, which makes the calendar re-read its wall fields:
        # an instant in the first pass of a repeated hour is read back as the second pass.
        self._dirty = True

    def _from_utc(self, utc: int) -> None:
        self.utc = utc
        local = utc if self.zone is None else utc + self._offset_at(utc)
        days, rest = divmod(local, 86400)
        self.year, month, self.day = _civil_from_days(days)
        self.month0 = month - 1
        self.hour, rest = divmod(rest, 3600)
        self.minute, self.second = divmod(rest, 60)
        self.dow = _java_dow(days + _EPOCH_ORDINAL)
        self._dirty = False

    def _offset_at(self, utc: int) -> int:
        assert self.zone is not None
        steady = _steady_offset(self.zone, utc // 86400)
        return steady if steady is not None else _zone_offset(self.zone, utc)

    def utc_of_wall(self, local: int) -> int:
        """Java's reading of a wall time: in a gap or an overlap, the smaller offset wins."""
        if self.zone is None:
            return local
        steady = _steady_offset(self.zone, local // 86400)
        if steady is not None:
            return local - steady
        if local >= _JAVA_TABLE_END + 86400 and self.zone.key in _FROZEN_AFTER_TABLE:
            return local - self._offset_at(_JAVA_TABLE_END)
        wall = _EPOCH + timedelta(seconds=min(max(local, -_FAR), _FAR))
        first = self.zone.utcoffset(wall)
        second = self.zone.utcoffset(wall.replace(fold=1))
        offsets = [int(o.total_seconds()) for o in (first, second) if o is not None]
        return local - min(offsets, default=0)

    def complete(self) -> None:
        if self._dirty:
            local = _local_seconds(self.year, self.month0, self.day, self.hour, self.minute, self.second)
            self._from_utc(self.utc_of_wall(local))

    def get(self, name: str) -> int:
        self.complete()
        return int(getattr(self, name))

    def set(self, **fields: int) -> None:
        # Like Java, no recomputation here: raw fields accumulate until the next read.
        for name, value in fields.items():
            setattr(self, name, value)
        self._dirty = True

    def set_hour(self, hour: int) -> None:
        """Quartz's ``setCalendarHour``: in a DST gap, step one more hour."""
        self.set(hour=hour)
        if self.get("hour") != hour and hour != 24:
            self.set(hour=hour + 1)

    def reset_to(self, *, day: int, month0: int, year: int | None = None) -> None:
        """Midnight of a (lenient) date: Quartz's "move a larger field, zero the smaller"."""
        fields = {"second": 0, "minute": 0, "hour": 0, "day": day, "month0": month0}
        if year is not None:
            fields["year"] = year
        self.set(**fields)


class _Walk:
    """One ``getTimeAfter`` walk. Each ``_step_*`` returns True when it moved the calendar (restart)."""

    def __init__(self, expr: QuartzExpression, calendar: _Calendar, after_seconds: int) -> None:
        self.e = expr
        self.cal = calendar
        self.after = after_seconds
        self.values = expr.values

    def run(self) -> int | None:
        seen: set[tuple[int, ...]] | None = set() if self.e.nearest_weekday else None
        while True:
            if seen is not None:
                self._check_cycle(seen)
            if self.cal.get("year") > _LOOP_YEAR_LIMIT:
                return None
            if self._step_second() or self._step_minute() or self._step_hour() or self._step_day():
                continue
            moved = self._step_month()
            if moved is None:
                return None
            if moved:
                continue
            moved = self._step_year()
            if moved is None:
                return None
            if not moved:
                self.cal.complete()
                return self.cal.utc

    def _check_cycle(self, seen: set[tuple[int, ...]]) -> None:
        cal = self.cal
        state = (cal.year, cal.month0, cal.day, cal.hour, cal.minute, cal.second)
        if state in seen:
            raise QuartzLoops(self.e.text)
        seen.add(state)

    def _step_second(self) -> bool:
        cal = self.cal
        second, minute = cal.get("second"), cal.get("minute")
        found = _ceiling(self.values[SECOND], second)
        if found is None:
            found = self.values[SECOND][0]
            cal.set(minute=minute + 1)
        cal.set(second=found)
        return False

    def _step_minute(self) -> bool:
        cal = self.cal
        minute, hour = cal.get("minute"), cal.get("hour")
        found = _ceiling(self.values[MINUTE], minute)
        if found == minute:
            cal.set(minute=minute)
            return False
        if found is None:
            found, hour = self.values[MINUTE][0], hour + 1
        cal.set(second=0, minute=found)
        cal.set_hour(hour)
        return True

    def _step_hour(self) -> bool:
        cal = self.cal
        hour, day = cal.get("hour"), cal.get("day")
        found = _ceiling(self.values[HOUR], hour)
        if found == hour:
            cal.set(hour=hour)
            return False
        if found is None:
            found, day = self.values[HOUR][0], day + 1
        cal.set(second=0, minute=0, day=day)
        cal.set_hour(found)
        return True

    def _step_day(self) -> bool:
        moved = self._step_day_of_month() if self.e.day_of_month_spec else self._step_day_of_week()
        if not moved:
            self.cal.set(day=self.cal.day)
        return moved

    # --- day of month ------------------------------------------------------------------------

    def _step_day_of_month(self) -> bool:
        cal = self.cal
        day, month = cal.get("day"), cal.get("month0") + 1
        if self.e.last_day_of_month and not self.e.nearest_weekday:
            return self._last_day(day, month)
        if self.e.last_day_of_month:
            target = _days_in_month(month, cal.year) - self.e.last_day_offset
            return self._weekday_near(day, month, target, on_miss=1)
        if self.e.nearest_weekday:
            first = self.values[DAY_OF_MONTH][0]
            return self._weekday_near(day, month, first, on_miss=first)
        return self._listed_day(day, month)

    def _move_day(self, day: int, month: int, current_day: int, current_month: int) -> bool:
        if day != current_day or month != current_month:
            self.cal.reset_to(day=day, month0=month - 1)
            return True
        return False

    def _last_day(self, day: int, month: int) -> bool:
        target = _days_in_month(month, self.cal.year) - self.e.last_day_offset
        if day <= target:
            return self._move_day(target, month, day, month)
        if month == 12:
            # Quartz bumps the year itself here, then sets January.
            self.cal.set(year=self.cal.year + 1)
            self.cal.reset_to(day=1, month0=0)
            return True
        return self._move_day(1, month + 1, day, month)

    def _weekday_near(self, day: int, month: int, target: int, *, on_miss: int) -> bool:
        """``nW`` / ``LW`` / ``L-nW``: the weekday nearest ``target`` in this month, if not past."""
        year = self.cal.year
        # Quartz reads the weekday from a calendar set to (year, month, target) leniently;
        # a target outside the month rolls into a neighbouring month, and so may the year.
        days = _days_from_civil(year, month, 1) + target - 1
        rolled_year = _civil_from_days(days)[0]
        weekday = _java_dow(days + _EPOCH_ORDINAL)
        moved = _nearest_weekday(target, weekday, _days_in_month(month, year))
        local = _local_seconds(rolled_year, month - 1, moved, self.cal.hour, self.cal.minute, self.cal.second)
        if self.cal.utc_of_wall(local) < self.after:
            return self._move_day(on_miss, month + 1, day, month)
        return self._move_day(moved, month, day, month)

    def _listed_day(self, day: int, month: int) -> bool:
        days = self.values[DAY_OF_MONTH]
        found = _ceiling(days, day)
        if found is None:
            return self._move_day(days[0], month + 1, -1, month)
        if found > _days_in_month(month, self.cal.year):
            return self._move_day(days[0], month + 1, day, month)
        return self._move_day(found, month, day, month)

    # --- day of week -------------------------------------------------------------------------

    def _step_day_of_week(self) -> bool:
        cal = self.cal
        day, month = cal.get("day"), cal.get("month0") + 1
        if self.e.last_day_of_week:
            return self._last_weekday_of_month(day, month)
        if self.e.nth_day_of_week:
            return self._nth_weekday(day, month)
        return self._listed_weekday(day, month)

    def _days_to(self, wanted: int) -> int:
        current = self.cal.dow
        if current < wanted:
            return wanted - current
        if current > wanted:
            return wanted + 7 - current
        return 0

    def _next_month(self, month: int) -> bool:
        self.cal.reset_to(day=1, month0=month)  # month is 1-based: this is the next month
        return True

    def _last_weekday_of_month(self, day: int, month: int) -> bool:
        add = self._days_to(self.values[DAY_OF_WEEK][0])
        last = _days_in_month(month, self.cal.year)
        if day + add > last:
            return self._next_month(month)
        while day + add + 7 <= last:
            add += 7
        if add > 0:
            self.cal.reset_to(day=day + add, month0=month - 1)
            return True
        return False

    def _nth_weekday(self, day: int, month: int) -> bool:
        add = self._days_to(self.values[DAY_OF_WEEK][0])
        shifted = add > 0
        day += add
        week = day // 7 + (1 if day % 7 else 0)
        add = (self.e.nth_day_of_week - week) * 7
        day += add
        if add < 0 or day > _days_in_month(month, self.cal.year):
            return self._next_month(month)
        if add > 0 or shifted:
            self.cal.reset_to(day=day, month0=month - 1)
            return True
        return False

    def _listed_weekday(self, day: int, month: int) -> bool:
        weekdays = self.values[DAY_OF_WEEK]
        found = _ceiling(weekdays, self.cal.dow)
        add = self._days_to(weekdays[0] if found is None else found)
        if day + add > _days_in_month(month, self.cal.year):
            return self._next_month(month)
        if add > 0:
            self.cal.reset_to(day=day + add, month0=month - 1)
            return True
        return False

    # --- month and year ----------------------------------------------------------------------

    def _step_month(self) -> bool | None:
        cal = self.cal
        month, year = cal.get("month0") + 1, cal.get("year")
        if year > MAX_YEAR:
            return None
        months = self.values[MONTH]
        found = _ceiling(months, month)
        if found == month:
            cal.set(month0=month - 1)
            return False
        if found is None:
            found, year = months[0], year + 1
        cal.reset_to(day=1, month0=found - 1, year=year)
        return True

    def _step_year(self) -> bool | None:
        cal = self.cal
        year = cal.get("year")
        found = _ceiling(self.values[YEAR], year)
        if found is None:
            return None
        if found != year:
            cal.reset_to(day=1, month0=0, year=found)
            return True
        cal.set(year=year)
        return False


def _nearest_weekday(day: int, weekday: int, last: int) -> int:
    """Quartz's W rule: Saturday moves to Friday (or to Monday the 3rd from the 1st),
    Sunday moves to Monday (or to Friday from the month's last day)."""
    if weekday == _SATURDAY:
        return day + 2 if day == 1 else day - 1
    if weekday == _SUNDAY:
        return day - 2 if day == last else day + 1
    return day
