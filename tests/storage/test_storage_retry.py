"""The transaction retry helper: what it retries (a real deadlock, a lost connection), what it
does not (timeouts, conflicts, the caller's own errors), its backoff, and that every retried
attempt starts from a rolled-back transaction."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

import asyncpg
import pytest
from services import isolated_postgres_url, postgres_dsn
from storage_harness import make_automation

from actwheel.clock import Clock
from actwheel.errors import Conflict, InvalidInput, StorageUnavailable
from actwheel.storage import Store, Transaction, TransientStorageError, in_transaction, open_store
from actwheel.storage._sql import Query, load_migrations
from actwheel.storage.postgres import PostgresStore
from actwheel.storage.retry import backoff_delay


class RecordingClock(Clock):
    """Sleeps return at once; the delays asked for are recorded."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def now(self) -> datetime:
        return datetime(2030, 1, 1, tzinfo=UTC)

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def failing_first(times: int, key: str, calls: list[int]) -> Callable[[Transaction], Awaitable[bool]]:
    """Records ``key`` in the ledger, then fails transiently on the first ``times`` calls."""

    async def fn(tx: Transaction) -> bool:
        calls.append(1)
        recorded = await tx.idempotency.put(key, {"attempt": len(calls)})
        if len(calls) <= times:
            raise TransientStorageError("serialization", "simulated")
        return recorded

    return fn


# --- the helper's logic, on both backends ------------------------------------------------------


async def test_a_transient_failure_is_retried_from_a_rolled_back_transaction(store: Store) -> None:
    calls: list[int] = []
    clock = RecordingClock()
    recorded = await in_transaction(store, failing_first(2, "k", calls), clock=clock, base_delay_s=0.1)
    async with store.transaction() as tx:
        outcome = await tx.idempotency.get("k")
    assert len(calls) == 3
    assert recorded is True  # the put of the failed attempts was rolled back
    assert outcome == {"attempt": 3}
    assert len(clock.slept) == 2
    assert 0.05 <= clock.slept[0] <= 0.1
    assert 0.1 <= clock.slept[1] <= 0.2


async def test_the_last_transient_failure_is_raised_when_attempts_run_out(store: Store) -> None:
    calls: list[int] = []
    with pytest.raises(TransientStorageError) as info:
        await in_transaction(store, failing_first(5, "k", calls), attempts=2, clock=RecordingClock())
    async with store.transaction() as tx:
        assert await tx.idempotency.get("k") is None
    assert len(calls) == 2
    assert info.value.cause == "serialization"
    assert isinstance(info.value, StorageUnavailable)


@pytest.mark.parametrize("error", [Conflict("run", "r-1", "taken"), StorageUnavailable("timed out"),
                                   RuntimeError("the caller's own")])
async def test_other_errors_are_raised_at_once(store: Store, error: Exception) -> None:
    calls: list[int] = []

    async def fn(tx: Transaction) -> None:
        calls.append(1)
        raise error

    with pytest.raises(type(error)):
        await in_transaction(store, fn, clock=RecordingClock())
    assert calls == [1]


@pytest.mark.parametrize("attempts", [0, -1, True, 1.5, 101])
async def test_attempts_must_be_a_sensible_integer(store: Store, attempts: object) -> None:
    async def fn(tx: Transaction) -> None:
        return None

    with pytest.raises(InvalidInput) as info:
        await in_transaction(store, fn, attempts=attempts)  # type: ignore[arg-type]
    assert info.value.field == "attempts"


