"""The token bucket the planner lets quiet announcements through its backlog bound with (virtual clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from actwheel.actors.allowance import Allowance
from actwheel.clock import VirtualClock


def test_it_starts_full_spends_all_or_nothing_and_refills_with_time() -> None:
    clock = VirtualClock()
    allowance = Allowance(clock, per_s=10, burst=4)
    assert allowance.take(3)
    assert not allowance.take(2)  # one left: nothing is spent
    assert allowance.take(1)
    assert not allowance.take(1)
    clock.advance(0.25)  # 2.5 tokens
    assert allowance.take(2)
    assert not allowance.take(1)


def test_saved_tokens_are_capped_at_the_burst() -> None:
    clock = VirtualClock()
    allowance = Allowance(clock, per_s=10, burst=4)
    clock.advance(3600)
    assert allowance.take(4)
    assert not allowance.take(1)


class _SteppingClock:
    """A wall clock an operator (or NTP) steps back: only ``now`` is read."""

    def __init__(self, now: datetime) -> None:
        self.at = now

    def now(self) -> datetime:
        return self.at


def test_a_clock_that_steps_back_refills_nothing() -> None:
    clock = _SteppingClock(datetime(2030, 1, 1, tzinfo=UTC))
    allowance = Allowance(clock, per_s=10, burst=1)  # type: ignore[arg-type]
    assert allowance.take(1)
    clock.at -= timedelta(hours=1)
    assert not allowance.take(1)
    clock.at += timedelta(seconds=0.1)  # counted from the stepped-back reading, not from the first
    assert allowance.take(1)


def test_a_charge_after_the_fact_can_overdraw_and_holds_the_next_pass_until_paid_back() -> None:
    clock = VirtualClock()
    allowance = Allowance(clock, per_s=10, burst=2)
    assert allowance.take(1)
    allowance.charge(5)  # the pass queued six runs, not one: 1 - 5 = -4
    clock.advance(0.45)  # -4 + 4.5 = 0.5
    assert not allowance.take(1)
    clock.advance(0.05)
    assert allowance.take(1)
    allowance.charge(-3)  # nothing to charge: no refund
    assert not allowance.take(1)
