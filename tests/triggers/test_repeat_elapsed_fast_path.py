"""RepeatTrigger.next_after's arithmetic fast path for elapsed-time schedules (CUSTOM in SECONDS /
MINUTES / HOURS) answers exactly what next_fire_after does: the same instant, in the same zone, and
None at the same bounds. Property-based over zones, anchors, bounds and instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actwheel.triggers import parse

ZONES = ["UTC", "Asia/Shanghai", "America/New_York", "Europe/London", "Australia/Lord_Howe"]
BASE = datetime(2030, 3, 1, tzinfo=UTC)


@settings(max_examples=400, deadline=None)
@given(zone=st.sampled_from(ZONES), anchor_zone=st.sampled_from([*ZONES, None]),
       interval=st.integers(1, 90), unit=st.sampled_from(["SECONDS", "MINUTES", "HOURS"]),
       start_s=st.integers(0, 400 * 86_400), length_s=st.one_of(st.none(), st.integers(0, 40 * 86_400)),
       probe_s=st.integers(-86_400, 500 * 86_400), micro=st.integers(0, 999_999))
def test_the_fast_path_equals_the_fire_path(zone: str, anchor_zone: str | None, interval: int, unit: str,
                                            start_s: int, length_s: int | None, probe_s: int,
                                            micro: int) -> None:
    start = BASE + timedelta(seconds=start_s)
    if anchor_zone is not None:
        start = start.astimezone(ZoneInfo(anchor_zone))
    spec = {"type": "repeat", "repeat": "CUSTOM", "interval": interval, "time_unit": unit,
            "start_date_time": start.isoformat(), "timezone": zone}
    if length_s is not None:
        spec["end_date_time"] = (start + timedelta(seconds=length_s)).isoformat()
    trigger = parse(spec)
    probe = (BASE + timedelta(seconds=probe_s, microseconds=micro)).astimezone(ZoneInfo(zone))
    fire = trigger.next_fire_after(probe)
    fast = trigger.next_after(probe)
    assert fast == (None if fire is None else fire.at)
    if fast is not None and fire is not None:
        assert (fast.tzinfo, fast.utcoffset(), fast.isoformat()) == (fire.at.tzinfo, fire.at.utcoffset(),
                                                                     fire.at.isoformat())


def test_the_fast_path_refuses_a_naive_instant_like_the_fire_path() -> None:
    trigger = parse({"type": "repeat", "repeat": "CUSTOM", "interval": 5, "time_unit": "SECONDS",
                     "start_date_time": BASE.isoformat()})
    with pytest.raises(ValueError, match="timezone-aware"):
        trigger.next_after(datetime(2030, 1, 1))


def test_the_fast_path_ends_at_year_9999_in_any_zone_like_the_fire_path() -> None:
    trigger = parse({"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "HOURS",
                     "start_date_time": "9999-12-31T00:00:00+00:00", "timezone": "Asia/Tokyo"})
    probe = datetime(9999, 12, 31, 14, 30, tzinfo=UTC)
    assert trigger.next_fire_after(probe) is None
    assert trigger.next_after(probe) is None