def test_backoff_grows_exponentially_with_jitter_up_to_the_cap() -> None:
    for attempt, ceiling in [(1, 0.02), (2, 0.04), (3, 0.08), (10, 1.0)]:
        delays = [backoff_delay(attempt, 0.02, 1.0) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1


def test_transient_causes_are_closed() -> None:
    with pytest.raises(ValueError, match="unknown transient cause"):
        TransientStorageError("timeout", "not transient")


# --- real PostgreSQL failures ------------------------------------------------------------------


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with isolated_postgres_url() as url:
        yield url


async def _started(url: str, **kwargs: object) -> Store:
    store = PostgresStore(url, **kwargs)  # type: ignore[arg-type]
    await store.start()
    return store


@pytest.mark.postgres
async def test_the_loser_of_a_real_deadlock_is_retried_and_both_transactions_commit(pg_url: str) -> None:
    # Superuser-only setting, passed as a server setting through the URL: detect it in 50 ms, not 1 s.
    store = open_store(pg_url + "&deadlock_timeout=50ms")
    await store.start()
    try:
        a, b = await make_automation(store, name="a"), await make_automation(store, name="b")
        locked = {"t1": asyncio.Event(), "t2": asyncio.Event()}
        attempts: Counter[str] = Counter()

        def crossing(me: str, other: str, first: str, second: str) -> Callable[[Transaction], Awaitable[str]]:
            async def fn(tx: Transaction) -> str:
                attempts[me] += 1
                await tx.automations.set_enabled(first, True)  # row lock on `first`
                locked[me].set()
                await locked[other].wait()  # both hold one lock: each now asks for the other's
                await tx.automations.set_enabled(second, True)
                return me

            return fn

        done = await asyncio.gather(
            in_transaction(store, crossing("t1", "t2", a.id, b.id), base_delay_s=0.01),
            in_transaction(store, crossing("t2", "t1", b.id, a.id), base_delay_s=0.01),
        )
        async with store.transaction() as tx:
            versions = [(await tx.automations.get(x.id)).version for x in (a, b)]
    finally:
        await store.stop()
    assert done == ["t1", "t2"]
    assert sorted(attempts.values()) == [1, 2]  # exactly one lost the deadlock and ran again
    assert versions == [3, 3]  # both transactions' changes committed, each once


@pytest.mark.postgres
async def test_a_connection_lost_mid_transaction_is_retried_on_a_fresh_one(pg_url: str) -> None:
    store = await _started(pg_url, min_size=1, max_size=2)
    pids: list[int] = []
    try:
        async def fn(tx: Transaction) -> bool:
            conn = tx._sql._conn  # type: ignore[attr-defined]  # the SQL runner's connection: tests may look inside
            pids.append(conn.get_server_pid())
            recorded = await tx.idempotency.put("k", {"attempt": len(pids)})
            if len(pids) == 1:
                await _terminate(pids[0])
            await tx.idempotency.get("k")  # the first attempt's connection is gone by now
            return recorded

        recorded = await in_transaction(store, fn, base_delay_s=0.01)
        async with store.transaction() as tx:
            outcome = await tx.idempotency.get("k")
    finally:
        await store.stop()
    assert len(pids) == 2
    assert pids[0] != pids[1]
    assert recorded is True
    assert outcome == {"attempt": 2}


async def _terminate(pid: int) -> None:
    admin = await asyncpg.connect(postgres_dsn())
    try:
        assert await admin.fetchval("select pg_terminate_backend($1)", pid)
    finally:
        await admin.close()


@pytest.mark.postgres
async def test_a_statement_timeout_is_not_retried(pg_url: str) -> None:
    store = PostgresStore(pg_url, statement_timeout_s=0.2)
    store._queries = {**store._queries, "nap": Query("nap", "select pg_sleep(5)", ())}  # a slow named query
    await store.start()
    calls: list[int] = []
    try:
        async def fn(tx: Transaction) -> None:
            calls.append(1)
            await tx._sql.fetch("nap")  # type: ignore[attr-defined]

        with pytest.raises(StorageUnavailable, match="timed out") as info:
            await in_transaction(store, fn, clock=RecordingClock())
    finally:
        await store.stop()
    assert calls == [1]
    assert not isinstance(info.value, TransientStorageError)


@pytest.mark.postgres
async def test_migrations_are_not_bound_by_the_statement_timeout(pg_url: str) -> None:
    """A 0.2 s statement bound once failed a start whose migrations took longer on a loaded machine.

    The store starts with a sane bound (its own first query is bound by it, and 1 ms is too little for
    that on a loaded box), then the bound drops to 1 ms: every migration of the fresh schema, each
    statement far over 1 ms, must still apply."""
    store = PostgresStore(pg_url, statement_timeout_s=5.0, migrate_on_start=False)
    try:
        await store.start()
        store._statement_timeout = 0.001
        applied = await store.migrate()
        assert [m.name for m in load_migrations("postgres")] == applied
        assert await store.migrate() == []
    finally:
        await store.stop()


@pytest.mark.postgres
async def test_a_failed_start_closes_the_connections_it_opened(pg_url: str) -> None:
    store = PostgresStore(pg_url, statement_timeout_s=0.2)
    store._queries = {**store._queries, "current_schema": Query("current_schema", "select pg_sleep(5)", ())}
    with pytest.raises(StorageUnavailable, match="timed out"):
        await store.start()
    assert store._pool is None  # terminated, not left for the garbage collector to warn about
