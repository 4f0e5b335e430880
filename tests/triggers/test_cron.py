"""The cron trigger: spec handling, every Quartz special character, the Unix dialect, DST policies."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import pytest

from actwheel.errors import InvalidTrigger
from actwheel.triggers import CronTrigger, parse, preview, preview_fires

FROM_2026 = datetime(2025, 12, 31, 23, 0, tzinfo=UTC)


def _spec(expression: str, **extra: Any) -> dict[str, Any]:
    return {"type": "cron", "expression": expression, **extra}


def _fires(expression: str, after: datetime = FROM_2026, count: int = 3, **extra: Any) -> list[str]:
    return [f.isoformat() for f in preview(_spec(expression, **extra), after=after, count=count)]


# --- spec and API --------------------------------------------------------------------------------


def test_spec_defaults_to_utc_and_round_trips() -> None:
    trigger = parse(_spec("0 30 18 ? * MON-FRI"))

    assert isinstance(trigger, CronTrigger)
    assert trigger.zone.key == "UTC"
    assert trigger.dialect == "quartz"
    assert trigger.to_spec() == {"type": "cron", "expression": "0 30 18 ? * MON-FRI", "timezone": "UTC"}
    assert parse(trigger.to_spec()) == trigger


def test_full_spec_round_trips_with_dst_start_and_end() -> None:
    spec = _spec("*/5 * * * *", timezone="Europe/Berlin", dst={"gap": "skip", "fold": "both"},
                 start="2026-01-01T00:00:00+01:00", end="2026-02-01T00:00:00+01:00")
    trigger = parse(spec)

    assert trigger.to_spec() == {**spec, "dst": {"gap": "skip", "fold": "both"}}
    assert parse(trigger.to_spec()) == trigger
    assert trigger.dialect == "unix"  # type: ignore[attr-defined]


def test_describe_names_time_days_and_zone() -> None:
    trigger = parse(_spec("0 30 18 ? * MON-FRI", timezone="Asia/Shanghai"))

    assert trigger.describe() == "at 18:30:00, Monday through Friday (Asia/Shanghai)"
    assert parse(_spec("0 0 12 ? * 6#3")).describe() == "at 12:00:00, on the third Friday of the month (UTC)"
    assert parse(_spec("0 0 0 LW * ?")).describe() == (
        "at 00:00:00, on the weekday nearest the last day of the month (UTC)")
    assert parse(_spec("0 */15 * * * ?")).describe().startswith("every 15 minutes")
    assert parse(_spec("30 9 1,15 * MON")).describe() == "at 09:30, on day 1, 15 of the month or Monday (UTC)"


def test_fires_are_strictly_after_aware_and_in_the_trigger_zone() -> None:
    trigger = parse(_spec("0 30 18 ? * MON-FRI", timezone="Asia/Shanghai"))
    at_fire = datetime(2026, 3, 2, 18, 30, tzinfo=trigger.zone)

    nxt = trigger.next_after(at_fire)

    assert nxt is not None
    assert nxt.isoformat() == "2026-03-03T18:30:00+08:00"
    assert nxt.tzinfo is trigger.zone
    with pytest.raises(ValueError, match="naive"):
        trigger.next_after(datetime(2026, 3, 2))


def test_start_and_end_bound_the_schedule() -> None:
    spec = _spec("0 0 12 * * ?", start="2026-05-10T12:00:00Z", end="2026-05-12T12:00:00Z")

    assert _fires(spec.pop("expression"), count=5, start=spec["start"], end=spec["end"]) == [
        "2026-05-10T12:00:00+00:00", "2026-05-11T12:00:00+00:00", "2026-05-12T12:00:00+00:00"]


def test_impossible_schedules_end_instead_of_searching_for_ever() -> None:
    assert _fires("0 0 0 30 2 ?") == []
    assert _fires("0 0 0 30 2 ?", dst="quartz") == []
    assert _fires("0 0 31 2 *") == []
    assert _fires("0 0 0 29 2 ? 2096", count=2) == ["2096-02-29T00:00:00+00:00"]
    # Quartz stops at its MAX_YEAR (2126): a 2127 or later fire never comes.
    assert _fires("0 0 0 1 1 ? 2127") == []
    assert _fires("0 0 0 1 1 ? 2126", dst="quartz") == ["2126-01-01T00:00:00+00:00"]


# --- every Quartz special character --------------------------------------------------------------


@pytest.mark.parametrize(("expression", "expected"), [
    ("0 0 12 * * ?", ["2026-01-01T12:00:00+00:00", "2026-01-02T12:00:00+00:00"]),
    ("15,45 0 0 * * ?", ["2026-01-01T00:00:15+00:00", "2026-01-01T00:00:45+00:00"]),
    ("0 0 10-11 * * ?", ["2026-01-01T10:00:00+00:00", "2026-01-01T11:00:00+00:00"]),
    ("0 0 22-1 * * ?", ["2026-01-01T00:00:00+00:00", "2026-01-01T01:00:00+00:00",
                        "2026-01-01T22:00:00+00:00"]),
    ("0 5/20 0 * * ?", ["2026-01-01T00:05:00+00:00", "2026-01-01T00:25:00+00:00"]),
    ("0 0 0 1-20/10 * ?", ["2026-01-01T00:00:00+00:00", "2026-01-11T00:00:00+00:00"]),
    ("0 0 0 L * ?", ["2026-01-31T00:00:00+00:00", "2026-02-28T00:00:00+00:00"]),
    ("0 0 0 L-2 * ?", ["2026-01-29T00:00:00+00:00", "2026-02-26T00:00:00+00:00"]),
    # 2026-01-31 is a Saturday -> Friday 30th; 2026-02-28 a Saturday -> Friday 27th
    ("0 0 0 LW * ?", ["2026-01-30T00:00:00+00:00", "2026-02-27T00:00:00+00:00"]),
    # 2026-02-01 is a Sunday -> Monday 2nd; 2026-08-01 a Saturday -> Monday 3rd (never into July)
    ("0 0 0 1W 2,8 ?", ["2026-02-02T00:00:00+00:00", "2026-08-03T00:00:00+00:00"]),
    # 2026-05-31 is a Sunday and the month's last day -> Friday 29th
    ("0 0 0 31W 5 ?", ["2026-05-29T00:00:00+00:00", "2027-05-31T00:00:00+00:00"]),
    ("0 0 0 ? * 6L", ["2026-01-30T00:00:00+00:00", "2026-02-27T00:00:00+00:00"]),
    ("0 0 0 ? * FRIL", ["2026-01-30T00:00:00+00:00", "2026-02-27T00:00:00+00:00"]),
    ("0 0 0 ? * 2#1", ["2026-01-05T00:00:00+00:00", "2026-02-02T00:00:00+00:00"]),
    # a fifth Friday exists only in some months (January, May, July, October in 2026)
    ("0 0 0 ? * 6#5", ["2026-01-30T00:00:00+00:00", "2026-05-29T00:00:00+00:00"]),
    ("0 0 0 ? * L", ["2026-01-03T00:00:00+00:00", "2026-01-10T00:00:00+00:00"]),
    ("0 0 0 ? * SAT-SUN", ["2026-01-03T00:00:00+00:00", "2026-01-04T00:00:00+00:00"]),
    ("0 0 0 ? * FRI-MON", ["2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00",
                            "2026-01-04T00:00:00+00:00", "2026-01-05T00:00:00+00:00"]),
    ("0 0 0 1 NOV-FEB ?", ["2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00",
                            "2026-11-01T00:00:00+00:00"]),
    ("0 0 0 29 FEB ?", ["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"]),
    ("0 0 0 1 1 ? 2030,2100-2101", ["2030-01-01T00:00:00+00:00", "2100-01-01T00:00:00+00:00",
                                     "2101-01-01T00:00:00+00:00"]),
    ("0 0 0 29 2 ? 2100/4", ["2104-02-29T00:00:00+00:00"]),
])
def test_special_characters(expression: str, expected: list[str]) -> None:
    for dst in (None, "quartz"):
        extra = {} if dst is None else {"dst": dst}
        assert _fires(expression, count=len(expected) + (1 if "2100/4" in expression else 0), **extra)[
            : len(expected)] == expected


def test_names_are_case_insensitive() -> None:
    assert _fires("0 0 9 ? jan mon", count=1) == _fires("0 0 9 ? 1 2", count=1) == ["2026-01-05T09:00:00+00:00"]


# --- the Unix dialect ----------------------------------------------------------------------------


def test_unix_sunday_is_0_or_7() -> None:
    assert _fires("0 9 * * 0", count=2) == _fires("0 9 * * 7", count=2) == _fires("0 9 * * SUN", count=2)
    assert _fires("0 9 * * 0", count=1) == ["2026-01-04T09:00:00+00:00"]


def test_unix_either_day_field_matches_when_both_are_restricted() -> None:
    # the 13th, or any Friday: Fri 2 Jan, Fri 9 Jan, Tue 13 Jan, Fri 16 Jan
    assert _fires("0 0 13 * FRI", count=4) == [
        "2026-01-02T00:00:00+00:00", "2026-01-09T00:00:00+00:00",
        "2026-01-13T00:00:00+00:00", "2026-01-16T00:00:00+00:00"]


def test_unix_restricting_one_day_field_is_an_and() -> None:
    assert _fires("0 0 13 * *", count=2) == ["2026-01-13T00:00:00+00:00", "2026-02-13T00:00:00+00:00"]
    assert _fires("*/20 9 * * 1-5", count=4) == [
        "2026-01-01T09:00:00+00:00", "2026-01-01T09:20:00+00:00",
        "2026-01-01T09:40:00+00:00", "2026-01-02T09:00:00+00:00"]


# --- invalid input -------------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "field"), [
    ("60 0 0 * * ?", "expression.seconds"),
    ("0 60 0 * * ?", "expression.minutes"),
    ("0 0 24 * * ?", "expression.hours"),
    ("0 0 0 32 * ?", "expression.day_of_month"),
    ("0 0 0 L-31 * ?", "expression.day_of_month"),
    ("0 0 0 0W * ?", "expression.day_of_month"),  # Quartz accepts it, then loops for ever
    ("0 0 0 * 13 ?", "expression.month"),
    ("0 0 0 * FOO ?", "expression.month"),
    ("0 0 0 ? * 8", "expression.day_of_week"),
    ("0 0 0 ? * 2#6", "expression.day_of_week"),
    ("0 0 0 ? * 1#1,2#2", "expression.day_of_week"),
    ("0 0 0 * * MON", "expression.day_of_week"),  # both day fields: Quartz cannot
    ("0 0 0 ? * ?", "expression.day_of_week"),
    ("0 0 0 1 1 ? 2030-2020", "expression.year"),
    ("L 0 0 * * ?", "expression.seconds"),  # Quartz accepts it, then throws when evaluating
    ("0 0 L * * ?", "expression.hours"),
    ("60 * * * *", "expression.minute"),
    ("* 24 * * *", "expression.hour"),
    ("* * 0 * *", "expression.day_of_month"),
    ("* * * 13 *", "expression.month"),
    ("* * * * 8", "expression.day_of_week"),
    ("* * L * *", "expression.day_of_month"),  # Unix cron has no L
    ("*/0 * * * *", "expression.minute"),
    ("0 0 *", "expression"),
    ("", "expression"),
])
def test_invalid_expressions_name_the_field(expression: str, field: str) -> None:
    with pytest.raises(InvalidTrigger) as caught:
        parse(_spec(expression))

    assert caught.value.field == field
    assert caught.value.expected
    assert field in str(caught.value)


def test_invalid_spec_fields_are_named() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        (_spec("0 0 0 * * ?", timezone="Mars/Olympus"), "timezone"),
        (_spec("0 0 0 * * ?", dst="sometimes"), "dst"),
        (_spec("0 0 0 * * ?", dst={"gap": "later"}), "dst.gap"),
        (_spec("0 0 0 * * ?", start="2026-01-01T00:00:00"), "start"),
        (_spec("0 0 0 * * ?", end="tomorrow"), "end"),
        (_spec("0 0 0 * * ?", start="2026-02-01T00:00:00Z", end="2026-01-01T00:00:00Z"), "end"),
        (_spec("0 0 0 * * ?", timezone="UTC", every="day"), "every"),
        ({"type": "cron", "expression": 5}, "expression"),
    ]
    for spec, field in cases:
        with pytest.raises(InvalidTrigger) as caught:
            parse(spec)
        assert caught.value.field == field, spec


def test_expression_quartz_cannot_finish_is_refused_when_reached() -> None:
    # L-28W in a 28-day February points back into January; from a start after January's
    # fire Quartz moves between January and February for ever (it never returns).
    trigger = parse(_spec("0 0 0 L-28W 1 ?", dst="quartz"))
    assert trigger.next_after(datetime(2025, 12, 1, tzinfo=UTC)) is not None  # before January: fine
    with pytest.raises(InvalidTrigger) as caught:
        trigger.next_after(datetime(2026, 1, 10, tzinfo=UTC))
    assert caught.value.field == "expression.day_of_month"


# --- DST -----------------------------------------------------------------------------------------


def _fires_with_notes(expression: str, zone: str, after: str, count: int, dst: Any = None) -> list[str]:
    spec = _spec(expression, timezone=zone) | ({} if dst is None else {"dst": dst})
    fires = preview_fires(spec, after=datetime.fromisoformat(after), count=count)
    return [f.at.isoformat() + (" *" if f.note else "") for f in fires]


SPRING = {  # zone: (expression with a skipped wall time, start, the jump's end, next day's fire)
    "America/New_York": ("0 30 2 * * ?", "2026-03-08T00:00:00-05:00", "2026-03-08T03:00:00-04:00",
                         "2026-03-09T02:30:00-04:00"),
    "Europe/Berlin": ("0 30 2 * * ?", "2026-03-29T00:00:00+01:00", "2026-03-29T03:00:00+02:00",
                      "2026-03-30T02:30:00+02:00"),
    "Australia/Lord_Howe": ("0 15 2 * * ?", "2026-10-04T00:00:00+10:30", "2026-10-04T02:30:00+11:00",
                            "2026-10-05T02:15:00+11:00"),
}
FALL = {  # zone: (expression in the repeated half-hour or hour, start, first, second occurrence, next day)
    "America/New_York": ("0 30 1 * * ?", "2026-11-01T00:00:00-04:00", "2026-11-01T01:30:00-04:00",
                         "2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"),
    "Europe/Berlin": ("0 30 2 * * ?", "2026-10-25T00:00:00+02:00", "2026-10-25T02:30:00+02:00",
                      "2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"),
    "Australia/Lord_Howe": ("0 45 1 * * ?", "2026-04-05T00:00:00+11:00", "2026-04-05T01:45:00+11:00",
                            "2026-04-05T01:45:00+10:30", "2026-04-06T01:45:00+10:30"),
}


@pytest.mark.parametrize("zone", sorted(SPRING))
def test_gap_policies(zone: str) -> None:
    expression, start, jump, next_day = SPRING[zone]

    assert _fires_with_notes(expression, zone, start, 2) == [f"{jump} *", next_day]
    assert _fires_with_notes(expression, zone, start, 1, {"gap": "shift"}) == [f"{jump} *"]
    assert _fires_with_notes(expression, zone, start, 1, {"gap": "skip"}) == [f"{next_day} *"]
    assert _fires_with_notes(expression, zone, start, 1, "quartz") == [next_day]  # Quartz skips it


@pytest.mark.parametrize("zone", sorted(FALL))
def test_fold_policies(zone: str) -> None:
    expression, start, first, second, next_day = FALL[zone]

    assert _fires_with_notes(expression, zone, start, 2) == [f"{first} *", next_day]
    assert _fires_with_notes(expression, zone, start, 1, {"fold": "first"}) == [f"{first} *"]
    assert _fires_with_notes(expression, zone, start, 1, {"fold": "second"}) == [f"{second} *"]
    assert _fires_with_notes(expression, zone, start, 3, {"fold": "both"}) == [f"{first} *", f"{second} *",
                                                                             next_day]
    assert _fires_with_notes(expression, zone, start, 2, "quartz") == [second, next_day]


def test_step_hour_keeps_its_real_interval_through_the_repeated_hour() -> None:
    fires = preview(_spec("0 */15 * * * ?", timezone="America/New_York"),
                    after=datetime.fromisoformat("2026-11-01T00:50:00-04:00"), count=9)
    # timestamps: subtracting two datetimes of one zone would give the wall-clock difference
    gaps = {int(b.timestamp() - a.timestamp()) for a, b in pairwise(fires)}

    assert [f.isoformat() for f in fires[:5]] == [
        "2026-11-01T01:00:00-04:00", "2026-11-01T01:15:00-04:00", "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:45:00-04:00", "2026-11-01T01:00:00-05:00"]
    assert gaps == {900}


def test_quartz_policy_never_fires_in_the_first_pass_of_a_repeated_hour() -> None:
    fires = preview(_spec("0 */15 * * * ?", timezone="America/New_York", dst="quartz"),
                    after=datetime.fromisoformat("2026-11-01T00:50:00-04:00"), count=2)

    assert [f.isoformat() for f in fires] == ["2026-11-01T01:00:00-05:00", "2026-11-01T01:15:00-05:00"]


def test_unix_dialect_follows_the_dst_policy_too() -> None:
    assert _fires_with_notes("30 2 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", 1) == [
        "2026-03-29T03:00:00+02:00 *"]
    assert _fires_with_notes("*/30 * * * *", "Europe/Berlin", "2026-03-29T01:10:00+01:00", 2) == [
        "2026-03-29T01:30:00+01:00", "2026-03-29T03:00:00+02:00 *"]
