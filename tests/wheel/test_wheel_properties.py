"""Property-based tests: the timing wheel behaves exactly like a sorted list, whatever the operations."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from actwheel.wheel import TimingWheel
from tests.wheel.reference import SortedListWheel

YEAR_MS = 366 * 24 * 3600 * 1000
KEYS = st.integers(min_value=0, max_value=12)  # few keys: replacement and re-use happen often
# Offsets from the wheel's clock: mostly near (within a few buckets), sometimes far, sometimes past.
OFFSETS = st.one_of(
    st.integers(min_value=-3, max_value=40),
    st.integers(min_value=-5_000, max_value=200_000),
    st.integers(min_value=-YEAR_MS, max_value=30 * YEAR_MS),
)
STEPS = st.one_of(
    st.integers(min_value=0, max_value=20),
    st.integers(min_value=0, max_value=100_000),
    st.integers(min_value=0, max_value=40 * YEAR_MS),
)


class WheelMatchesSortedList(RuleBasedStateMachine):
    """Random schedule / cancel / reschedule / advance sequences, compared step by step."""

    def __init__(self) -> None:
        super().__init__()
        self.wheel: TimingWheel[int, Any] = TimingWheel()
        self.model = SortedListWheel()
        self.serial = 0

    @initialize(
        start=st.one_of(st.just(0), st.integers(min_value=0, max_value=2**45)),
        tick_ms=st.sampled_from([1, 1, 1, 3, 10, 1000]),
        wheel_size=st.sampled_from([2, 4, 16, 1024]),
    )
    def start(self, start: int, tick_ms: int, wheel_size: int) -> None:
        self.wheel = TimingWheel(now_ms=start, tick_ms=tick_ms, wheel_size=wheel_size)
        self.model = SortedListWheel(now_ms=start)

    def _item(self, key: int) -> tuple[int, int]:
        self.serial += 1
        return (key, self.serial)  # unique, so order and identity of what fires is checked

    @rule(key=KEYS, offset=OFFSETS)
    def schedule(self, key: int, offset: int) -> None:
        due = max(0, self.model.now_ms + offset)
        item = self._item(key)
        self.wheel.schedule(key, due, item)
        self.model.schedule(key, due, item)

    @rule(key=KEYS, offset=st.integers(min_value=0, max_value=3))
    def schedule_at_or_right_after_now(self, key: int, offset: int) -> None:
        due = self.model.now_ms + offset
        item = self._item(key)
        self.wheel.schedule(key, due, item)
        self.model.schedule(key, due, item)

    @rule(key=KEYS, back=st.integers(min_value=1, max_value=30))
    def schedule_in_the_past(self, key: int, back: int) -> None:
        due = self.model.now_ms - back
        item = self._item(key)
        self.wheel.schedule(key, due, item)
        self.model.schedule(key, due, item)

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data())
    def schedule_tie_with_pending(self, data: st.DataObject) -> None:
        due = data.draw(st.sampled_from([e[0] for e in self.model._entries]))
        key = data.draw(KEYS)
        item = self._item(key)
        self.wheel.schedule(key, due, item)
        self.model.schedule(key, due, item)

    @rule(key=KEYS)
    def cancel(self, key: int) -> None:
        assert self.wheel.cancel(key) == self.model.cancel(key)

    @rule(step=STEPS)
    def advance(self, step: int) -> None:
        now = self.model.now_ms + step
        assert self.wheel.advance(now) == self.model.advance(now)
        assert self.wheel.now_ms == self.model.now_ms

    @rule(back=st.integers(min_value=1, max_value=1000))
    def advance_backwards_is_advance_to_now(self, back: int) -> None:
        now = self.model.now_ms - back
        assert self.wheel.advance(now) == self.model.advance(now)

    @precondition(lambda self: len(self.model) > 0)
    @rule()
    def advance_exactly_to_next_due(self) -> None:
        due = self.model.next_due_ms()
        assert due is not None
        fired = self.wheel.advance(due)
        assert fired
        assert fired == self.model.advance(due)

    @invariant()
    def same_pending(self) -> None:
        assert len(self.wheel) == len(self.model)
        assert self.wheel.next_due_ms() == self.model.next_due_ms()
        for key in range(13):
            assert (key in self.wheel) == (key in self.model)
            assert self.wheel.due_ms_of(key) == self.model.due_ms_of(key)


TestWheelMatchesSortedList = WheelMatchesSortedList.TestCase
TestWheelMatchesSortedList.settings = settings(
    max_examples=300, stateful_step_count=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@settings(max_examples=200, deadline=None)
@given(
    dues=st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=300),
    stops=st.lists(st.integers(min_value=0, max_value=10_500), max_size=10),
    tick_ms=st.sampled_from([1, 7, 256]),
)
def test_bulk_load_then_advance_fires_each_timer_once_in_due_then_scheduling_order(
    dues: list[int], stops: list[int], tick_ms: int
) -> None:
    wheel: TimingWheel[int, int] = TimingWheel(tick_ms=tick_ms, wheel_size=8)
    for key, due in enumerate(dues):
        wheel.schedule(key, due, key)
    fired: list[int] = []
    for stop in [*sorted(stops), 10_500]:
        fired += wheel.advance(stop)
    assert fired == sorted(range(len(dues)), key=lambda key: (dues[key], key))
    assert len(wheel) == 0
    assert wheel.next_due_ms() is None
