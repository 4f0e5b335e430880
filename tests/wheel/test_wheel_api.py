"""The timing wheel's contract, case by case (the property tests cover random sequences)."""

from __future__ import annotations

import pytest

import actwheel.wheel
from actwheel.errors import InvalidInput
from actwheel.wheel import TimingWheel

HOUR = 3_600_000
YEAR = 365 * 24 * HOUR


def test_exports_only_the_wheel() -> None:
    assert actwheel.wheel.__all__ == ["TimingWheel"]


def test_fires_in_due_order_and_only_what_is_due() -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=1_000)
    for key, due in [("c", 9_000), ("a", 1_500), ("b", 5_000)]:
        wheel.schedule(key, due, key.upper())
    assert wheel.advance(4_999) == ["A"]
    assert wheel.advance(9_000) == ["B", "C"]
    assert wheel.advance(10**9) == []
    assert len(wheel) == 0


def test_ties_fire_in_scheduling_order_even_across_a_cascade() -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=0, wheel_size=16)
    wheel.schedule("far", 100_000, "first")  # placed on a high level
    wheel.advance(99_990)
    wheel.schedule("near", 100_000, "second")  # placed on level 0, after the cascade
    wheel.schedule("other", 99_999, "zeroth")
    assert wheel.advance(100_000) == ["zeroth", "first", "second"]


def test_rescheduling_a_key_replaces_it_and_moves_it_to_the_end_of_its_tie() -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    wheel.schedule("a", 50, "a1")
    wheel.schedule("b", 50, "b")
    wheel.schedule("a", 50, "a2")
    assert len(wheel) == 2
    assert wheel.advance(50) == ["b", "a2"]


def test_a_due_time_in_the_past_fires_at_the_next_advance_before_anything_later() -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=10_000)
    wheel.schedule("now", 10_000, "now")
    wheel.schedule("late", 9_995, "late")
    wheel.schedule("later", 9_990, "later")
    wheel.schedule("ancient", -5, "ancient")
    assert wheel.next_due_ms() == -5
    assert wheel.advance(10_000) == ["ancient", "later", "late", "now"]


def test_due_equal_to_now_after_an_advance_fires_at_the_next_advance_even_without_moving() -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    assert wheel.advance(500) == []
    wheel.schedule("k", 500, "k")
    assert wheel.next_due_ms() == 500
    assert wheel.advance(500) == ["k"]


def test_the_clock_never_goes_back() -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=1_000)
    wheel.schedule("k", 1_000, "k")
    assert wheel.advance(3) == ["k"]
    assert wheel.now_ms == 1_000
    wheel.advance(2_000)
    assert wheel.now_ms == 2_000


def test_cancel_reports_whether_the_key_was_pending() -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    wheel.schedule("k", 10, "k")
    wheel.schedule("fired", 5, "f")
    assert wheel.advance(5) == ["f"]
    assert wheel.cancel("k") is True
    assert wheel.cancel("k") is False
    assert wheel.cancel("fired") is False
    assert wheel.cancel("never") is False
    assert wheel.advance(100) == []


def test_cancelled_and_rescheduled_timers_never_fire_at_their_old_time() -> None:
    wheel: TimingWheel[int, int] = TimingWheel()
    for key in range(100):
        wheel.schedule(key, 1_000 + key, key)
    for key in range(0, 100, 2):
        wheel.cancel(key)
    for key in range(1, 100, 4):
        wheel.schedule(key, 5_000, key)
    rescheduled = list(range(1, 100, 4))
    assert wheel.advance(4_999) == [key for key in range(1, 100, 2) if key not in rescheduled]
    assert wheel.advance(5_000) == rescheduled


def test_next_due_is_exact_not_a_bucket_boundary_and_follows_cancel_and_reschedule() -> None:
    wheel: TimingWheel[str, None] = TimingWheel(now_ms=0)
    assert wheel.next_due_ms() is None
    wheel.schedule("a", 5 * HOUR + 123, None)
    wheel.schedule("b", 7 * HOUR + 1, None)
    assert wheel.next_due_ms() == 5 * HOUR + 123
    wheel.schedule("c", 2 * HOUR + 7, None)
    assert wheel.next_due_ms() == 2 * HOUR + 7
    wheel.schedule("c", 9 * HOUR, None)  # the earliest moves later
    assert wheel.next_due_ms() == 5 * HOUR + 123
    wheel.cancel("a")
    assert wheel.next_due_ms() == 7 * HOUR + 1
    wheel.advance(7 * HOUR + 1)
    assert wheel.next_due_ms() == 9 * HOUR
    wheel.cancel("c")
    assert wheel.next_due_ms() is None


