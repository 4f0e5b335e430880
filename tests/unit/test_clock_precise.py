"""Clock.sleep_precisely: never before the deadline; on a VirtualClock, only when time is moved."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from actwheel.actors.sleeping import sleep_or_wake
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
