"""Cleanup that cannot hang: a task that ignores its cancellation, a transaction that never ends.

The bounds are real time (they exist for code that does not cooperate), so they are set small here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from actwheel.bus.base import InFlight
from actwheel.errors import StorageUnavailable
from actwheel.storage.sqlite import SqliteStore

BOUND_S = 0.05


async def _ignores_first_cancel(running: asyncio.Event, cancelled: asyncio.Event, release: asyncio.Event) -> None:
    running.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancelled.set()  # swallowed: the task goes on as if nothing happened
    await release.wait()


async def test_drain_gives_up_on_a_task_that_ignores_its_cancellation_and_names_it() -> None:
    inflight = InFlight(cancel_wait_s=BOUND_S)
    running, cancelled, release = asyncio.Event(), asyncio.Event(), asyncio.Event()
    task = inflight.spawn(_ignores_first_cancel(running, cancelled, release))
    await running.wait()

    with capture_logs() as logs:
        await inflight.drain(0)

    assert cancelled.is_set()
    assert not task.done()
    [warning] = [e for e in logs if e["event"] == "inflight_tasks_ignored_cancel"]
    assert warning["log_level"] == "warning"
    assert (warning["count"], warning["tasks"]) == (1, [task.get_name()])
    release.set()
    await task


async def test_drain_still_waits_for_cancelled_tasks_that_finish() -> None:
    inflight = InFlight(cancel_wait_s=30.0)
    running = asyncio.Event()

    async def cooperative() -> None:
        running.set()
        await asyncio.Event().wait()

    task = inflight.spawn(cooperative())
    await running.wait()

    with capture_logs() as logs:
        await inflight.drain(0)

    assert task.cancelled()
    assert len(inflight) == 0
    assert not [e for e in logs if e["event"] == "inflight_tasks_ignored_cancel"]


def _connection_open(db: Path) -> bool:
    """SQLite deletes the WAL file when the last connection to the database closes."""
    return Path(f"{db}-wal").exists()


async def _hold_transaction(store: SqliteStore, holding: asyncio.Event, release: asyncio.Event) -> None:
    async with store.transaction() as tx:
        holding.set()
        await release.wait()
        await tx.automations.query(limit=1)  # a statement after the wait: fails if closed under it


async def _let_others_run(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def test_stop_closes_under_a_transaction_that_holds_the_write_lock_past_the_bound(tmp_path: Path) -> None:
    db = tmp_path / "db"
    store = SqliteStore(str(db), stop_wait_s=BOUND_S)
    await store.start()
    holding, release = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(_hold_transaction(store, holding, release))
    await holding.wait()

    with capture_logs() as logs:
        await store.stop()

    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["sqlite_closed_under_transaction"]
    assert not _connection_open(db), "the connection was not closed"
    release.set()
    with pytest.raises(StorageUnavailable):
        await holder


async def test_stop_waits_for_a_transaction_that_ends_within_the_bound(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "db"), stop_wait_s=30.0)
    await store.start()
    holding, release = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(_hold_transaction(store, holding, release))
    await holding.wait()

    with capture_logs() as logs:
        stopping = asyncio.create_task(store.stop())
        await _let_others_run()
        assert not stopping.done(), "stop must wait for the running transaction"
        release.set()
        await stopping

    await holder  # it committed: stop closed only after it
    assert not [e for e in logs if e["log_level"] == "warning"]
