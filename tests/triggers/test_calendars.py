"""Workday calendars: CN against the State Council's notices, holidays:<COUNTRY>, extras."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from actwheel.errors import InvalidTrigger, NotAvailable
from actwheel.triggers.calendars import (
    CN_FIRST_YEAR,
    AdjustedCalendar,
    ChinaCalendar,
    DayOff,
    HolidaysCalendar,
    WeekdaysCalendar,
    cn_last_year,
    parse_calendar,
    parse_date_list,
)


def _span(first: str, last: str) -> set[date]:
    day, end = date.fromisoformat(first), date.fromisoformat(last)
    days = set()
    while day <= end:
        days.add(day)
        day += timedelta(days=1)
    return days


# 国务院办公厅关于2026年部分节假日安排的通知 (国办发明电〔2025〕7号, 2025-11-04), transcribed here
# independently of the holidays library so that a wrong library release fails this test.
CN_2026_OFF = (
    _span("2026-01-01", "2026-01-03") | _span("2026-02-15", "2026-02-23")
    | _span("2026-04-04", "2026-04-06") | _span("2026-05-01", "2026-05-05")
    | _span("2026-06-19", "2026-06-21") | _span("2026-09-25", "2026-09-27")
    | _span("2026-10-01", "2026-10-07")
)
CN_2026_MADE_UP = {date(2026, 1, 4), date(2026, 2, 14), date(2026, 2, 28), date(2026, 5, 9),
                   date(2026, 9, 20), date(2026, 10, 10)}
# 国务院办公厅关于2025年部分节假日安排的通知 (国办发明电〔2024〕12号, 2024-11-12).
CN_2025_OFF = (
    {date(2025, 1, 1)} | _span("2025-01-28", "2025-02-04") | _span("2025-04-04", "2025-04-06")
    | _span("2025-05-01", "2025-05-05") | _span("2025-05-31", "2025-06-02")
    | _span("2025-10-01", "2025-10-08")
)
CN_2025_MADE_UP = {date(2025, 1, 26), date(2025, 2, 8), date(2025, 4, 27), date(2025, 9, 28),
                   date(2025, 10, 11)}


@pytest.mark.parametrize(
    ("year", "off", "made_up"), [(2025, CN_2025_OFF, CN_2025_MADE_UP), (2026, CN_2026_OFF, CN_2026_MADE_UP)]
)
def test_cn_matches_the_state_council_notice_on_every_day(
    year: int, off: set[date], made_up: set[date]
) -> None:
    calendar = ChinaCalendar()
    wrong = []
    for day in sorted(_span(f"{year}-01-01", f"{year}-12-31")):
        expected = day in made_up or (day.weekday() < 5 and day not in off)
        if calendar.is_workday(day) is not expected:
            wrong.append(day)

    assert wrong == []


def test_cn_make_up_saturday_is_a_workday_with_a_note() -> None:
    calendar = ChinaCalendar()

    assert calendar.is_workday(date(2026, 2, 14))
    assert calendar.workday_note(date(2026, 2, 14)) == "2026-02-14 (Saturday) is a make-up workday in CN"
    assert calendar.workday_note(date(2026, 2, 13)) is None
    assert calendar.is_weekend(date(2026, 2, 14))


def test_cn_holiday_names_the_holiday() -> None:
    off = ChinaCalendar().day_off(date(2026, 10, 1))

    assert off == DayOff("National Day", holiday=True)
    assert str(off) == "a holiday (National Day)"
    assert str(ChinaCalendar().day_off(date(2026, 10, 11))) == "a Sunday"


@pytest.mark.parametrize("day", [date(cn_last_year() + 1, 1, 4), date(CN_FIRST_YEAR - 1, 6, 1)])
def test_cn_refuses_years_without_a_notice(day: date) -> None:
    with pytest.raises(NotAvailable, match=f"calendar 'CN' for {day.year}"):
        ChinaCalendar().is_workday(day)


def test_cn_covers_2025_and_2026() -> None:
    assert CN_FIRST_YEAR <= 2025
    assert cn_last_year() >= 2026


def test_weekdays_calendar() -> None:
    calendar = WeekdaysCalendar()

    assert [calendar.is_workday(date(2026, 10, d)) for d in range(1, 8)] == [True, True, False, False,
                                                                               True, True, True]
    assert calendar.describe() == "Mon–Fri"


def test_holidays_us() -> None:
    calendar = parse_calendar("holidays:US")

    assert calendar == HolidaysCalendar("US")
    assert calendar.day_off(date(2026, 11, 26)) == DayOff("Thanksgiving Day", holiday=True)
    assert not calendar.is_workday(date(2026, 7, 3))  # Independence Day (observed), a Friday
    assert calendar.is_workday(date(2026, 7, 2))


def test_holidays_subdivision() -> None:
    bavaria, germany = parse_calendar("holidays:DE-BY"), parse_calendar("holidays:DE")

    assert not bavaria.is_workday(date(2026, 1, 6))  # Epiphany, Bavaria only
    assert germany.is_workday(date(2026, 1, 6))
    assert bavaria.name == "holidays:DE-BY"


def test_holidays_country_weekend() -> None:
    israel = parse_calendar("holidays:IL")

    assert not israel.is_workday(date(2026, 1, 9))  # Friday
    assert israel.is_workday(date(2026, 1, 11))  # Sunday
    assert israel.is_weekend(date(2026, 1, 10))


def test_holidays_cn_via_library_knows_make_up_days_too() -> None:
    assert parse_calendar("holidays:CN").is_workday(date(2026, 2, 28))


def test_extras_override_the_base() -> None:
    extra_holidays, extra_workdays = frozenset({date(2026, 9, 30)}), frozenset({date(2026, 10, 7)})
    calendar = AdjustedCalendar(ChinaCalendar(), extra_holidays, extra_workdays)

    assert calendar.day_off(date(2026, 9, 30)) == DayOff("extra_holidays", holiday=True)
    assert calendar.is_workday(date(2026, 10, 7))
    assert calendar.workday_note(date(2026, 10, 7)) == "2026-10-07 (Wednesday) is a workday (extra_workdays)"
    assert calendar.workday_note(date(2026, 2, 14)) == "2026-02-14 (Saturday) is a make-up workday in CN"
    assert calendar.name == "CN"
    assert calendar.describe() == "CN calendar + 1 extra holiday(s) + 1 extra workday(s)"


@pytest.mark.parametrize(
    "value",
    ["cn", "CN ", "weekday", "holidays:", "holidays:XX", "holidays:DE-ZZ", "holidays:us", 5, None, ["CN"]],
)
def test_invalid_calendars_are_refused(value: Any) -> None:
    with pytest.raises(InvalidTrigger) as caught:
        parse_calendar(value)

    assert caught.value.field == "calendar"
    assert caught.value.value == value


def test_date_lists() -> None:
    assert parse_date_list(["2026-10-09", "2026-10-09", "2026-01-02"], "extra_holidays") == frozenset(
        {date(2026, 10, 9), date(2026, 1, 2)})


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("2026-10-09", "extra_holidays"),
        (["2026-10-09", "2026-13-01"], "extra_holidays[1]"),
        (["2026-10-09", "x", "2026-10-10"], "extra_holidays[1]"),
        ([20261009], "extra_holidays[0]"),
        (["2026-10-09T00:00"], "extra_holidays[0]"),
    ],
)
def test_invalid_date_lists_name_the_element(value: Any, field: str) -> None:
    with pytest.raises(InvalidTrigger) as caught:
        parse_date_list(value, "extra_holidays")

    assert caught.value.field == field
