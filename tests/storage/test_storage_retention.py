"""Bounded history (issue 14): tx.retention on SQLite and PostgreSQL — what goes, what stays, batches
bounded by their limit, dedupe keys freed with their runs, the job lease; SQLite's incremental vacuum."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from storage_harness import Backend, db_now, make_automation, make_run, new_run

from actwheel.clock import VirtualClock
from actwheel.errors import InvalidInput, NotFound
from actwheel.storage import Store, open_store
from actwheel.storage.records import (
    NewAuditEntry,
    NewDeadLetter,
    NewOutboxMessage,
    Origin,
    Run,
    RunOutcome,
    RunStatus,
)

#: How long "a while ago" is: the virtual clock jumps it (SQLite), the database clock is waited for (PostgreSQL).
AGO_S = 0.05


async def finished(store: Store, run: Run, status: RunStatus = RunStatus.SUCCEEDED, *, audit: int = 2) -> Run:
    """Claim and finish ``run``, with ``audit`` audit rows of its own."""
    async with store.transaction() as tx:
        claimed = await tx.runs.claim(run.id, "w1", 30.0)
        assert claimed is not None
        assert await tx.runs.finish(RunOutcome(run_id=run.id, owner="w1", epoch=claimed.lease_epoch, status=status))
        for i in range(audit):
            await tx.audit.append(NewAuditEntry(event_id=f"{run.id}:{i}", phase="EXECUTE", actor="w1",
                                                run_id=run.id, automation_id=run.automation_id))
        return await tx.runs.get(run.id)


async def cutoff_after(backend: Backend, store: Store) -> datetime:
    """An instant after everything written so far, and before anything written next."""
    await backend.pass_time(store, AGO_S)
    cut = await db_now(store)
    await backend.pass_time(store, AGO_S)
    return cut


async def exists(store: Store, run_id: str) -> bool:
    async with store.transaction() as tx:
        try:
            await tx.runs.get(run_id)
        except NotFound:
            return False
        return True


async def audit_count(store: Store, run_id: str) -> int:
    async with store.transaction() as tx:
        return len(await tx.audit.trail(run_id))


async def purge_all_runs(store: Store, before: datetime, limit: int = 1000) -> list[tuple[int, int]]:
    """Every batch until the range is exhausted: (scanned, deleted) per batch."""
    batches: list[tuple[int, int]] = []
    after = None
    while True:
        async with store.transaction() as tx:
            batch = await tx.retention.purge_runs(before, limit=limit, after=after)
        batches.append((batch.scanned, batch.runs))
        after = batch.after
        if after is None:
            return batches


# --- runs and their audit rows ---------------------------------------------------------------------------------


async def test_finished_runs_older_than_the_cutoff_go_with_their_audit_rows_open_and_recent_ones_stay(
        backend: Backend, store: Store) -> None:
    a = await make_automation(store)
    old_done = await finished(store, await make_run(store, a, "k-done"))
    old_failed = await finished(store, await make_run(store, a, "k-failed"), RunStatus.FAILED)
    old_pending = await make_run(store, a, "k-pending")
    old_running = await make_run(store, a, "k-running")
    async with store.transaction() as tx:
        assert await tx.runs.claim(old_running.id, "w1", 3600.0) is not None
    cut = await cutoff_after(backend, store)
    recent = await finished(store, await make_run(store, a, "k-recent"))

    async with store.transaction() as tx:
        batch = await tx.retention.purge_runs(cut, limit=100)

    assert (batch.runs, batch.audit, batch.after) == (2, 4, None)
    assert batch.scanned == 4  # the open old runs were read, and kept
    assert not await exists(store, old_done.id)
    assert not await exists(store, old_failed.id)
    assert await audit_count(store, old_done.id) == 0
    for kept in (old_pending, old_running, recent):
        assert await exists(store, kept.id)
    assert await audit_count(store, recent.id) == 2


async def test_a_run_finished_after_the_cutoff_stays_even_though_it_was_created_before(
        backend: Backend, store: Store) -> None:
    a = await make_automation(store)
    long_running = await make_run(store, a, "k-long")
    cut = await cutoff_after(backend, store)
    await finished(store, long_running)
    assert await purge_all_runs(store, cut) == [(1, 0)]
    assert await exists(store, long_running.id)


async def test_a_batch_reads_at_most_limit_runs_and_pages_on_with_its_cursor(backend: Backend, store: Store) -> None:
    a = await make_automation(store)
    runs = [await make_run(store, a, f"k{i}") for i in range(7)]
    for run in runs[:3] + runs[4:]:
        await finished(store, run, audit=1)  # runs[3] stays open, in the middle of the range
    cut = await cutoff_after(backend, store)

    batches = await purge_all_runs(store, cut, limit=3)

    # runs created in one clock tick order by their random ids: which batch holds the open run varies
    assert [scanned for scanned, _ in batches] == [3, 3, 1]
    assert sum(deleted for _, deleted in batches) == 6
    assert sorted(scanned - deleted for scanned, deleted in batches) == [0, 0, 1]
    assert [await exists(store, r.id) for r in runs] == [False] * 3 + [True] + [False] * 3
    assert await purge_all_runs(store, cut, limit=3) == [(1, 0)]  # the open one is all that is left


async def test_a_request_run_holds_its_idempotency_key_until_it_is_deleted(backend: Backend, store: Store) -> None:
    key = "request:alice:invoice-42"
    first = await make_run(store, None, key, origin=Origin.REQUEST)
    async with store.transaction() as tx:
        again = await tx.runs.insert(new_run(None, key, origin=Origin.REQUEST))
    assert (again.created, again.run.id) == (False, first.id)  # within the window: the same run
    await finished(store, first)
    cut = await cutoff_after(backend, store)

    await purge_all_runs(store, cut)

    async with store.transaction() as tx:
        after = await tx.runs.insert(new_run(None, key, origin=Origin.REQUEST))
    assert after.created
    assert after.run.id != first.id


async def test_two_sweepers_deleting_the_same_runs_remove_each_once(backend: Backend, store: Store) -> None:
    a = await make_automation(store)
    for i in range(5):
        await finished(store, await make_run(store, a, f"k{i}"))
    cut = await cutoff_after(backend, store)

    async def purge(on: Store) -> int:
        async with on.transaction() as tx:
            return (await tx.retention.purge_runs(cut, limit=100)).runs

    async with backend.opened() as other:
        if backend.kind == "sqlite":  # one writer: the second sweeper comes after the first
            first, second = await purge(store), await purge(other)
        else:  # the second reads the same rows, waits for the first's row locks, then finds them gone
            async with store.transaction() as tx:
                first = (await tx.retention.purge_runs(cut, limit=100)).runs
                racing = asyncio.create_task(purge(other))
                await asyncio.sleep(0.3)
                assert not racing.done()
            second = await racing
    assert (first, second) == (5, 0)


# --- outbox, dead letters, idempotency keys -------------------------------------------------------------------


def message(i: int) -> NewOutboxMessage:
    return NewOutboxMessage(exchange="actwheel.events", routing_key="run.ready", body=f"m{i}".encode())


async def test_published_outbox_rows_before_the_cutoff_go_unpublished_ones_stay(backend: Backend, store: Store) -> None:
    async with store.transaction() as tx:
        await tx.outbox.append_many([message(i) for i in range(5)])
    async with store.transaction() as tx:
        taken = await tx.outbox.take_batch(3)
        await tx.outbox.mark_published([m.id for m in taken])
    cut = await cutoff_after(backend, store)
    async with store.transaction() as tx:
        await tx.outbox.append_many([message(9)])
        late = await tx.outbox.take_batch(10)
        await tx.outbox.mark_published([late[-1].id])  # published after the cutoff: stays

    after: int | None = 0
    removed, scans = 0, 0
    while after is not None:
        async with store.transaction() as tx:
            batch = await tx.retention.purge_outbox(cut, limit=2, after=after)
        removed, after, scans = removed + batch.rows, batch.after, scans + 1
        assert batch.scanned <= 2

    assert removed == 3
    assert scans == 3  # 2 + 2 old rows, then the new one stops the scan
    async with store.transaction() as tx:
        assert await tx.outbox.backlog() == 2


async def test_dead_letters_and_idempotency_keys_older_than_the_cutoff_go_in_batches(
        backend: Backend, store: Store) -> None:
    async with store.transaction() as tx:
        for i in range(5):
            await tx.dead_letters.add(NewDeadLetter(source="bus", reason="malformed", ref_id=f"m{i}"))
            assert await tx.idempotency.put(f"old-{i}", {"n": i})
    cut = await cutoff_after(backend, store)
    async with store.transaction() as tx:
        await tx.dead_letters.add(NewDeadLetter(source="bus", reason="malformed", ref_id="new"))
        assert await tx.idempotency.put("new", {"n": 9})

    letters, keys = [], []
    for _ in range(3):
        async with store.transaction() as tx:
            letters.append(await tx.retention.purge_dead_letters(cut, limit=2))
            keys.append(await tx.retention.purge_idempotency_keys(cut, limit=2))

    assert letters == [2, 2, 1]
    assert keys == [2, 2, 1]
    async with store.transaction() as tx:
        assert [d.ref_id for d in await tx.dead_letters.query()] == ["new"]
        assert await tx.idempotency.get("new") == {"n": 9}
        assert await tx.idempotency.get("old-0") is None
        assert await tx.idempotency.put("old-0", {"n": 100})  # a deleted key is free: a new outcome


# --- the job lease ------------------------------------------------------------------------------------------------


async def test_the_job_lease_has_one_holder_until_it_expires_or_is_released(backend: Backend, store: Store) -> None:
    ttl = 30.0 if backend.kind == "sqlite" else 0.2
    async with store.transaction() as tx:
        assert await tx.retention.acquire_lease("retention", "node-1", ttl)
        assert not await tx.retention.acquire_lease("retention", "node-2", ttl)
        assert await tx.retention.acquire_lease("retention", "node-1", ttl)  # renewed by its holder
        assert await tx.retention.acquire_lease("other-job", "node-2", ttl)
    await backend.pass_time(store, ttl + 0.1)
    async with store.transaction() as tx:
        assert await tx.retention.acquire_lease("retention", "node-2", ttl)  # expired: taken over
        assert not await tx.retention.release_lease("retention", "node-1")
        assert await tx.retention.release_lease("retention", "node-2")
        assert await tx.retention.acquire_lease("retention", "node-1", ttl)  # released: free


# --- bad input, the index it reads ---------------------------------------------------------------------------------


async def test_bad_input_is_refused_naming_the_field(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as naive:
            await tx.retention.purge_runs(datetime(2030, 1, 1), limit=10)
        with pytest.raises(InvalidInput) as limit:
            await tx.retention.purge_dead_letters(await tx.now(), limit=0)
        with pytest.raises(InvalidInput) as owner:
            await tx.retention.acquire_lease("retention", "", 10.0)
    assert (naive.value.field, limit.value.field, owner.value.field) == ("before", "limit", "owner")


async def test_runs_are_found_through_the_runs_created_index(backend: Backend, store: Store) -> None:
    """The sweeper reads runs by creation time: without runs_created (0008) it would read the whole table."""
    if backend.kind == "sqlite":
        path = backend.url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as conn:
            plan = " ".join(str(row[-1]) for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE created_at < 1 AND (created_at, id) > (0, '') "
                "ORDER BY created_at, id LIMIT 10"))
        assert "runs_created" in plan
        return
    import asyncpg  # only here: the tests of the port itself may read the catalogue

    schema = backend.url.rsplit("search_path=", 1)[-1]
    conn = await asyncpg.connect(backend.url.split("?")[0])
    try:
        found = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2",
                                    schema, "runs_created")
    finally:
        await conn.close()
    assert found is not None
    assert "(created_at, id)" in found


# --- SQLite: incremental vacuum ---------------------------------------------------------------------------------------


async def test_a_new_sqlite_file_has_incremental_vacuum_and_gives_freed_pages_back(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/new.db", clock=VirtualClock())
    await store.start()
    try:
        with sqlite3.connect(tmp_path / "new.db") as conn:
            assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)
        a = await make_automation(store)
        async with store.transaction() as tx:
            await tx.runs.insert_many([new_run(a, f"k{i}", context={"pad": "x" * 2000}) for i in range(300)])
            await tx.runs.cancel_waiting(a.id, "automation_disabled")
        before = store.clock.now() + timedelta(seconds=1)  # type: ignore[attr-defined]
        assert sum(deleted for _, deleted in await purge_all_runs(store, before)) == 300
        with sqlite3.connect(tmp_path / "new.db") as conn:
            freed = conn.execute("PRAGMA freelist_count").fetchone()[0]
        assert freed > 100
        assert await store.reclaim_space(max_pages=freed) == 0
    finally:
        await store.stop()


async def test_an_existing_small_sqlite_file_is_switched_to_incremental_vacuum_at_start(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # a file made before 0010: auto_vacuum NONE, already holding a table
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE unrelated (x)")
    assert sqlite3.connect(path).execute("PRAGMA auto_vacuum").fetchone() == (0,)
    store = open_store(f"sqlite:///{path}", clock=VirtualClock())
    await store.start()
    await store.stop()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)


async def test_postgres_reclaim_space_is_a_no_op(backend: Backend, store: Store) -> None:
    if backend.kind != "postgres":
        pytest.skip("PostgreSQL only: (auto)vacuum makes the space reusable")
    assert await store.reclaim_space() == 0


async def test_postgres_vacuums_the_swept_tables_at_one_percent_dead_outside_the_cost_balancing(
        backend: Backend, store: Store) -> None:
    """0011: the three tables the sweeper deletes from carry autovacuum settings of their own."""
    if backend.kind != "postgres":
        pytest.skip("PostgreSQL only: SQLite has no autovacuum daemon (0011 is empty there)")
    import asyncpg  # only here: the tests of the port itself may read the catalogue

    schema = backend.url.rsplit("search_path=", 1)[-1]
    conn = await asyncpg.connect(backend.url.split("?")[0])
    try:
        rows = await conn.fetch("SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n "
                                "ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = ANY($2::text[])",
                                schema, ["runs", "audit", "outbox"])
    finally:
        await conn.close()
    options = {row["relname"]: dict(o.split("=", 1) for o in row["reloptions"]) for row in rows}
    assert sorted(options) == ["audit", "outbox", "runs"]
    for table, set_ in options.items():
        assert (set_["autovacuum_vacuum_scale_factor"], set_["autovacuum_vacuum_threshold"]) == ("0.01", "1000"), table
        assert set_["autovacuum_vacuum_insert_scale_factor"] == "0.01", table
        assert (set_["autovacuum_vacuum_cost_limit"], set_["autovacuum_vacuum_cost_delay"]) == ("1000", "2"), table
    assert options["runs"]["fillfactor"] == "50"  # 0005's, kept
