"""The needs-attention counts (issue 13, migration 0012) and a bulk cancel's waiting runs, on SQLite and
PostgreSQL: runs_attention follows every path a run takes into and out of UNKNOWN, DEAD and FAILED (finish,
lease recovery, resolution, retention, an insert), whatever the run's age; no index of runs uses status
(a claim stays HOT); the lateness percentiles rank a sample above LATENESS_SAMPLE runs."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg
import pytest
from storage_harness import Backend, db_now, make_run

from actwheel.errors import InvalidInput
from actwheel.storage import Store
from actwheel.storage import _runs as runs_module
from actwheel.storage import postgres as postgres_adapter
from actwheel.storage import sqlite as sqlite_adapter
from actwheel.storage._sql import load_migrations
from actwheel.storage.records import AttentionCounts, NewRun, Origin, Run, RunOutcome, RunStatus

AGO_S = 0.05


async def finish(store: Store, run: Run, status: RunStatus) -> Run:
    """Claim ``run`` and finish it with ``status``."""
    async with store.transaction() as tx:
        claimed = await tx.runs.claim(run.id, "w1", 30.0)
        assert claimed is not None
        assert await tx.runs.finish(RunOutcome(run_id=run.id, owner="w1", epoch=claimed.lease_epoch, status=status,
                                               reason="test"))
        return await tx.runs.get(run.id)


async def counts(store: Store, since: datetime, owner_id: str | None = None) -> AttentionCounts:
    async with store.transaction() as tx:
        return await tx.runs.attention_counts(failed_since=since, owner_id=owner_id)


def triple(c: AttentionCounts) -> tuple[int, int, int]:
    return c.unknown, c.dead, c.failed


async def later(backend: Backend, store: Store) -> datetime:
    """An instant after everything written so far, and before anything written next."""
    await backend.pass_time(store, AGO_S)
    cut = await db_now(store)
    await backend.pass_time(store, AGO_S)
    return cut


async def test_unknown_and_dead_are_counted_whatever_their_age_failed_since_the_instant_asked(
        backend: Backend, store: Store) -> None:
    for key, status in (("u", RunStatus.UNKNOWN), ("d", RunStatus.DEAD), ("f-old", RunStatus.FAILED),
                        ("ok", RunStatus.SUCCEEDED)):
        await finish(store, await make_run(store, None, key), status)
    await finish(store, await make_run(store, None, "bob-u", owner_id="bob"), RunStatus.UNKNOWN)
    await make_run(store, None, "pending")
    cut = await later(backend, store)
    await finish(store, await make_run(store, None, "f-new"), RunStatus.FAILED)

    assert triple(await counts(store, cut, "alice")) == (1, 1, 1)
    assert triple(await counts(store, cut - timedelta(days=1), "alice")) == (1, 1, 2)
    assert triple(await counts(store, cut)) == (2, 1, 1)
    assert triple(await counts(store, cut, "carol")) == (0, 0, 0)
    assert (await counts(store, cut)).failed_since == cut
    with pytest.raises(InvalidInput):
        await counts(store, cut.replace(tzinfo=None))


async def test_a_resolved_unknown_run_leaves_the_count_and_a_did_not_happen_counts_as_failed(store: Store) -> None:
    happened = await finish(store, await make_run(store, None, "u1"), RunStatus.UNKNOWN)
    did_not = await finish(store, await make_run(store, None, "u2"), RunStatus.UNKNOWN)
    since = await db_now(store) - timedelta(hours=1)
    assert triple(await counts(store, since)) == (2, 0, 0)
    async with store.transaction() as tx:
        assert await tx.runs.resolve_unknown(happened.id, RunStatus.SUCCEEDED, "checked") is not None
        assert await tx.runs.resolve_unknown(did_not.id, RunStatus.FAILED, "checked") is not None
    assert triple(await counts(store, since)) == (0, 0, 1)


async def test_lease_recovery_to_unknown_is_counted(backend: Backend, store: Store) -> None:
    run = await make_run(store, None, "lost")
    async with store.transaction() as tx:
        claimed = await tx.runs.claim(run.id, "w1", 0.01)
    assert claimed is not None
    await backend.pass_time(store, 0.05)
    async with store.transaction() as tx:
        recovered = await tx.runs.recover_expired(run.id, claimed.lease_epoch, RunStatus.UNKNOWN, reason="lease")
    assert recovered is not None
    assert recovered.status is RunStatus.UNKNOWN
    assert triple(await counts(store, await db_now(store))) == (1, 0, 0)


async def test_runs_the_retention_sweeper_deletes_leave_the_counts(backend: Backend, store: Store) -> None:
    await finish(store, await make_run(store, None, "u"), RunStatus.UNKNOWN)
    await finish(store, await make_run(store, None, "d"), RunStatus.DEAD)
    cut = await later(backend, store)
    await finish(store, await make_run(store, None, "kept"), RunStatus.DEAD)
    async with store.transaction() as tx:
        purged = await tx.retention.purge_runs(cut, limit=100)
    assert purged.runs == 2
    assert triple(await counts(store, cut)) == (0, 1, 0)


async def test_a_run_written_straight_into_the_table_as_unknown_is_counted(backend: Backend, store: Store) -> None:
    """Bulk loaders (bench/dashboard.py's COPY) bypass the repository: the insert trigger counts them."""
    sql = ("INSERT INTO runs (id, dedupe_key, origin, status, reason, action_type, action_config, policy, owner_id, "
           "created_at, updated_at, finished_at) VALUES ('raw-1', 'raw', 'request', 'UNKNOWN', 'x', 'webhook', '{}', "
           "'{}', 'alice', {now}, {now}, {now})")
    if backend.kind == "postgres":
        conn = await asyncpg.connect(backend.url)
        try:
            await conn.execute(sql.replace("{now}", "now()"))
        finally:
            await conn.close()
    else:
        import sqlite3

        with sqlite3.connect(backend.url.removeprefix("sqlite:///")) as conn:
            conn.execute(sql.replace("{now}", str(int(backend.clock.now().timestamp() * 1_000_000))))
    assert triple(await counts(store, await db_now(store), "alice")) == (1, 0, 0)


async def test_migration_0012_counts_the_runs_already_there(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = postgres_adapter if backend.kind == "postgres" else sqlite_adapter
    with monkeypatch.context() as patched:
        patched.setattr(adapter, "load_migrations", lambda dialect: load_migrations(dialect)[:11])
        async with backend.opened() as old:
            await finish(old, await make_run(old, None, "u"), RunStatus.UNKNOWN)
            await finish(old, await make_run(old, None, "f"), RunStatus.FAILED)
    async with backend.opened() as upgraded:
        assert triple(await counts(upgraded, await db_now(upgraded) - timedelta(hours=1))) == (1, 0, 1)


async def test_no_index_of_runs_uses_status_so_a_claim_can_stay_hot(backend: Backend, store: Store) -> None:
    """PostgreSQL makes an update HOT only if no indexed column (key or predicate) changes; a claim changes
    status: an index on it (a partial one for UNKNOWN / DEAD, say) would make every claim non-HOT."""
    if backend.kind != "postgres":
        pytest.skip("HOT updates are PostgreSQL's")
    conn = await asyncpg.connect(backend.url)
    try:
        using = await conn.fetch(
            "SELECT i.indexrelid::regclass::text AS name FROM pg_index i "
            "WHERE i.indrelid = 'runs'::regclass AND (pg_get_indexdef(i.indexrelid) ~ '\\mstatus\\M'"
            " OR coalesce(pg_get_expr(i.indpred, i.indrelid), '') ~ '\\mstatus\\M')")
    finally:
        await conn.close()
    assert [r["name"] for r in using] == []


async def test_waiting_ids_are_the_owners_waiting_runs_newest_first(backend: Backend, store: Store) -> None:
    first = await make_run(store, None, "p1")
    # created_at is the transaction's now: on SQLite the virtual clock's, which must move, or the two tie
    # and the order falls to the ids, which sort by time only to the millisecond (once in CI: random)
    await backend.pass_time(store, 0.001)
    second = await make_run(store, None, "p2", action_type="email")
    await finish(store, await make_run(store, None, "done"), RunStatus.SUCCEEDED)
    await make_run(store, None, "bob", owner_id="bob")
    async with store.transaction() as tx:
        mine = await tx.runs.waiting_ids([RunStatus.PENDING], owner_id="alice")
        emails = await tx.runs.waiting_ids([RunStatus.PENDING, RunStatus.RETRY_WAIT], owner_id="alice",
                                           action_type="email")
        everyone = await tx.runs.waiting_ids([RunStatus.PENDING], limit=2)
        retrying = await tx.runs.waiting_ids([RunStatus.RETRY_WAIT])
        with pytest.raises(InvalidInput):
            await tx.runs.waiting_ids([RunStatus.RUNNING])
        with pytest.raises(InvalidInput):
            await tx.runs.waiting_ids([])
    assert mine == [second.id, first.id]
    assert emails == [second.id]
    assert len(everyone) == 2
    assert retrying == []


def test_the_lateness_sample_is_every_run_up_to_twice_the_sample_then_a_power_of_two() -> None:
    sample = runs_module.LATENESS_SAMPLE
    assert runs_module.lateness_sample_mask(0) == 0
    assert runs_module.lateness_sample_mask(2 * sample - 1) == 0
    assert runs_module.lateness_sample_mask(2 * sample) == 1
    assert runs_module.lateness_sample_mask(17 * sample) == 15
    for runs in (2 * sample, 5 * sample + 3, 100 * sample, 10**7):
        ranked = runs / (runs_module.lateness_sample_mask(runs) + 1)
        assert sample <= ranked < 2 * sample


async def test_above_the_sample_size_lateness_ranks_a_sample_and_counts_every_run(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_module, "LATENESS_SAMPLE", 8)
    now = await db_now(store)
    async with store.transaction() as tx:
        await tx.runs.insert_many([NewRun(automation_id=None, dedupe_key=f"s{i}", owner_id="alice",
                                          action_type="webhook", origin=Origin.SCHEDULE,
                                          scheduled_for=now - timedelta(seconds=1 + i % 10))
                                   for i in range(40)])
    async with store.transaction() as tx:
        stats = await tx.runs.window_stats(now - timedelta(minutes=5), now=await tx.now())
    fire = stats.fire_lateness
    assert fire.count == 40
    assert fire.ranked is not None
    assert 0 < fire.ranked < 40
    assert fire.p50 is not None
    assert 1 <= fire.p50 <= 11
    assert stats.start_lateness.count == 0
