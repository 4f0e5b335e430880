"""Time as a port: the system clock for production, a virtual clock for tests.

Nothing in actwheel's time core calls ``time.time()`` or ``datetime.now()``:
it asks a :class:`Clock`. A test of "fires at 09:00" advances a
:class:`VirtualClock`; it never sleeps.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from abc import ABC, abstractmethod
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "SystemClock", "VirtualClock"]

#: SystemClock.sleep_precisely yields (instead of sleeping) for this last stretch before a deadline,
#: only for waits of at least _PRECISE_MIN_S, and for at most _SPIN_BUDGET_S per second in all.
_SPIN_S = 0.003
_PRECISE_MIN_S = 0.010
_SPIN_BUDGET_S = 0.020


class Clock(ABC):
    """A source of the current instant and a way to wait for a later one."""

    @abstractmethod
    def now(self) -> datetime:
        """The current instant, timezone-aware, in UTC."""

    def now_ms(self) -> int:
        """The current instant as integer milliseconds since the Unix epoch."""
        return int(self.now().timestamp() * 1000)

    @abstractmethod
    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed on this clock (at once when ``seconds <= 0``)."""

    async def sleep_until(self, instant: datetime) -> None:
        """Return once this clock reads ``instant`` or later.

        The wait is measured when the sleep starts, not when its caller computed ``instant``: a deadline
        stays the same instant however late the sleeping task first runs (on a :class:`VirtualClock`,
        a sleep of seconds computed before the clock moved parks that much after the move)."""
        await self.sleep((instant - self.now()).total_seconds())

    async def sleep_precisely(self, seconds: float) -> None:
        """Like :meth:`sleep`, as close to the deadline as the clock can (the wheel ticker's wake-up)."""
        await self.sleep(seconds)

    async def sleep_precisely_until(self, instant: datetime) -> None:
        """:meth:`sleep_until` as :meth:`sleep_precisely` wakes: measured when the sleep starts."""
        await self.sleep_precisely((instant - self.now()).total_seconds())


class SystemClock(Clock):
    """The machine's wall clock; ``sleep`` is :func:`asyncio.sleep`."""

    def __init__(self) -> None:
        self._spin_second = 0
        self._spun_s = 0.0

    def now(self) -> datetime:
        return datetime.now(UTC)

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    async def sleep_precisely(self, seconds: float) -> None:
        """Sleep until ``_SPIN_S`` before the deadline, then yield to the loop until it has passed.

        A bare :func:`asyncio.sleep` wakes 1-2 ms late here (the selector's millisecond timeout
        and the kernel's timer slack); the last stretch is spent yielding (other tasks run). Bounded:
        waits shorter than ``_PRECISE_MIN_S`` (dense timers) are plain sleeps, and at most
        ``_SPIN_BUDGET_S`` per second is spent yielding; past it, plain sleeps until the next second.
        """
        if seconds < _PRECISE_MIN_S or not self._spin_allowed():
            await asyncio.sleep(max(0.0, seconds))
            return
        deadline = time.monotonic() + seconds
        await asyncio.sleep(seconds - _SPIN_S)
        spin_started = time.monotonic()
        while time.monotonic() < deadline:  # noqa: ASYNC110 - a deliberate yield-spin, bounded above
            await asyncio.sleep(0)
        self._spun_s += time.monotonic() - spin_started

    def _spin_allowed(self) -> bool:
        second = int(time.monotonic())
        if second != self._spin_second:
            self._spin_second, self._spun_s = second, 0.0
        return self._spun_s < _SPIN_BUDGET_S


class VirtualClock(Clock):
    """A clock that moves only when a test advances it.

    ``sleep`` parks the caller until :meth:`advance` moves the clock past its
    deadline. Sleepers wake in deadline order (ties: the order they slept).
    """

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2030, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError(f"VirtualClock start must be timezone-aware, got {start!r}")
        self._now = start.astimezone(UTC)
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    @property
    def sleepers(self) -> int:
        """How many callers are parked in :meth:`sleep` (cancelled ones excluded)."""
        return sum(1 for _, _, fut in self._sleepers if not fut.done())

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        deadline = self._now + timedelta(seconds=seconds)
        heapq.heappush(self._sleepers, (deadline, next(self._seq), fut))
        await fut

    def set(self, instant: datetime) -> None:
        """Move the clock to ``instant`` (never backwards) and wake due sleepers."""
        if instant.tzinfo is None:
            raise ValueError(f"instant must be timezone-aware, got {instant!r}")
        instant = instant.astimezone(UTC)
        if instant < self._now:
            raise ValueError(f"a clock does not go back: {instant} < {self._now}")
        self._now = instant
        self._wake_due()

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward and wake due sleepers."""
        self.set(self._now + timedelta(seconds=seconds))

    async def advance_and_settle(self, seconds: float, *, rounds: int = 20) -> None:
        """Advance, then yield to the loop so woken tasks run before the caller goes on."""
        self.advance(seconds)
        for _ in range(rounds):
            await asyncio.sleep(0)

    def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
