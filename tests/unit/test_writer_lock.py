"""The SQLite store's writer lock: one holder at a time, FIFO within a lane, the urgent lane first, and
a waiter cancelled after it was handed the lock passes it on (nobody is left waiting on a free lock)."""

from __future__ import annotations

import asyncio

import pytest

from actwheel.storage._writer_lock import WriterLock
from actwheel.storage.postgres import PostgresStore
from actwheel.storage.sqlite import SqliteStore


async def _take(lock: WriterLock, name: str, order: list[str], *, urgent: bool = False,
                hold: asyncio.Event | None = None) -> None:
    await lock.acquire(urgent=urgent)
    try:
        order.append(name)
        if hold is not None:
            await hold.wait()
        await asyncio.sleep(0)
    finally:
        lock.release()


async def test_urgent_waiters_go_before_ordinary_ones_and_each_lane_is_fifo() -> None:
    lock, order, hold = WriterLock(), [], asyncio.Event()
    holder = asyncio.create_task(_take(lock, "holder", order, hold=hold))
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(_take(lock, name, order, urgent=name.startswith("u")))
             for name in ("o1", "u1", "o2", "u2", "o3")]
    await asyncio.sleep(0)
    assert lock.locked()
    hold.set()
    await asyncio.gather(holder, *tasks)
    assert order == ["holder", "u1", "u2", "o1", "o2", "o3"]
    assert not lock.locked()


async def test_a_waiter_cancelled_after_it_was_handed_the_lock_passes_it_on() -> None:
    lock, order = WriterLock(), []
    await lock.acquire()
    first = asyncio.create_task(_take(lock, "first", order))
    second = asyncio.create_task(_take(lock, "second", order))
    await asyncio.sleep(0)
    lock.release()  # handed to first, which has not run yet
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    await asyncio.wait_for(second, 1)
    assert order == ["second"]
    assert not lock.locked()


async def test_a_waiter_cancelled_while_waiting_leaves_the_queue() -> None:
    lock, order = WriterLock(), []
    await lock.acquire()
    gone = asyncio.create_task(_take(lock, "gone", order, urgent=True))
    stays = asyncio.create_task(_take(lock, "stays", order))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    lock.release()
    await asyncio.wait_for(stays, 1)
    assert order == ["stays"]
    assert not lock.locked()


async def test_releasing_a_free_lock_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not held"):
        WriterLock().release()


async def test_a_stream_of_urgent_waiters_lets_an_ordinary_one_through_after_a_streak() -> None:
    """URGENT_STREAK urgent hand-overs in a row, then the oldest ordinary waiter: the relay's steady urgent
    transactions cannot starve a burst's plans and finishes."""
    from actwheel.storage._writer_lock import URGENT_STREAK

    lock, order, hold = WriterLock(), [], asyncio.Event()
    holder = asyncio.create_task(_take(lock, "holder", order, hold=hold))
    await asyncio.sleep(0)
    ordinary = [asyncio.create_task(_take(lock, f"o{i}", order)) for i in range(2)]
    urgent = [asyncio.create_task(_take(lock, f"u{i}", order, urgent=True)) for i in range(2 * URGENT_STREAK + 1)]
    await asyncio.sleep(0)
    hold.set()
    await asyncio.gather(holder, *ordinary, *urgent)
    streak = [f"u{i}" for i in range(URGENT_STREAK)]
    assert order == ["holder", *streak, "o0", *[f"u{i}" for i in range(URGENT_STREAK, 2 * URGENT_STREAK)], "o1",
                     f"u{2 * URGENT_STREAK}"]


def test_a_store_says_how_many_transactions_can_write_at_once() -> None:
    """The planner sizes its bound on big plans by it: one on SQLite, the pool's size on PostgreSQL."""
    assert SqliteStore(":memory:").writers == 1
    assert PostgresStore("postgresql://nowhere/x", max_size=7).writers == 7
