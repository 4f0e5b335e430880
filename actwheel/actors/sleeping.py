"""Interruptible sleep on an injected clock."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from actwheel.clock import Clock

__all__ = ["sleep_or_wake"]


async def sleep_or_wake(clock: Clock, seconds: float, *events: asyncio.Event, precise: bool = False) -> None:
    """Sleep ``seconds`` on ``clock``, returning early when any of ``events`` is set.

    ``precise``: wake as close to the deadline as the clock can (:meth:`Clock.sleep_precisely`).
    """
    if any(e.is_set() for e in events):
        return
    sleep = clock.sleep_precisely if precise else clock.sleep
    waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(sleep(seconds))]
    waiters += [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        for waiter in waiters:
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
