"""The SQLite store's writer lock, with a lane for small transactions.

One connection writes, so every transaction waits for the one before it. During a burst the queue
holds transactions that each write thousands of rows (a plan of 2,000 instants, a claim of 64 runs,
a finish of hundreds), and a quiet automation's one-row plan or claim waited behind all of them. An
``urgent`` acquire goes ahead of every ordinary waiter (not ahead of the transaction that holds the
lock). So that a steady stream of urgent ones (the outbox relay's, all through a burst) cannot starve the
rest, at most :data:`URGENT_STREAK` urgent acquires in a row pass ordinary waiters; then the oldest
ordinary one goes. Speed only: transactions are serialised either way, so the order in which they take
the lock changes no outcome, only who waits.

The lock is handed from holder to waiter (it never becomes free in between), so nobody can barge in
between a release and the waiter's wake-up, and a waiter cancelled after it was handed the lock
passes it on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from types import TracebackType

__all__ = ["URGENT_STREAK", "WriterLock"]

#: Urgent acquires in a row that may pass waiting ordinary ones before one of those goes.
URGENT_STREAK = 2


class WriterLock:
    """``async with lock`` (or :meth:`acquire` / :meth:`release`); :meth:`acquire` ``(urgent=True)`` jumps
    the ordinary waiters. FIFO within each lane."""

    def __init__(self) -> None:
        self._held = False
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._ordinary: deque[asyncio.Future[None]] = deque()
        self._streak = 0  # urgent hand-overs since an ordinary waiter last got the lock

    def locked(self) -> bool:
        return self._held

    async def acquire(self, *, urgent: bool = False) -> bool:
        if not self._held and not self._urgent and not self._ordinary:
            self._held = True
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane = self._urgent if urgent else self._ordinary
        lane.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed the lock, then cancelled: pass it on
                self.release()
            else:
                with contextlib.suppress(ValueError):  # a release may have dropped it already
                    lane.remove(waiter)
            raise
        return True

    def release(self) -> None:
        """Hand the lock to the next waiter (the urgent lane first, within the streak), or free it.

        :raises RuntimeError: the lock is not held
        """
        if not self._held:
            raise RuntimeError("WriterLock.release() of a lock that is not held")
        _drop_done(self._urgent)
        _drop_done(self._ordinary)
        if self._urgent and (not self._ordinary or self._streak < URGENT_STREAK):
            self._streak += 1
            self._urgent.popleft().set_result(None)  # still held: now by that waiter
        elif self._ordinary:
            self._streak = 0
            self._ordinary.popleft().set_result(None)
        else:
            self._held = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.release()


def _drop_done(lane: deque[asyncio.Future[None]]) -> None:
    """Drop the waiters at the head that are done already (cancelled while waiting)."""
    while lane and lane[0].done():
        lane.popleft()
