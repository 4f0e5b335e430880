"""preview() / preview_fires() over once and repeat triggers: offsets, ends, and DST gaps and folds
in America/New_York, Europe/Berlin and Australia/Lord_Howe (a 30-minute shift) under every policy."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from actwheel.errors import InvalidTrigger
from actwheel.triggers import parse, preview, preview_fires

# zone, gap date, a wall time in the gap, the instant of the jump, fold date, a wall time in the fold,
# its first and second occurrences.
ZONES = {
    "America/New_York": ("2026-03-08", "02:30", "03:00:00-04:00", "2026-11-01", "01:30", "-04:00", "-05:00"),
    "Europe/Berlin": ("2026-03-29", "02:30", "03:00:00+02:00", "2026-10-25", "02:30", "+02:00", "+01:00"),
    "Australia/Lord_Howe": (
        "2026-10-04",
        "02:15",
        "02:30:00+11:00",
        "2026-04-05",
        "01:45",
        "+11:00",
        "+10:30",
    ),
}
POLICIES: dict[str, Any] = {
    "default": None,
    "quartz": "quartz",
    "skip+first": {"gap": "skip", "fold": "first"},
    "shift+second": {"gap": "shift", "fold": "second"},
    "shift+both": {"gap": "shift", "fold": "both"},
}
# For each policy: does a gap time fire at the jump, and which fold occurrences fire.
EXPECTED = {
    "default": (True, ("first",)),
    "quartz": (False, ("second",)),
    "skip+first": (False, ("first",)),
    "shift+second": (True, ("second",)),
    "shift+both": (True, ("first", "second")),
}


def _daily(zone: str, at: str, policy: str, kind: str = "DAILY") -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "repeat", "repeat": kind, "execute_time": at, "timezone": zone}
    if kind == "WEEKLY":
        spec["weekdays"] = [1, 2, 3, 4, 5, 6, 7]
    if POLICIES[policy] is not None:
        spec["dst"] = POLICIES[policy]
    return spec


def _midnight(day: str, zone: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=ZoneInfo(zone))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("kind", ["DAILY", "WEEKLY"])
def test_gap(zone: str, policy: str, kind: str) -> None:
    day, wall, jump, *_ = ZONES[zone]
    shifts, _ = EXPECTED[policy]

    fires = preview_fires(_daily(zone, wall, policy, kind), after=_midnight(day, zone), count=2)

    first = fires[0]
    assert first.note is not None
    if shifts:
        assert first.at.isoformat() == f"{day}T{jump}"
        assert f"DST gap: {wall}:00 does not exist in {zone}" in first.note
    else:
        assert first.at.date() > datetime.fromisoformat(day).date()
        assert first.at.strftime("%H:%M") == wall
        assert f"DST gap: skipped {day} {wall}:00" in first.note
    assert fires[1].note is None


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("kind", ["DAILY", "WEEKLY"])
def test_fold(zone: str, policy: str, kind: str) -> None:
    *_, day, wall, first_offset, second_offset = ZONES[zone]
    _, occurrences = EXPECTED[policy]
    offsets = {"first": first_offset, "second": second_offset}

    fires = preview_fires(_daily(zone, wall, policy, kind), after=_midnight(day, zone), count=3)

    on_the_day = [f for f in fires if f.at.date().isoformat() == day]
    assert [f.at.isoformat() for f in on_the_day] == [f"{day}T{wall}:00{offsets[o]}" for o in occurrences]
    assert all(
        f.note is not None and f"DST fold: {wall}:00 occurs twice in {zone}" in f.note for f in on_the_day
    )
    instants = [f.at.astimezone(UTC) for f in fires]
    assert instants == sorted(set(instants))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("zone", ZONES)
def test_workdays_follow_the_same_gap_rules(zone: str, policy: str) -> None:
    # Every one of these transitions falls on a Sunday: make it a workday to see the rule apply.
    day, wall, jump, *_ = ZONES[zone]
    shifts, _ = EXPECTED[policy]
    spec = _daily(zone, wall, policy, "WORKDAYS")
    spec["extra_workdays"] = [day]

    fire = parse(spec).next_fire_after(_midnight(day, zone))

    assert fire is not None
    if shifts:
        assert fire.at.isoformat() == f"{day}T{jump}"
    else:  # skipped: the Monday after
        assert fire.at.strftime("%a %H:%M") == f"Mon {wall}"


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("zone", ZONES)
def test_monthly_follows_the_same_gap_rules(zone: str, policy: str) -> None:
    day, wall, jump, *_ = ZONES[zone]
    shifts, _ = EXPECTED[policy]
    spec = _daily(zone, wall, policy, "MONTHLY")
    spec["month_day"] = int(day[-2:])

    fire = parse(spec).next_fire_after(_midnight(day, zone))

    assert fire is not None
    if shifts:
        assert fire.at.isoformat() == f"{day}T{jump}"
    else:  # skipped: the same day next month
        assert fire.at.date().isoformat() == f"{day[:5]}{int(day[5:7]) + 1:02d}{day[7:]}"


@pytest.mark.parametrize("policy", ["default", "quartz", "shift+both"])
def test_custom_days_cross_the_berlin_gap_on_wall_time(policy: str) -> None:
    spec: dict[str, Any] = {
        "type": "repeat",
        "repeat": "CUSTOM",
        "interval": 1,
        "time_unit": "DAYS",
        "start_date_time": "2026-03-27T02:30:00",
        "timezone": "Europe/Berlin",
    }
    if POLICIES[policy] is not None:
        spec["dst"] = POLICIES[policy]

    fires = preview(spec, after=_midnight("2026-03-27", "Europe/Berlin"), count=3)

    expected = ["2026-03-27T02:30:00+01:00", "2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00"]
    if policy == "quartz":
        expected[2] = "2026-03-30T02:30:00+02:00"
    assert [f.isoformat() for f in fires] == expected


def test_once_preview_ends_after_one() -> None:
    fires = preview(
        {"type": "once", "at": "2027-01-01T09:00+08:00[Asia/Shanghai]"},
        after=datetime(2026, 1, 1, tzinfo=UTC),
        count=10,
    )

    assert [f.isoformat() for f in fires] == ["2027-01-01T09:00:00+08:00"]


def test_fires_carry_the_trigger_zone_offset() -> None:
    spec = {"type": "repeat", "repeat": "DAILY", "execute_time": "09:00", "timezone": "Europe/Berlin"}

    fires = preview(spec, after=datetime(2026, 3, 27, tzinfo=UTC), count=4)

    assert [f.strftime("%H:%M%z") for f in fires] == ["09:00+0100", "09:00+0100", "09:00+0200", "09:00+0200"]
    assert all(f.tzinfo == ZoneInfo("Europe/Berlin") for f in fires)


def test_count_zero_and_negative() -> None:
    spec = {"type": "repeat", "repeat": "DAILY", "execute_time": "09:00"}

    assert preview(spec, after=datetime(2026, 1, 1, tzinfo=UTC), count=0) == []
    with pytest.raises(InvalidTrigger):
        preview(spec, after=datetime(2026, 1, 1, tzinfo=UTC), count=-1)


def test_event_preview_is_empty() -> None:
    assert (
        preview({"type": "event", "routing_key": "a.#"}, after=datetime(2026, 1, 1, tzinfo=UTC), count=5)
        == []
    )
