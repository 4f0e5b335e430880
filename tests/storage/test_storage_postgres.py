"""PostgreSQL adapter specifics: dropped connections, timeouts, error mapping, LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from services import isolated_postgres_url, postgres_dsn

from actwheel.errors import StorageError, StorageUnavailable
from actwheel.storage import Store, open_store
from actwheel.storage._sql import Query
from actwheel.storage.postgres import PostgresStore
from actwheel.storage.records import NewOutboxMessage

pytestmark = pytest.mark.postgres
PACKAGE = Path(__file__).resolve().parents[2] / "actwheel"


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with isolated_postgres_url() as schema_url:
        yield schema_url


async def _backend_pids(store: Store) -> set[int]:
    pids: set[int] = set()
    for _ in range(3):
        async with store.transaction() as tx:
            pids.add(await _pid(tx))
    return pids


async def _pid(tx: object) -> int:
    x = tx._sql  # type: ignore[attr-defined]  # the SQL runner: tests may look inside
    return int(await x._conn.fetchval("select pg_backend_pid()"))


async def test_dropped_connections_are_replaced(url: str) -> None:
    store = PostgresStore(url, min_size=2, max_size=2)
    await store.start()
    try:
        before = await _backend_pids(store)
        admin = await asyncpg.connect(postgres_dsn())
        try:
            killed = await admin.fetchval(
                "select count(pg_terminate_backend(pid)) from pg_stat_activity where pid = any($1::int[])",
                list(before),
            )
        finally:
            await admin.close()
        assert killed == len(before)
        # The pool finds the dead connections out at BEGIN and replaces them: no caller sees an error.
        after = await _backend_pids(store)
        assert after
        assert not after & before
    finally:
        await store.stop()


async def test_statement_timeout_is_storage_unavailable(url: str) -> None:
    store = PostgresStore(url, statement_timeout_s=0.2)
    store._queries = {**store._queries, "nap": Query("nap", "select pg_sleep(5)", ())}  # a slow named query
    await store.start()
    try:
        with pytest.raises(StorageUnavailable, match="timed out"):
            async with store.transaction() as tx:
                await tx._sql.fetch("nap")  # type: ignore[attr-defined]
        async with store.transaction() as tx:  # the pool is still usable
            assert await tx.now()
    finally:
        await store.stop()


async def test_acquire_timeout_is_storage_unavailable(url: str) -> None:
    store = PostgresStore(url, min_size=1, max_size=1, acquire_timeout_s=0.2)
    await store.start()
    try:
        async with store.transaction():
            with pytest.raises(StorageUnavailable):
                async with store.transaction():
                    pass
    finally:
        await store.stop()


async def test_unreachable_server_is_storage_unavailable_without_password() -> None:
    store = open_store("postgresql://actwheel:hunter2@127.0.0.1:1/actwheel")
    with pytest.raises(StorageUnavailable) as info:
        await store.start()
    assert "hunter2" not in str(info.value)


async def test_driver_errors_never_cross_the_port(url: str) -> None:
    store = PostgresStore(url)
    await store.start()
    try:
        with pytest.raises(StorageError) as info:
            async with store.transaction() as tx:
                await tx._sql.fetch("get_run", {"id": 12, "owner_id": None})  # type: ignore[attr-defined]  # wrong type
        assert not isinstance(info.value, asyncpg.PostgresError)
    finally:
        await store.stop()


async def test_notify_wakes_a_relay_in_another_process(url: str) -> None:
    relay = PostgresStore(url)
    writer = PostgresStore(url)
    await relay.start()
    await writer.start()
    try:
        assert await relay.wait_for_outbox(0.05) is False  # also sets up LISTEN
        waiting = asyncio.create_task(relay.wait_for_outbox(10))
        async with writer.transaction() as tx:
            await tx.outbox.append(NewOutboxMessage(exchange="x", routing_key="run.ready", body=b"{}"))
        assert await waiting is True
    finally:
        await writer.stop()
        await relay.stop()


async def test_other_schemas_do_not_wake_the_relay(url: str) -> None:
    relay = PostgresStore(url)
    await relay.start()
    try:
        assert await relay.wait_for_outbox(0.01) is False
        async with isolated_postgres_url() as other_url:
            other = PostgresStore(other_url)
            await other.start()
            try:
                async with other.transaction() as tx:
                    await tx.outbox.append(NewOutboxMessage(exchange="x", routing_key="k", body=b"{}"))
            finally:
                await other.stop()
        assert await relay.wait_for_outbox(0.2) is False
    finally:
        await relay.stop()


def test_nothing_above_storage_imports_a_driver() -> None:
    driver = re.compile(r"^\s*(import|from)\s+(asyncpg|aiosqlite|sqlite3)\b", re.MULTILINE)
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "storage" not in path.relative_to(PACKAGE).parts and driver.search(path.read_text())
    ]
    assert offenders == []
