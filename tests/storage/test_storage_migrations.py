"""Migrations (idempotent, concurrent), open_store URLs, ``actwheel migrate``, packaging of the SQL."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from pathlib import Path

import pytest
from storage_harness import Backend, new_automation

from actwheel.commands.migrate import database_url, migrate
from actwheel.errors import InvalidInput, StorageUnavailable
from actwheel.storage import DEFAULT_DATABASE_URL, open_store
from actwheel.storage import postgres as postgres_adapter
from actwheel.storage import sqlite as sqlite_adapter
from actwheel.storage._sql import load_migrations, load_queries
from actwheel.storage.postgres import PostgresStore
from actwheel.storage.sqlite import SqliteStore


async def test_a_database_created_by_0001_is_upgraded_keeping_its_rows(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = sqlite_adapter if backend.kind == "sqlite" else postgres_adapter
    monkeypatch.setattr(adapter, "load_migrations", lambda dialect: load_migrations(dialect)[:1])
    async with backend.opened() as old, old.transaction() as tx:
        created = await tx.automations.create(new_automation())
    monkeypatch.undo()
    upgrading = backend.open(migrate=False)
    await upgrading.start()
    try:
        applied = await upgrading.migrate()
        async with upgrading.transaction() as tx:
            kept = await tx.automations.get(created.id)
            recorded = await tx.idempotency.put("k", {"ok": True})
    finally:
        await upgrading.stop()
    assert applied == ["0002_idempotency_keys"]
    assert kept == created
    assert recorded is True


async def test_migrate_is_idempotent(backend: Backend) -> None:
    store = backend.open(migrate=False)
    await store.start()
    try:
        first = await store.migrate()
        second = await store.migrate()
    finally:
        await store.stop()
    assert first == [m.name for m in load_migrations(backend.kind)]
    assert second == []


async def test_concurrent_migrations_apply_each_migration_once(backend: Backend) -> None:
    stores = [backend.open(migrate=False) for _ in range(4)]
    await asyncio.gather(*(s.start() for s in stores))
    try:
        results = await asyncio.gather(*(s.migrate() for s in stores))
    finally:
        await asyncio.gather(*(s.stop() for s in stores))
    applied = [name for result in results for name in result]
    assert applied == [m.name for m in load_migrations(backend.kind)]


async def test_migrate_command_reports_what_it_applied(backend: Backend) -> None:
    out = io.StringIO()
    assert await migrate(backend.url, out) == ["0001_init", "0002_idempotency_keys"]
    assert await migrate(backend.url, out) == []
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["applied 0001_init", "applied 0002_idempotency_keys"]
    assert lines[2].endswith("2 migration(s) applied, schema up to date")
    assert lines[3].endswith("0 migration(s) applied, schema up to date")
    assert "actwheel:actwheel@" not in out.getvalue()  # the password is redacted


def test_migrate_command_url_precedence() -> None:
    env = {"ACTWHEEL_DATABASE_URL": "sqlite:///from-env.db"}
    assert database_url("sqlite:///cli.db", env) == "sqlite:///cli.db"
    assert database_url(None, env) == "sqlite:///from-env.db"
    assert database_url(None, {}) == DEFAULT_DATABASE_URL == "sqlite:///actwheel.db"


def test_migrate_command_exit_codes(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "actwheel", "migrate", "--database"]
    ok = subprocess.run([*cli, f"sqlite:///{tmp_path}/x.db"], capture_output=True, text=True, check=False)
    bad = subprocess.run([*cli, "mysql://u:hunter2@h/db"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "applied 0001_init" in ok.stdout
    assert bad.returncode == 2
    assert "database=" in bad.stderr
    assert "hunter2" not in bad.stderr


def test_open_store_picks_the_adapter_from_the_scheme() -> None:
    assert isinstance(open_store("sqlite:///actwheel.db"), SqliteStore)
    assert open_store("sqlite:///actwheel.db").dialect == "sqlite"
    assert open_store("sqlite:///actwheel.db").path == "actwheel.db"  # type: ignore[attr-defined]
    assert open_store("sqlite:////var/lib/aw.db").path == "/var/lib/aw.db"  # type: ignore[attr-defined]
    pg = open_store("postgresql://u:secret@h:5432/db")
    assert isinstance(pg, PostgresStore)
    assert pg.dialect == "postgres"
    assert "secret" not in repr(pg)


@pytest.mark.parametrize("url", ["mysql://h/db", "sqlite://relative.db", "sqlite:///", "", "nonsense"])
def test_open_store_refuses_unknown_urls_naming_database(url: str) -> None:
    with pytest.raises(InvalidInput) as info:
        open_store(url)
    assert info.value.field == "database"


async def test_in_memory_sqlite_works() -> None:
    store = open_store("sqlite:///:memory:")
    await store.start()
    try:
        async with store.transaction() as tx:
            await tx.principals.create("alice")
        async with store.transaction() as tx:
            assert (await tx.principals.get("alice")).id == "alice"
    finally:
        await store.stop()


async def test_a_store_that_is_not_started_or_stopped_is_unavailable(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/x.db")
    with pytest.raises(StorageUnavailable):
        async with store.transaction():
            pass
    await store.start()
    await store.stop()
    await store.stop()  # idempotent
    with pytest.raises(StorageUnavailable):
        await store.start()


def test_both_dialects_define_the_same_queries() -> None:
    pg_only = {"migration_lock", "db_now", "current_schema", "notify_outbox"}
    assert set(load_queries("postgres")) - pg_only == set(load_queries("sqlite"))
