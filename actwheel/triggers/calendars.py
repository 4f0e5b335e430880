"""Workday calendars for ``repeat`` triggers: which dates are working days, and why not.

A calendar spec (the ``calendar`` field of a ``repeat`` trigger) is one of:

- ``"weekdays"``: Monday to Friday, no holidays.
- ``"CN"``: mainland China's statutory holidays *and* its make-up workdays
  (调休: a Saturday or Sunday the State Council declares a working day is a
  workday). Data: the ``holidays`` library's China calendar, which encodes
  the State Council's yearly notices (国务院办公厅关于部分节假日安排的通知).
  Covered: :data:`CN_FIRST_YEAR` to :func:`cn_last_year` (2026 with holidays
  0.109, from the notice of 2025-11-04). A date outside raises
  :class:`~actwheel.errors.NotAvailable`: the schedule of a year is not known
  before its notice is published (each November), and guessing would fire on
  the wrong days.
- ``"holidays:<COUNTRY>"`` or ``"holidays:<COUNTRY>-<SUBDIVISION>"``: the
  public holidays of the ``holidays`` library for that ISO 3166 country code
  (``holidays:US``, ``holidays:DE-BY``), with that country's weekend (Friday
  and Saturday in Israel, for instance) and its weekend workdays where the
  library knows them.

Per-trigger ``extra_holidays`` / ``extra_workdays`` (ISO date lists) override
the calendar on those dates (:class:`AdjustedCalendar`).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Any

import holidays

from actwheel.errors import InvalidTrigger, NotAvailable

__all__ = [
    "CN_FIRST_YEAR",
    "AdjustedCalendar",
    "Calendar",
    "ChinaCalendar",
    "DayOff",
    "HolidaysCalendar",
    "WeekdaysCalendar",
    "cn_last_year",
    "parse_calendar",
    "parse_date_list",
]

#: The first year whose State Council notice the ``CN`` calendar encodes.
CN_FIRST_YEAR = 2001

_DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_SAT_SUN = frozenset({5, 6})
_CALENDAR_EXPECTED = "'weekdays', 'CN' or 'holidays:<COUNTRY>[-<SUBDIVISION>]' such as 'holidays:DE-BY'"
_HOLIDAYS_SPEC = re.compile(r"holidays:([A-Z]{2,3})(?:-([A-Za-z0-9]{1,10}))?")


@lru_cache(maxsize=1)
def cn_last_year() -> int:
    """The last year the installed ``holidays`` library has a State Council notice for."""
    from holidays.countries.china import ChinaStaticHolidays

    return max(ChinaStaticHolidays.special_public_holidays)


@dataclass(frozen=True, slots=True)
class DayOff:
    """Why a date is not a working day.

    :ivar name: the holiday's name ("National Day") or the weekday ("Saturday")
    :ivar holiday: True for a holiday, False for an ordinary weekend day
    """

    name: str
    holiday: bool

    def __str__(self) -> str:
        return f"a holiday ({self.name})" if self.holiday else f"a {self.name}"


class Calendar(ABC):
    """Which dates are working days. Pure: no IO, safe to share between threads.

    Implementations are frozen dataclasses, so two calendars built from the
    same spec compare equal.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """The spec value this calendar was built from (``"CN"``, ``"holidays:DE-BY"``)."""

    @abstractmethod
    def is_weekend(self, day: date) -> bool:
        """True when ``day`` falls on the calendar's weekend (whether or not it is a make-up workday).

        :raises NotAvailable: when the calendar has no data for ``day``'s year
        """

    @abstractmethod
    def day_off(self, day: date) -> DayOff | None:
        """``None`` when ``day`` is a working day, else why not.

        :raises NotAvailable: when the calendar has no data for ``day``'s year
        """

    def workday_note(self, day: date) -> str | None:
        """Why ``day`` is a working day although it is a weekend day (a make-up workday), else None.

        :raises NotAvailable: when the calendar has no data for ``day``'s year
        """
        return None

    def is_workday(self, day: date) -> bool:
        """True when ``day`` is a working day.

        :raises NotAvailable: when the calendar has no data for ``day``'s year
        """
        return self.day_off(day) is None

    def describe(self) -> str:
        return f"{self.name} calendar"


def _weekend_day(day: date) -> DayOff:
    return DayOff(_DAY_NAMES[day.weekday()], holiday=False)


@dataclass(frozen=True, slots=True)
class WeekdaysCalendar(Calendar):
    """Monday to Friday are workdays; there are no holidays."""

    @property
    def name(self) -> str:
        return "weekdays"

    def is_weekend(self, day: date) -> bool:
        return day.weekday() in _SAT_SUN

    def day_off(self, day: date) -> DayOff | None:
        return _weekend_day(day) if day.weekday() in _SAT_SUN else None

    def describe(self) -> str:
        return "Mon–Fri"


@dataclass(frozen=True, slots=True)
class _YearData:
    holidays: Mapping[date, str]
    weekend_workdays: frozenset[date]
    weekend: frozenset[int]


@lru_cache(maxsize=512)
def _year_data(country: str, subdiv: str | None, year: int) -> _YearData:
    """One year of a country's holidays, frozen (the library object itself is mutable)."""
    # The next year too: a notice may declare a workday in the year before its holiday.
    lib = _library(country, subdiv, years=(year, year + 1))
    if not lib.start_year <= year <= lib.end_year:
        raise NotAvailable(f"holiday data for {country} in {year}",
                           f"the holidays library covers {lib.start_year}–{lib.end_year}")
    days = {day: name for day, name in lib.items() if day.year == year}
    workdays = frozenset(d for d in getattr(lib, "weekend_workdays", ()) if d.year == year)
    return _YearData(days, workdays, frozenset(lib.weekend))


