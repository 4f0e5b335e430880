"""Clock.sleep_precisely: never before the deadline; on a VirtualClock, only when time is moved."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from actwheel.actors.sleeping import sleep_or_wake, sleep_or_wake_until, wait_or_wake
from actwheel.clock import SystemClock, VirtualClock


async def test_system_clock_never_wakes_before_the_deadline() -> None:
    clock = SystemClock()
    for seconds in (0.0, 0.001, 0.004, 0.02):
        started = time.monotonic()
        await clock.sleep_precisely(seconds)
        assert time.monotonic() - started >= seconds


async def test_virtual_clock_precise_sleep_waits_for_the_clock() -> None:
    clock = VirtualClock(datetime(2030, 1, 1, tzinfo=UTC))
    sleeper = asyncio.create_task(clock.sleep_precisely(5))
    await asyncio.sleep(0)
    assert not sleeper.done()
    clock.advance(4.9)
    await asyncio.sleep(0)
    assert not sleeper.done()
    clock.advance(0.1)
    await asyncio.wait_for(sleeper, 1)


async def test_precise_sleep_or_wake_returns_early_on_an_event() -> None:
    clock = VirtualClock(datetime(2030, 1, 1, tzinfo=UTC))
    woken = asyncio.Event()
    sleeper = asyncio.create_task(sleep_or_wake(clock, 60, woken, precise=True))
    await asyncio.sleep(0)
    woken.set()
    await asyncio.wait_for(sleeper, 1)
    assert clock.sleepers == 0  # the clock sleep was cancelled, not left behind


async def test_yielding_is_bounded_per_second() -> None:
    clock = SystemClock()
    clock._spun_s = 1.0  # as if this second's yielding budget were spent
    clock._spin_second = int(time.monotonic())
    started = time.monotonic()
    await clock.sleep_precisely(0.02)
    assert time.monotonic() - started >= 0.02  # still never early: a plain sleep
    assert clock._spun_s in (1.0, 0.0)  # no yielding was added (0.0: a new second began meanwhile)


async def test_short_waits_are_plain_sleeps() -> None:
    clock = SystemClock()
    await clock.sleep_precisely(0.002)
    assert clock._spun_s == 0.0


async def test_wait_or_wake_cancels_the_wait_when_an_event_is_set() -> None:
    never = asyncio.Event()
    waiting = asyncio.ensure_future(never.wait())
    woken = asyncio.Event()
    waiter = asyncio.create_task(wait_or_wake(waiting, woken))
    await asyncio.sleep(0)
    assert not waiter.done()
    woken.set()
    await asyncio.wait_for(waiter, 1)
    assert waiting.cancelled()


async def test_wait_or_wake_returns_with_its_wait_and_passes_the_wait_error_on() -> None:
    woken = asyncio.Event()
    await asyncio.wait_for(wait_or_wake(asyncio.sleep(0), woken), 1)

    async def broken() -> None:
        raise RuntimeError("the listener connection is gone")

    with pytest.raises(RuntimeError, match="listener"):
        await wait_or_wake(broken(), woken)
    woken.set()
    await wait_or_wake(broken(), woken)  # already woken: the wait is not even started


async def test_a_deadline_holds_however_late_its_sleep_first_runs_a_duration_does_not() -> None:
    """Each sleep below is created, then the clock moves 2 s before any of them has run: the deadlines
    end at their instant, the 2 s duration parks relative to the moved clock and ends 2 s late."""
    clock = VirtualClock(datetime(2030, 1, 1, tzinfo=UTC))
    deadline = clock.now() + timedelta(seconds=2)
    woken = asyncio.Event()
    duration = asyncio.create_task(clock.sleep(2.0))
    until = asyncio.create_task(clock.sleep_until(deadline))
    precisely = asyncio.create_task(clock.sleep_precisely_until(deadline))
    waking = asyncio.create_task(sleep_or_wake_until(clock, deadline, woken, precise=True))
    clock.advance(2.0)
    for _ in range(20):  # a bounded settle: each task runs (sleep_or_wake_until also reaps its waiters)
        await asyncio.sleep(0)
    assert until.done()
    assert precisely.done()
    assert waking.done()
    assert not duration.done()
    clock.advance(2.0)
    await asyncio.sleep(0)
    assert duration.done()