def test_a_jump_of_decades_fires_everything_in_order_and_keeps_what_is_later() -> None:
    start = 1_767_225_600_000  # 2026-01-01 in epoch ms
    wheel: TimingWheel[int, int] = TimingWheel(now_ms=start)
    dues = [start + 1, start + HOUR, start + YEAR, start + 30 * YEAR, start + 31 * YEAR]
    for key, due in reversed(list(enumerate(dues))):
        wheel.schedule(key, due, key)
    assert wheel.advance(start + 30 * YEAR) == [0, 1, 2, 3]
    assert wheel.next_due_ms() == start + 31 * YEAR
    assert wheel.due_ms_of(4) == start + 31 * YEAR


def test_a_coarse_tick_still_fires_to_the_millisecond() -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=0, tick_ms=10)
    for key, due in [("c", 12), ("b", 7), ("a", 5)]:
        wheel.schedule(key, due, key)
    assert wheel.advance(6) == ["a"]
    assert wheel.next_due_ms() == 7
    assert wheel.advance(7) == ["b"]
    assert wheel.advance(11) == []
    assert wheel.advance(12) == ["c"]


def test_lookups_describe_the_pending_timers() -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=100)
    wheel.schedule("a", 200, "A")
    wheel.schedule("b", 50, "B")
    assert "a" in wheel
    assert "zzz" not in wheel
    assert wheel.due_ms_of("a") == 200
    assert wheel.due_ms_of("b") == 50
    assert wheel.due_ms_of("zzz") is None
    assert sorted(wheel.keys()) == ["a", "b"]
    assert len(wheel) == 2
    assert repr(wheel) == "TimingWheel(now_ms=100, pending=2, levels=1)"


def test_repr_shows_no_items() -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    wheel.schedule("k", 5, "secret-token")
    assert "secret" not in repr(wheel)


def test_overflow_levels_are_opened_only_when_needed() -> None:
    wheel: TimingWheel[str, None] = TimingWheel(wheel_size=16)
    wheel.schedule("near", 15, None)
    assert "levels=1" in repr(wheel)
    wheel.schedule("far", 16**3, None)
    assert "levels=4" in repr(wheel)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"now_ms": -1}, "now_ms"),
        ({"now_ms": 1.5}, "now_ms"),
        ({"now_ms": True}, "now_ms"),
        ({"tick_ms": 0}, "tick_ms"),
        ({"tick_ms": 2.0}, "tick_ms"),
        ({"wheel_size": 1000}, "wheel_size"),
        ({"wheel_size": 1}, "wheel_size"),
    ],
)
def test_bad_construction_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        TimingWheel(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert caught.value.value == kwargs[field]


@pytest.mark.parametrize("due", ["10", 10.0, None, 2**63, 1.0e30, -(2**64)])
def test_a_bad_due_time_is_refused_and_loses_nothing(due: object) -> None:
    wheel: TimingWheel[str, str] = TimingWheel(now_ms=100)
    wheel.schedule("k", 150, "kept")
    with pytest.raises(InvalidInput) as caught:
        wheel.schedule("k", due, "new")  # type: ignore[arg-type]
    assert caught.value.field == "due_ms"
    assert caught.value.value is due
    assert wheel.due_ms_of("k") == 150
    assert wheel.advance(150) == ["kept"]


@pytest.mark.parametrize("now", ["5", 5.5, None])
def test_a_bad_advance_time_is_refused(now: object) -> None:
    wheel: TimingWheel[str, str] = TimingWheel()
    wheel.schedule("k", 1, "k")
    with pytest.raises(InvalidInput) as caught:
        wheel.advance(now)  # type: ignore[arg-type]
    assert caught.value.field == "now_ms"
    assert len(wheel) == 1