def _library(country: str, subdiv: str | None, years: tuple[int, ...] = ()) -> Any:
    language = "en_US" if "en_US" in holidays.list_localized_countries().get(country, ()) else None
    return holidays.country_holidays(country, subdiv=subdiv, years=years, language=language)


@dataclass(frozen=True, slots=True)
class HolidaysCalendar(Calendar):
    """A country's public holidays from the ``holidays`` library, with that country's weekend."""

    country: str
    subdiv: str | None = None

    @property
    def name(self) -> str:
        suffix = f"-{self.subdiv}" if self.subdiv else ""
        return f"holidays:{self.country}{suffix}"

    def is_weekend(self, day: date) -> bool:
        return day.weekday() in self._data(day.year).weekend

    def day_off(self, day: date) -> DayOff | None:
        data = self._data(day.year)
        if day in data.holidays:
            return DayOff(data.holidays[day], holiday=True)
        if day.weekday() in data.weekend and day not in data.weekend_workdays:
            return _weekend_day(day)
        return None

    def workday_note(self, day: date) -> str | None:
        if day in self._data(day.year).weekend_workdays:
            return f"{day.isoformat()} ({_DAY_NAMES[day.weekday()]}) is a make-up workday in {self.name}"
        return None

    def _data(self, year: int) -> _YearData:
        return _year_data(self.country, self.subdiv, year)


@dataclass(frozen=True, slots=True)
class ChinaCalendar(Calendar):
    """Mainland China: statutory holidays and make-up workdays from the State Council's notices."""

    @property
    def name(self) -> str:
        return "CN"

    def is_weekend(self, day: date) -> bool:
        return day.weekday() in _SAT_SUN

    def day_off(self, day: date) -> DayOff | None:
        return _CN.day_off(self._covered(day))

    def workday_note(self, day: date) -> str | None:
        note = _CN.workday_note(self._covered(day))
        return None if note is None else note.replace("holidays:CN", "CN")

    @staticmethod
    def _covered(day: date) -> date:
        last = cn_last_year()
        if not CN_FIRST_YEAR <= day.year <= last:
            raise NotAvailable(
                f"calendar 'CN' for {day.year}",
                f"covered: {CN_FIRST_YEAR}–{last}; the State Council publishes a year's holidays "
                "and make-up workdays each November, and a newer 'holidays' library carries them",
            )
        return day


_CN = HolidaysCalendar("CN")


@dataclass(frozen=True, slots=True)
class AdjustedCalendar(Calendar):
    """A calendar with per-trigger extra holidays and extra workdays (they win over the base)."""

    base: Calendar
    extra_holidays: frozenset[date]
    extra_workdays: frozenset[date]

    @property
    def name(self) -> str:
        return self.base.name

    def is_weekend(self, day: date) -> bool:
        return self.base.is_weekend(day)

    def day_off(self, day: date) -> DayOff | None:
        if day in self.extra_holidays:
            return DayOff("extra_holidays", holiday=True)
        if day in self.extra_workdays:
            return None
        return self.base.day_off(day)

    def workday_note(self, day: date) -> str | None:
        if day in self.extra_workdays:
            return f"{day.isoformat()} ({_DAY_NAMES[day.weekday()]}) is a workday (extra_workdays)"
        return None if day in self.extra_holidays else self.base.workday_note(day)

    def describe(self) -> str:
        extras = []
        if self.extra_holidays:
            extras.append(f"{len(self.extra_holidays)} extra holiday(s)")
        if self.extra_workdays:
            extras.append(f"{len(self.extra_workdays)} extra workday(s)")
        return f"{self.base.describe()} + " + " + ".join(extras) if extras else self.base.describe()


def parse_calendar(value: Any, field: str = "calendar") -> Calendar:
    """A :class:`Calendar` from its spec value.

    :raises InvalidTrigger: naming ``field`` when the value is not a known calendar
    """
    if value == "weekdays":
        return WeekdaysCalendar()
    if value == "CN":
        return ChinaCalendar()
    match = _HOLIDAYS_SPEC.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidTrigger(field, value, _CALENDAR_EXPECTED)
    country, subdiv = match.group(1), match.group(2)
    problem = _unknown_country(country, subdiv)
    if problem:
        expected = f"a country and subdivision the holidays library knows ({problem})"
        raise InvalidTrigger(field, value, expected)
    return HolidaysCalendar(country, subdiv)


@lru_cache(maxsize=256)
def _unknown_country(country: str, subdiv: str | None) -> str | None:
    """Why the holidays library refuses ``country``/``subdiv``, or None when it knows them."""
    try:
        _library(country, subdiv)
    except NotImplementedError as exc:
        return str(exc)
    return None


def parse_date_list(value: Any, field: str) -> frozenset[date]:
    """A set of dates from a list of ISO ``YYYY-MM-DD`` strings.

    :raises InvalidTrigger: naming ``field[i]`` for the first bad element
    """
    if not isinstance(value, list):
        raise InvalidTrigger(field, value, "a list of ISO dates such as ['2026-10-09']")
    days: set[date] = set()
    for index, item in enumerate(value):
        days.add(_parse_date(item, f"{field}[{index}]"))
    return frozenset(days)


def _parse_date(value: Any, field: str) -> date:
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise InvalidTrigger(field, value, "an ISO date YYYY-MM-DD such as '2026-10-09'")
