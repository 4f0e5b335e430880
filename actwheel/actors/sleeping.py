"""Interruptible waits on an injected clock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from datetime import datetime
from typing import Any

from actwheel.clock import Clock

__all__ = ["sleep_or_wake", "sleep_or_wake_until", "wait_or_wake"]


async def sleep_or_wake(clock: Clock, seconds: float, *events: asyncio.Event, precise: bool = False) -> None:
    """Sleep ``seconds`` on ``clock``, returning early when any of ``events`` is set.

    ``precise``: wake as close to the deadline as the clock can (:meth:`Clock.sleep_precisely`).
    """
    sleep = clock.sleep_precisely if precise else clock.sleep
    await wait_or_wake(sleep(seconds), *events)


async def sleep_or_wake_until(clock: Clock, instant: datetime, *events: asyncio.Event, precise: bool = False) -> None:
    """:func:`sleep_or_wake` to a deadline: the wait is measured when the sleep starts
    (:meth:`Clock.sleep_until`), so it ends at ``instant`` however late its task first runs."""
    sleep = clock.sleep_precisely_until if precise else clock.sleep_until
    await wait_or_wake(sleep(instant), *events)


async def wait_or_wake(waiting: Awaitable[Any], *events: asyncio.Event) -> None:
    """Await ``waiting`` (an idle wait: a sleep, a wake-up signal), returning early when any of ``events``
    is set, which cancels it; an error of ``waiting`` itself propagates."""
    work = asyncio.ensure_future(waiting)
    if any(e.is_set() for e in events):
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        return
    waiters: list[asyncio.Future[Any]] = [work, *(asyncio.ensure_future(e.wait()) for e in events)]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        for waiter in waiters[1:]:
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
    with contextlib.suppress(asyncio.CancelledError):
        await work
