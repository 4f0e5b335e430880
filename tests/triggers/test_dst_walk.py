"""first_fire_after walks as few wall times as it can; a brute-force reference checks it is still right."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actwheel.triggers.dst import DstPolicy, FoldRule, GapRule, first_fire_after, resolve_wall_time

ZONES = [ZoneInfo("America/New_York"), ZoneInfo("Europe/Berlin"), ZoneInfo("Australia/Lord_Howe")]
TRANSITIONS = [datetime(2026, 3, 8, 7, tzinfo=UTC), datetime(2026, 11, 1, 6, tzinfo=UTC),
               datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(2026, 10, 25, 1, tzinfo=UTC),
               datetime(2026, 4, 4, 15, tzinfo=UTC), datetime(2026, 10, 3, 15, 30, tzinfo=UTC)]
POLICIES = [DstPolicy(gap=g, fold=f) for g in GapRule for f in FoldRule]


def every(step_s: int):
    def walls_from(start: datetime) -> Iterator[datetime]:
        wall = start.replace(microsecond=0)
        wall -= timedelta(seconds=wall.second % step_s if step_s < 60 else wall.second)
        while True:
            yield wall
            wall += timedelta(seconds=step_s)
    return walls_from


def reference(instant: datetime, zone: ZoneInfo, policy: DstPolicy, step_s: int, fixed: bool) -> float:
    """The earliest fire after ``instant`` among every wall time within ±4 hours (brute force)."""
    local = instant.astimezone(zone).replace(tzinfo=None)
    after = instant.timestamp()
    best = None
    for wall in every(step_s)(local - timedelta(hours=4)):
        if wall > local + timedelta(hours=4):
            break
        for fire in resolve_wall_time(wall, zone, policy, fixed_hour=fixed):
            stamp = fire.at.timestamp()
            if stamp > after and (best is None or stamp < best):
                best = stamp
    assert best is not None
    return best


@settings(max_examples=300, deadline=None)
@given(zone_index=st.integers(0, 2), transition=st.sampled_from(TRANSITIONS),
       offset_s=st.integers(-3 * 3600, 3 * 3600), policy=st.sampled_from(POLICIES),
       step_s=st.sampled_from([60, 600, 900, 1800]), fixed=st.booleans())
def test_walk_agrees_with_brute_force(zone_index: int, transition: datetime, offset_s: int, policy: DstPolicy,
                                      step_s: int, fixed: bool) -> None:
    zone = ZONES[zone_index]
    instant = transition + timedelta(seconds=offset_s)
    fire = first_fire_after(instant, zone, policy, every(step_s), fixed_hour=fixed)
    assert fire is not None
    assert fire.at.timestamp() == reference(instant, zone, policy, step_s, fixed)


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_outside_a_repeated_hour_the_first_candidate_decides(policy: DstPolicy) -> None:
    """Near a gap an every-second schedule examines a couple of wall times per call, not hours of them."""
    zone = ZONES[0]
    instant = datetime(2026, 3, 8, 6, 30, tzinfo=UTC)  # 01:30 EST, half an hour before the gap
    examined = 0

    def counting(start: datetime) -> Iterator[datetime]:
        nonlocal examined
        for wall in every(1)(start):
            examined += 1
            yield wall

    for _ in range(200):
        fire = first_fire_after(instant, zone, policy, counting, fixed_hour=False)
        assert fire is not None
        instant = fire.at
    assert examined <= 200 * 3 + 3600  # at most one gap's worth of skipped walls on top
