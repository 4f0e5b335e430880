"""The ticker's reads of changed automations (issue 15, round 6): concurrent reads share one statement.

The change feed is consumed 64 at a time; each change used to be its own transaction and ``get``.
Now the reads in flight together are one ``get_many`` in one transaction, and each caller still gets
its own automation's row (or None for one that is gone). Real SQLite.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from actwheel.actors.ticker import ScheduledAutomation
from actwheel.clock import VirtualClock
from actwheel.engine import _StoreSchedule
from actwheel.errors import StorageUnavailable
from actwheel.storage import open_store
from actwheel.storage.base import Store
from actwheel.storage.records import NewAutomation
from tests.spies import count_calls

T0 = datetime(2026, 12, 3, 6, 0, tzinfo=UTC)
EVERY_MINUTE = {"type": "cron", "expression": "0 * * * * ?"}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'reads.db'}", clock=VirtualClock(T0))
    await store.start()
    yield store
    await store.stop()


async def _create(store: Store, count: int) -> list[str]:
    async with store.transaction() as tx:
        created = await tx.automations.create_many([
            NewAutomation(owner_id="alice", name=f"a{i}", trigger=EVERY_MINUTE, action_type="simple.op",
                          next_run_at=datetime(2026, 12, 3, 6, 1 + i, tzinfo=UTC)) for i in range(count)])
    return [a.id for a in created]


async def test_concurrent_reads_are_one_statement_and_each_gets_its_own_row(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = await _create(store, 50)
    async with store.transaction() as tx:
        await tx.automations.delete(ids[7])
        counts = count_calls(type(tx.automations), ("get", "get_many"), monkeypatch)
    source = _StoreSchedule(store)
    rows = await asyncio.gather(*(source.get_scheduled(i) for i in [*ids, ids[3], "aut_missing"]))
    assert counts["get"] == 0
    assert 1 <= counts["get_many"] <= 2  # the first read goes alone, the rest wait for it together
    assert [r.id if r is not None else None for r in rows[:50]] == [None if i == 7 else ids[i] for i in range(50)]
    assert rows[50] is not None
    assert rows[50].id == ids[3]
    assert rows[51] is None
    assert rows[10] is not None
    assert rows[10].next_run_at == datetime(2026, 12, 3, 6, 11, tzinfo=UTC)


async def test_a_lone_read_is_answered_at_once_with_the_latest_row(store: Store) -> None:
    [automation_id] = await _create(store, 1)
    source = _StoreSchedule(store)
    first = await source.get_scheduled(automation_id)
    async with store.transaction() as tx:
        await tx.automations.delete(automation_id)
    assert first is not None
    assert first.id == automation_id
    assert await source.get_scheduled(automation_id) is None  # nothing remembered: read again


async def test_an_id_the_store_refuses_fails_alone(store: Store) -> None:
    ids = await _create(store, 3)
    source = _StoreSchedule(store)
    rows = await asyncio.gather(*(source.get_scheduled(i) for i in [ids[0], "x" * 100_000, ids[1], ids[2]]))
    assert rows[1] is None  # longer than any stored text: get_many refuses the batch, each is read alone
    assert [r.id for r in rows if r is not None] == [ids[0], ids[1], ids[2]]


async def test_a_row_that_cannot_be_decoded_fails_only_its_own_read(store: Store, tmp_path: Path) -> None:
    ids = await _create(store, 3)
    with sqlite3.connect(tmp_path / "reads.db") as raw:  # a row written by something that is not actwheel
        raw.execute("PRAGMA ignore_check_constraints = ON")
        raw.execute("UPDATE automation_state SET status = 'BOGUS' WHERE automation_id = ?", (ids[1],))
    source = _StoreSchedule(store)
    rows = await asyncio.gather(*(source.get_scheduled(i) for i in ids), return_exceptions=True)
    assert isinstance(rows[1], ValueError)
    assert [r.id for r in (rows[0], rows[2]) if isinstance(r, ScheduledAutomation)] == [ids[0], ids[2]]


async def test_a_cancelled_reader_leaves_the_others_their_rows(store: Store) -> None:
    ids = await _create(store, 4)
    source = _StoreSchedule(store)
    tasks = [asyncio.create_task(source.get_scheduled(i)) for i in ids]
    await asyncio.sleep(0)  # every read is queued (one yield: the batch has not been read yet)
    tasks[2].cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(done[2], asyncio.CancelledError)
    assert [r.id for r in done if isinstance(r, ScheduledAutomation)] == [ids[0], ids[1], ids[3]]


async def test_every_read_on_a_store_that_is_down_fails_loudly(store: Store) -> None:
    ids = await _create(store, 3)
    source = _StoreSchedule(store)
    await store.stop()
    failed = await asyncio.gather(*(source.get_scheduled(i) for i in [*ids, "aut_missing"]), return_exceptions=True)
    assert [type(f) for f in failed] == [StorageUnavailable] * 4  # not None ("gone"): the ticker must not cancel


async def test_close_lets_the_reads_in_flight_finish_and_later_reads_still_batch(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = await _create(store, 10)
    source = _StoreSchedule(store)
    pending = [asyncio.create_task(source.get_scheduled(i)) for i in ids]
    await asyncio.sleep(0)
    await source.close()
    assert all(t.done() for t in pending)
    assert [t.result().id for t in pending if t.result() is not None] == ids
    async with store.transaction() as tx:
        counts = count_calls(type(tx.automations), ("get", "get_many"), monkeypatch)
    await asyncio.gather(*(source.get_scheduled(i) for i in ids))
    assert counts["get"] == 0
    assert counts["get_many"] <= 2  # batched again, not one read per id
