"""Clock.sleep_precisely: never before the deadline; on a VirtualClock, only when time is moved."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest

from actwheel.actors.sleeping import sleep_or_wake, wait_or_wake
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
