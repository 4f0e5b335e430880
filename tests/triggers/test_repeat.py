"""The ``repeat`` trigger: every kind, calendars and on_holiday moves, windows, invalid input."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from actwheel.errors import InvalidTrigger, NotAvailable
from actwheel.triggers import Fire, RepeatTrigger, parse, preview, preview_fires

SH = ZoneInfo("Asia/Shanghai")
NY = ZoneInfo("America/New_York")


def _repeat(**fields: Any) -> dict[str, Any]:
    return {"type": "repeat", **fields}


def _cn(**fields: Any) -> dict[str, Any]:
    return _repeat(timezone="Asia/Shanghai", calendar="CN", **fields)


def _days(fires: list[datetime] | list[Fire]) -> list[str]:
    return [(f.at if isinstance(f, Fire) else f).strftime("%Y-%m-%d") for f in fires]


def _sh(*args: int) -> datetime:
    return datetime(*args, tzinfo=SH)  # type: ignore[misc]


# ---------------------------------------------------------------- NONE


def test_none_with_offset_fires_once() -> None:
    spec = _repeat(repeat="NONE", execute_date_time="2026-10-01T09:00:00+08:00", timezone="Asia/Shanghai")

    fires = preview(spec, after=_sh(2026, 1, 1), count=5)

    assert fires == [_sh(2026, 10, 1, 9)]
    assert fires[0].isoformat() == "2026-10-01T09:00:00+08:00"
    assert parse(spec).next_after(_sh(2026, 10, 1, 9)) is None


def test_none_naive_is_a_wall_time_in_the_zone() -> None:
    spec = _repeat(repeat="NONE", execute_date_time="2026-07-04T12:00:00", timezone="America/New_York")

    assert preview(spec, after=datetime(2026, 1, 1, tzinfo=UTC), count=2) == [
        datetime(2026, 7, 4, 16, tzinfo=UTC)
    ]


def test_none_naive_in_a_dst_gap_shifts_by_default() -> None:
    spec = _repeat(repeat="NONE", execute_date_time="2026-03-08T02:30", timezone="America/New_York")

    fires = preview_fires(spec, after=datetime(2026, 1, 1, tzinfo=UTC), count=2)

    assert [f.at.isoformat() for f in fires] == ["2026-03-08T03:00:00-04:00"]
    assert fires[0].note is not None
    assert "DST gap" in fires[0].note


def test_none_defaults_to_utc() -> None:
    trigger = parse(_repeat(repeat="NONE", execute_date_time="2026-10-01T09:00:00"))

    assert trigger.zone.key == "UTC"
    assert trigger.next_after(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(2026, 10, 1, 9, tzinfo=UTC)


# ---------------------------------------------------------------- DAILY / WEEKLY


def test_daily_with_seconds_and_window() -> None:
    spec = _repeat(
        repeat="DAILY",
        execute_time="09:30:15",
        timezone="Asia/Shanghai",
        start_date_time="2026-05-02T00:00:00",
        end_date_time="2026-05-04T09:30:15+08:00",
    )

    fires = preview(spec, after=_sh(2026, 1, 1), count=10)

    assert [f.isoformat() for f in fires] == [
        "2026-05-02T09:30:15+08:00",
        "2026-05-03T09:30:15+08:00",
        "2026-05-04T09:30:15+08:00",
    ]


def test_end_date_time_is_inclusive_and_then_none() -> None:
    trigger = parse(_repeat(repeat="DAILY", execute_time="09:00", end_date_time="2026-05-04T09:00:00Z"))

    assert trigger.next_after(datetime(2026, 5, 3, 10, tzinfo=UTC)) == datetime(2026, 5, 4, 9, tzinfo=UTC)
    assert trigger.next_after(datetime(2026, 5, 4, 9, tzinfo=UTC)) is None
    assert trigger.next_after(datetime(2030, 1, 1, tzinfo=UTC)) is None


def test_weekly_names_and_iso_numbers() -> None:
    by_name = parse(_repeat(repeat="WEEKLY", weekdays=["fri", "MON"], execute_time="08:00"))
    by_number = parse(_repeat(repeat="WEEKLY", weekdays=[5, 1, 1], execute_time="08:00"))

    fires = preview(by_name, after=datetime(2026, 6, 1, 8, tzinfo=UTC), count=4)

    assert by_name == by_number
    assert [f.strftime("%a %d") for f in fires] == ["Fri 05", "Mon 08", "Fri 12", "Mon 15"]
    assert by_name.describe() == "every MON, FRI at 08:00, UTC"


def test_weekly_with_calendar_skips_a_holiday_monday() -> None:
    spec = _cn(repeat="WEEKLY", weekdays=["MON"], execute_time="10:00")

    fires = preview_fires(spec, after=_sh(2026, 9, 27), count=3)

    assert _days(fires) == ["2026-09-28", "2026-10-12", "2026-10-19"]
    assert fires[1].note == "skipped holidays in CN: 2026-10-05 (National Day (observed))"


# ---------------------------------------------------------------- MONTHLY


def test_monthly_31_clamps_to_short_months_and_february() -> None:
    spec = _repeat(repeat="MONTHLY", month_day=31, execute_time="10:00")

    fires = preview_fires(spec, after=datetime(2027, 12, 1, tzinfo=UTC), count=6)

    assert _days(fires) == [
        "2027-12-31",
        "2028-01-31",
        "2028-02-29",
        "2028-03-31",
        "2028-04-30",
        "2028-05-31",
    ]
    assert fires[2].note == "month_day 31: 2028-02 has 29 days; fired on its last day"
    assert fires[4].note == "month_day 31: 2028-04 has 30 days; fired on its last day"
    assert fires[0].note is None


def test_monthly_30_in_a_common_february() -> None:
    fires = preview(
        _repeat(repeat="MONTHLY", month_day=30, execute_time="10:00"),
        after=datetime(2026, 1, 31, tzinfo=UTC),
        count=2,
    )

    assert _days(fires) == ["2026-02-28", "2026-03-30"]


def test_monthly_last_day() -> None:
    fires = preview_fires(
        _repeat(repeat="MONTHLY", month_day=-1, execute_time="23:00"),
        after=datetime(2028, 1, 31, 23, tzinfo=UTC),
        count=3,
    )

    assert _days(fires) == ["2028-02-29", "2028-03-31", "2028-04-30"]
    assert all(f.note is None for f in fires)


def test_monthly_payroll_previous_workday_in_cn() -> None:
    spec = _cn(repeat="MONTHLY", month_day=25, execute_time="10:00", on_holiday="previous_workday")

    fires = preview_fires(spec, after=_sh(2026, 1, 1), count=12)

    assert _days(fires) == [
        "2026-01-23",
        "2026-02-25",
        "2026-03-25",
        "2026-04-24",
        "2026-05-25",
        "2026-06-25",
        "2026-07-24",
        "2026-08-25",
        "2026-09-24",
        "2026-10-23",
        "2026-11-25",
        "2026-12-25",
    ]
    assert fires[8].note == "2026-09-25 is a holiday (Mid-Autumn Festival) in CN; moved to 2026-09-24"
    assert fires[0].note == "2026-01-25 is a Sunday (not a workday in CN); moved to 2026-01-23"
    assert fires[1].note is None


def test_monthly_next_workday_in_cn() -> None:
    spec = _cn(repeat="MONTHLY", month_day=1, execute_time="10:00", on_holiday="next_workday")

    fires = preview_fires(spec, after=_sh(2026, 9, 2), count=2)

    assert _days(fires) == ["2026-10-08", "2026-11-02"]
    assert fires[0].note == "2026-10-01 is a holiday (National Day) in CN; moved to 2026-10-08"


def test_a_move_is_found_from_inside_the_holiday() -> None:
    # Asked from 2026-10-05, the fire moved from 2026-10-01 is still ahead.
    spec = _cn(repeat="MONTHLY", month_day=1, execute_time="10:00", on_holiday="next_workday")

    assert parse(spec).next_after(_sh(2026, 10, 5)) == _sh(2026, 10, 8, 10)


def test_monthly_skip_on_holiday() -> None:
    spec = _cn(repeat="MONTHLY", month_day=1, execute_time="10:00")  # on_holiday defaults to skip

    fires = preview_fires(spec, after=_sh(2026, 9, 2), count=1)

    assert _days(fires) == ["2026-12-01"]  # 10-01 National Day, 11-01 a Sunday
    assert fires[0].note == "skipped holidays in CN: 2026-10-01 (National Day)"
    with pytest.raises(NotAvailable, match="calendar 'CN' for 2027"):
        parse(spec).next_after(_sh(2026, 12, 1, 10))


# ---------------------------------------------------------------- DAILY with moves: merging


def test_daily_next_workday_merges_a_holiday_week_into_one_fire() -> None:
    spec = _cn(repeat="DAILY", execute_time="10:00", on_holiday="next_workday")

    fires = preview_fires(spec, after=_sh(2026, 9, 29), count=5)

    assert _days(fires) == ["2026-09-29", "2026-09-30", "2026-10-08", "2026-10-09", "2026-10-10"]
    assert fires[2].note is not None
    assert fires[2].note.endswith("are days off in CN; moved to 2026-10-08 as one fire")
    assert "2026-10-01 (National Day)" in fires[2].note
    assert fires[4].note == "2026-10-10 (Saturday) is a make-up workday in CN"


def test_daily_previous_workday_merges_into_the_fire_before() -> None:
    spec = _cn(repeat="DAILY", execute_time="10:00", on_holiday="previous_workday")

    fires = preview_fires(spec, after=_sh(2026, 9, 29), count=3)

    assert _days(fires) == ["2026-09-29", "2026-09-30", "2026-10-08"]
    assert fires[1].note is not None
    assert "moved to 2026-09-30 as one fire" in fires[1].note


def test_daily_calendar_skip() -> None:
    spec = _cn(repeat="DAILY", execute_time="10:00", on_holiday="skip")

    fires = preview_fires(spec, after=_sh(2026, 9, 30, 11), count=1)

    assert _days(fires) == ["2026-10-08"]
    assert fires[0].note is not None
    assert fires[0].note.startswith("skipped holidays in CN: 2026-10-01")


@pytest.mark.parametrize("rule", ["skip", "next_workday", "previous_workday"])
@pytest.mark.parametrize(
    "kind",
    [
        {"repeat": "DAILY"},
        {"repeat": "MONTHLY", "month_day": 1},
        {"repeat": "WEEKLY", "weekdays": ["MON", "THU"]},
    ],
)
def test_moved_fires_are_strictly_increasing_and_on_workdays(rule: str, kind: dict[str, Any]) -> None:
    # The window ends inside the CN data: the schedule ends instead of asking for 2027.
    spec = _cn(execute_time="10:00", on_holiday=rule, end_date_time="2026-12-31T23:59:59+08:00", **kind)

    fires = preview(spec, after=_sh(2025, 1, 1), count=800)

    instants = [f.astimezone(UTC) for f in fires]
    assert instants == sorted(set(instants))
    workdays = _cn(repeat="WORKDAYS", execute_time="10:00", end_date_time="2026-12-31T23:59:59+08:00")
    every_workday = {f.astimezone(UTC) for f in preview(workdays, after=_sh(2025, 1, 1), count=600)}
    assert set(instants) <= every_workday
    if kind["repeat"] == "DAILY":  # whatever the rule, a daily run lands once on every workday
        assert set(instants) == every_workday


# ---------------------------------------------------------------- WORKDAYS


def test_workdays_default_calendar_is_mon_to_fri() -> None:
    spec = _repeat(repeat="WORKDAYS", execute_time="09:30", timezone="Asia/Shanghai")

    fires = preview(spec, after=_sh(2026, 2, 12), count=4)

    assert [f.strftime("%a") for f in fires] == ["Thu", "Fri", "Mon", "Tue"]
    assert parse(spec).describe() == "every workday (Mon–Fri) at 09:30, Asia/Shanghai"


def test_workdays_cn_2026_spring_festival_and_make_up_saturdays() -> None:
    spec = _cn(repeat="WORKDAYS", execute_time="09:30")

    fires = preview_fires(spec, after=_sh(2026, 2, 12), count=5)

    assert _days(fires) == ["2026-02-12", "2026-02-13", "2026-02-14", "2026-02-24", "2026-02-25"]
    assert fires[2].note == "2026-02-14 (Saturday) is a make-up workday in CN"
    assert fires[3].note is not None
    assert fires[3].note.startswith("skipped holidays in CN: 2026-02-16 (Chinese New Year's Eve)")
    feb_28 = parse(spec).next_after(_sh(2026, 2, 27, 10))
    assert feb_28 == _sh(2026, 2, 28, 9, 30)  # a Saturday, an official workday


def test_workdays_cn_sunday_make_up_day_in_january_2026() -> None:
    fires = preview(_cn(repeat="WORKDAYS", execute_time="09:30"), after=_sh(2025, 12, 31, 10), count=2)

    assert _days(fires) == ["2026-01-04", "2026-01-05"]  # Jan 1-3 off; Sunday Jan 4 works


def test_workdays_cn_2025_national_day() -> None:
    fires = preview(_cn(repeat="WORKDAYS", execute_time="09:30"), after=_sh(2025, 9, 26, 10), count=4)

    assert _days(fires) == ["2025-09-28", "2025-09-29", "2025-09-30", "2025-10-09"]


def test_workdays_cn_fires_every_covered_workday_of_2026() -> None:
    spec = _cn(repeat="WORKDAYS", execute_time="09:30", end_date_time="2026-12-31T09:30:00+08:00")

    fires = preview(spec, after=_sh(2026, 1, 1), count=400)

    assert len(fires) == 248  # 261 Mon–Fri, minus 19 weekday holidays, plus 6 make-up days
    assert fires[-1] == _sh(2026, 12, 31, 9, 30)


def test_workdays_extra_holidays_and_workdays() -> None:
    spec = _cn(
        repeat="WORKDAYS", execute_time="09:30", extra_holidays=["2026-09-30"], extra_workdays=["2026-10-03"]
    )

    fires = preview_fires(spec, after=_sh(2026, 9, 29, 10), count=2)

    assert _days(fires) == ["2026-10-03", "2026-10-08"]
    assert fires[0].note == (
        "skipped holidays in CN: 2026-09-30 (extra_holidays), 2026-10-01 (National Day), "
        "2026-10-02 (National Day); 2026-10-03 (Saturday) is a workday (extra_workdays)"
    )


def test_workdays_holidays_library_calendar() -> None:
    spec = _repeat(
        repeat="WORKDAYS", execute_time="09:00", calendar="holidays:US", timezone="America/New_York"
    )

    fires = preview_fires(spec, after=datetime(2026, 11, 25, 15, tzinfo=UTC), count=2)

    assert _days(fires) == ["2026-11-27", "2026-11-30"]
    assert fires[0].note == "skipped holidays in holidays:US: 2026-11-26 (Thanksgiving Day)"


def test_workdays_past_the_cn_data_is_not_available_not_a_guess() -> None:
    trigger = parse(_cn(repeat="WORKDAYS", execute_time="09:30"))

    assert trigger.next_after(_sh(2026, 12, 30, 10)) == _sh(2026, 12, 31, 9, 30)
    with pytest.raises(NotAvailable, match="covered: 2001"):
        trigger.next_after(_sh(2026, 12, 31, 10))


def test_describe_workdays_cn() -> None:
    trigger = parse(_cn(repeat="WORKDAYS", execute_time="09:30"))

    assert trigger.describe() == "every workday (CN calendar) at 09:30, Asia/Shanghai"


# ---------------------------------------------------------------- CUSTOM


def test_custom_minutes_counts_elapsed_time_from_the_anchor() -> None:
    spec = _repeat(
        repeat="CUSTOM",
        interval=90,
        time_unit="MINUTES",
        start_date_time="2026-01-01T08:00:00+08:00",
        timezone="Asia/Shanghai",
    )

    fires = preview(spec, after=_sh(2026, 1, 1, 9), count=3)

    assert [f.strftime("%H:%M") for f in fires] == ["09:30", "11:00", "12:30"]
    assert preview(spec, after=_sh(2025, 1, 1), count=1) == [_sh(2026, 1, 1, 8)]


def test_custom_seconds() -> None:
    spec = _repeat(repeat="CUSTOM", interval=7, time_unit="SECONDS", start_date_time="2026-01-01T00:00:00Z")

    fires = preview(spec, after=datetime(2026, 1, 1, 0, 0, 14, tzinfo=UTC), count=2)

    assert [f.second for f in fires] == [21, 28]


def test_custom_hours_keep_real_intervals_across_dst() -> None:
    spec = _repeat(
        repeat="CUSTOM",
        interval=1,
        time_unit="HOURS",
        start_date_time="2026-11-01T00:00:00",
        timezone="America/New_York",
    )

    fires = preview(spec, after=datetime(2026, 11, 1, 3, tzinfo=UTC), count=4)

    assert [f.isoformat() for f in fires] == [
        "2026-11-01T00:00:00-04:00",
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T02:00:00-05:00",
    ]
    utc = [f.astimezone(UTC) for f in fires]
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(utc))


def test_custom_days_are_wall_clock() -> None:
    spec = _repeat(
        repeat="CUSTOM",
        interval=2,
        time_unit="DAYS",
        start_date_time="2026-03-05T09:00:00",
        timezone="America/New_York",
    )

    fires = preview(spec, after=datetime(2026, 3, 1, tzinfo=UTC), count=3)

    assert [f.isoformat() for f in fires] == [
        "2026-03-05T09:00:00-05:00",
        "2026-03-07T09:00:00-05:00",
        "2026-03-09T09:00:00-04:00",
    ]


def test_custom_weeks() -> None:
    spec = _repeat(repeat="CUSTOM", interval=2, time_unit="WEEKS", start_date_time="2026-01-05T09:00:00Z")

    fires = preview(spec, after=datetime(2026, 1, 6, tzinfo=UTC), count=2)

    assert _days(fires) == ["2026-01-19", "2026-02-02"]


def test_custom_months_clamp_without_drifting() -> None:
    spec = _repeat(
        repeat="CUSTOM",
        interval=1,
        time_unit="MONTHS",
        start_date_time="2028-01-31T08:00:00+08:00",
        timezone="Asia/Shanghai",
    )

    fires = preview_fires(spec, after=_sh(2028, 1, 1), count=4)

    assert _days(fires) == ["2028-01-31", "2028-02-29", "2028-03-31", "2028-04-30"]
    assert fires[1].note == "2028-02 has no day 31; fired on its last day"


def test_custom_months_with_interval_and_end() -> None:
    spec = _repeat(
        repeat="CUSTOM",
        interval=5,
        time_unit="MONTHS",
        start_date_time="2026-01-15T00:00:00Z",
        end_date_time="2027-06-15T00:00:00Z",
    )

    assert _days(preview(spec, after=datetime(2026, 5, 1, tzinfo=UTC), count=9)) == [
        "2026-06-15",
        "2026-11-15",
        "2027-04-15",
    ]


def test_custom_describe() -> None:
    trigger = parse(
        _repeat(
            repeat="CUSTOM",
            interval=15,
            time_unit="MINUTES",
            start_date_time="2026-01-01T00:00:00+08:00",
            timezone="Asia/Shanghai",
        )
    )

    assert trigger.describe() == "every 15 minutes from 2026-01-01T00:00:00+08:00, Asia/Shanghai"


# ---------------------------------------------------------------- description and round trip


@pytest.mark.parametrize(
    "spec",
    [
        _repeat(repeat="NONE", execute_date_time="2026-10-01T09:00:00", timezone="Asia/Shanghai"),
        _repeat(repeat="NONE", execute_date_time="2026-10-01T09:00:00+08:00"),
        _repeat(repeat="DAILY", execute_time="09:30", dst="quartz", start_date_time="2026-01-01T00:00:00"),
        _repeat(
            repeat="WEEKLY", execute_time="09:30:01", weekdays=[7, "SAT"], dst={"gap": "skip", "fold": "both"}
        ),
        _cn(
            repeat="MONTHLY",
            execute_time="09:30",
            month_day=-1,
            on_holiday="next_workday",
            extra_holidays=["2026-01-30"],
            end_date_time="2027-01-01T00:00:00+08:00",
        ),
        _cn(repeat="WORKDAYS", execute_time="09:30", extra_workdays=["2026-10-03"]),
        _repeat(repeat="WORKDAYS", execute_time="09:30", extra_holidays=["2026-10-02"]),
        _repeat(repeat="CUSTOM", interval=3, time_unit="MONTHS", start_date_time="2026-01-31T08:00:00"),
        _repeat(repeat="CUSTOM", interval=3, time_unit="HOURS", start_date_time="2026-01-31T08:00:00"),
    ],
)
def test_round_trip(spec: dict[str, Any]) -> None:
    trigger = parse(spec)

    again = parse(trigger.to_spec())

    assert again == trigger
    assert again.to_spec() == trigger.to_spec()
    assert isinstance(trigger, RepeatTrigger)


def test_describe_moves_and_window() -> None:
    trigger = parse(
        _cn(
            repeat="MONTHLY",
            month_day=31,
            execute_time="10:00",
            on_holiday="previous_workday",
            end_date_time="2026-12-31T23:59:59+08:00",
            dst="quartz",
        )
    )

    assert trigger.describe() == (
        "monthly on day 31 (the last day in shorter months) at 10:00, days off (CN calendar) move to the "
        "previous workday, until 2026-12-31T23:59:59+08:00, dst=quartz, Asia/Shanghai"
    )


# ---------------------------------------------------------------- invalid input, every field

_DAILY = {"type": "repeat", "repeat": "DAILY", "execute_time": "09:30"}


@pytest.mark.parametrize(
    ("spec", "field", "hint"),
    [
        ({"type": "repeat"}, "repeat", "'DAILY'"),
        ({**_DAILY, "repeat": "daily"}, "repeat", "'WORKDAYS'"),
        ({**_DAILY, "repeat": "HOURLY"}, "repeat", "'CUSTOM'"),
        ({**_DAILY, "exeucte_time": "09:30"}, "exeucte_time", "no such field"),
        ({**_DAILY, "weekdays": ["MON"]}, "weekdays", "no such field for repeat=DAILY"),
        ({"type": "repeat", "repeat": "DAILY"}, "execute_time", "requires execute_time"),
        ({**_DAILY, "execute_time": "9:30"}, "execute_time", "'HH:MM'"),
        ({**_DAILY, "execute_time": "24:00"}, "execute_time", "'HH:MM'"),
        ({**_DAILY, "execute_time": "09:60"}, "execute_time", "'HH:MM'"),
        ({**_DAILY, "execute_time": "09:30:60"}, "execute_time", "'HH:MM'"),
        ({**_DAILY, "execute_time": 930}, "execute_time", "'HH:MM'"),
        ({**_DAILY, "timezone": "Asia/Beijing"}, "timezone", "IANA"),
        ({**_DAILY, "timezone": ""}, "timezone", "IANA"),
        ({**_DAILY, "dst": "summer"}, "dst", "'quartz'"),
        ({**_DAILY, "dst": {"gap": "later"}}, "dst.gap", "'shift'"),
        ({**_DAILY, "dst": {"fold": "last"}}, "dst.fold", "'both'"),
        ({**_DAILY, "dst": {"gaps": "skip"}}, "dst.gaps", "only 'gap' and 'fold'"),
        ({**_DAILY, "start_date_time": "2026-01-01"}, "start_date_time", "ISO-8601"),
        (
            {**_DAILY, "start_date_time": "2026-03-08T02:30", "timezone": "America/New_York"},
            "start_date_time",
            "DST gap",
        ),
        ({**_DAILY, "end_date_time": "tomorrow"}, "end_date_time", "ISO-8601"),
        ({**_DAILY, "end_date_time": "2026-01-01T09:00+09:00[Asia/Tokyo]"}, "end_date_time", "(UTC)"),
        (
            {**_DAILY, "start_date_time": "2026-02-01T00:00Z", "end_date_time": "2026-01-01T00:00Z"},
            "end_date_time",
            "at or after start_date_time",
        ),
        ({**_DAILY, "calendar": "China"}, "calendar", "'CN'"),
        ({**_DAILY, "calendar": "holidays:XX"}, "calendar", "holidays library"),
        ({**_DAILY, "on_holiday": "next_workday"}, "on_holiday", "with a 'calendar'"),
        ({**_DAILY, "extra_holidays": ["2026-10-01"]}, "extra_holidays", "with a 'calendar'"),
        ({**_DAILY, "calendar": "CN", "on_holiday": "next"}, "on_holiday", "'next_workday'"),
        ({**_DAILY, "calendar": "CN", "extra_holidays": "2026-10-01"}, "extra_holidays", "list of ISO dates"),
        (
            {**_DAILY, "calendar": "CN", "extra_workdays": ["2026-10-01", "2026-10-32"]},
            "extra_workdays[1]",
            "YYYY-MM-DD",
        ),
        (
            {**_DAILY, "calendar": "CN", "extra_holidays": ["2026-10-09"], "extra_workdays": ["2026-10-09"]},
            "extra_workdays[0]",
            "not also listed in extra_holidays",
        ),
        ({"type": "repeat", "repeat": "WEEKLY", "execute_time": "09:30"}, "weekdays", "requires"),
        (
            {"type": "repeat", "repeat": "WEEKLY", "execute_time": "09:30", "weekdays": []},
            "weekdays",
            "non-empty",
        ),
        (
            {"type": "repeat", "repeat": "WEEKLY", "execute_time": "09:30", "weekdays": "MON"},
            "weekdays",
            "non-empty list",
        ),
        (
            {
                "type": "repeat",
                "repeat": "WEEKLY",
                "execute_time": "09:30",
                "weekdays": ["MON", "TUE", "MONDAY"],
            },
            "weekdays[2]",
            "1 = Monday",
        ),
        (
            {"type": "repeat", "repeat": "WEEKLY", "execute_time": "09:30", "weekdays": [0]},
            "weekdays[0]",
            "1..7",
        ),
        (
            {"type": "repeat", "repeat": "WEEKLY", "execute_time": "09:30", "weekdays": [1, 8]},
            "weekdays[1]",
            "1..7",
        ),
        (
            {"type": "repeat", "repeat": "WEEKLY", "execute_time": "09:30", "weekdays": [True]},
            "weekdays[0]",
            "1..7",
        ),
        ({"type": "repeat", "repeat": "MONTHLY", "execute_time": "09:30"}, "month_day", "requires"),
        ({"type": "repeat", "repeat": "MONTHLY", "execute_time": "09:30", "month_day": 0}, "month_day", "-1"),
        (
            {"type": "repeat", "repeat": "MONTHLY", "execute_time": "09:30", "month_day": 32},
            "month_day",
            "1..31",
        ),
        (
            {"type": "repeat", "repeat": "MONTHLY", "execute_time": "09:30", "month_day": -2},
            "month_day",
            "-1",
        ),
        (
            {"type": "repeat", "repeat": "MONTHLY", "execute_time": "09:30", "month_day": "1"},
            "month_day",
            "1..31",
        ),
        (
            {"type": "repeat", "repeat": "WORKDAYS", "execute_time": "09:30", "on_holiday": "skip"},
            "on_holiday",
            "no such field for repeat=WORKDAYS",
        ),
        ({"type": "repeat", "repeat": "NONE"}, "execute_date_time", "requires"),
        (
            {"type": "repeat", "repeat": "NONE", "execute_date_time": "2026-10-01"},
            "execute_date_time",
            "ISO-8601",
        ),
        (
            {
                "type": "repeat",
                "repeat": "NONE",
                "execute_date_time": "2026-10-01T09:00",
                "end_date_time": "2026-10-02T00:00Z",
            },
            "end_date_time",
            "no such field for repeat=NONE",
        ),
        (
            {
                "type": "repeat",
                "repeat": "NONE",
                "execute_date_time": "2026-10-01T09:00",
                "execute_time": "09:00",
            },
            "execute_time",
            "no such field",
        ),
        (
            {"type": "repeat", "repeat": "CUSTOM", "interval": 5, "time_unit": "MINUTES"},
            "start_date_time",
            "requires",
        ),
        (
            {
                "type": "repeat",
                "repeat": "CUSTOM",
                "time_unit": "MINUTES",
                "start_date_time": "2026-01-01T00:00",
            },
            "interval",
            "requires",
        ),
        (
            {
                "type": "repeat",
                "repeat": "CUSTOM",
                "interval": 0,
                "time_unit": "MINUTES",
                "start_date_time": "2026-01-01T00:00",
            },
            "interval",
            "from 1 to",
        ),
        (
            {
                "type": "repeat",
                "repeat": "CUSTOM",
                "interval": 1.5,
                "time_unit": "MINUTES",
                "start_date_time": "2026-01-01T00:00",
            },
            "interval",
            "integer",
        ),
        (
            {
                "type": "repeat",
                "repeat": "CUSTOM",
                "interval": 10**7,
                "time_unit": "MINUTES",
                "start_date_time": "2026-01-01T00:00",
            },
            "interval",
            "1000000",
        ),
        (
            {
                "type": "repeat",
                "repeat": "CUSTOM",
                "interval": 5,
                "time_unit": "minutes",
                "start_date_time": "2026-01-01T00:00",
            },
            "time_unit",
            "'MINUTES'",
        ),
        (
            {
                "type": "repeat",
                "repeat": "CUSTOM",
                "interval": 5,
                "time_unit": "YEARS",
                "start_date_time": "2026-01-01T00:00",
            },
            "time_unit",
            "'MONTHS'",
        ),
        (
            {
                "type": "repeat",
                "repeat": "CUSTOM",
                "interval": 5,
                "time_unit": "HOURS",
                "start_date_time": "2026-01-01T00:00",
                "dst": "quartz",
            },
            "dst",
            "real elapsed time",
        ),
        (
            {
                "type": "repeat",
                "repeat": "CUSTOM",
                "interval": 5,
                "time_unit": "DAYS",
                "start_date_time": "2026-01-01T00:00",
                "calendar": "CN",
            },
            "calendar",
            "no such field",
        ),
    ],
)
def test_invalid_specs_name_field_value_and_expectation(spec: dict[str, Any], field: str, hint: str) -> None:
    with pytest.raises(InvalidTrigger) as caught:
        parse(spec)

    error = caught.value
    assert error.field == field
    assert hint in str(error)
    assert field in str(error)
    if field in spec:
        assert error.value == spec[field]


def test_naive_instant_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        parse(_DAILY).next_after(datetime(2026, 1, 1))


def test_far_future_ends_instead_of_overflowing() -> None:
    trigger = parse(
        _repeat(repeat="CUSTOM", interval=1000, time_unit="MONTHS", start_date_time="9990-01-01T00:00Z")
    )

    assert trigger.next_after(datetime(9990, 1, 2, tzinfo=UTC)) is None
