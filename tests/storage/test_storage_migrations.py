"""Migrations (idempotent, concurrent), open_store URLs, ``actwheel migrate``, packaging of the SQL."""

from __future__ import annotations

import asyncio
import io
import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest
from storage_harness import T0, Backend

from actwheel.commands.migrate import database_url, migrate
from actwheel.errors import InvalidInput, NotFound, StorageUnavailable
from actwheel.storage import DEFAULT_DATABASE_URL, open_store
from actwheel.storage import postgres as postgres_adapter
from actwheel.storage import sqlite as sqlite_adapter
from actwheel.storage._codec import to_micros
from actwheel.storage._sql import load_migrations, load_queries
from actwheel.storage.postgres import PostgresStore
from actwheel.storage.records import AutomationStatus, NewPrincipal, NewRun, PrincipalKind, RunStatus
from actwheel.storage.sqlite import SqliteStore

_ROW_0001 = (
    "INSERT INTO automations (id, owner_id, name, labels, session_id, agent_id, \"trigger\", action_type, "
    "action_config, policy, enabled, status, durable, next_run_at, end_at, version, \"partition\", created_at, "
    "updated_at) VALUES ({})"
)


_RUN_0001 = (
    "INSERT INTO runs (id, automation_id, dedupe_key, scheduled_for, origin, status, action_type, action_config, "
    "policy, owner_id, created_at, updated_at) VALUES ({})"
)


async def _insert_0001_automations(backend: Backend, *, with_run: bool = False) -> None:
    """Two automations written the way schema 0001 stored them (state and specification in one
    row), and with ``with_run`` a PENDING run of the first."""
    rows = [("due-1", True, "ACTIVE", T0, 3, 7), ("paused-1", False, "PAUSED", None, 1, 9)]
    run = ("run-1", "due-1", "schedule:1", T0, "schedule", "PENDING", "webhook", "{}", "{}", "alice", T0, T0)
    if backend.kind == "postgres":
        conn = await asyncpg.connect(backend.url)
        try:
            sql = _ROW_0001.format(", ".join(f"${i}" for i in range(1, 20)))
            for rid, enabled, status, next_at, version, partition in rows:
                await conn.execute(sql, rid, "alice", rid, '{"session_id": "s-1"}', "s-1", None, '{"type": "cron"}',
                                   "webhook", "{}", "{}", enabled, status, True, next_at, None, version, partition,
                                   T0, T0)
            if with_run:
                await conn.execute(_RUN_0001.format(", ".join(f"${i}" for i in range(1, 13))), *run)
        finally:
            await conn.close()
        return
    micros = to_micros(T0)
    with closing(sqlite3.connect(backend.url.removeprefix("sqlite:///"))) as conn, conn:
        sql = _ROW_0001.format(", ".join("?" * 19))
        for rid, enabled, status, next_at, version, partition in rows:
            conn.execute(sql, (rid, "alice", rid, '{"session_id": "s-1"}', "s-1", None, '{"type": "cron"}', "webhook",
                               "{}", "{}", int(enabled), status, 1, None if next_at is None else micros, None, version,
                               partition, micros, micros))
        if with_run:
            conn.execute(_RUN_0001.format(", ".join("?" * 12)),
                         [micros if v is T0 else v for v in run])


async def test_a_database_created_by_0001_is_upgraded_keeping_its_rows(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = sqlite_adapter if backend.kind == "sqlite" else postgres_adapter
    monkeypatch.setattr(adapter, "load_migrations", lambda dialect: load_migrations(dialect)[:1])
    async with backend.opened():
        pass
    monkeypatch.undo()
    await _insert_0001_automations(backend, with_run=True)
    upgrading = backend.open(migrate=False)
    await upgrading.start()
    try:
        applied = await upgrading.migrate()
        async with upgrading.transaction() as tx:
            due, paused = await tx.automations.get("due-1"), await tx.automations.get("paused-1")
            listed = await tx.automations.due(T0 + timedelta(hours=1))
            advanced = await tx.automations.advance_cursor("due-1", 3, T0, T0 + timedelta(days=1))
            run = await tx.runs.get("run-1")
            again = await tx.runs.insert(NewRun(automation_id="due-1", dedupe_key="schedule:1", owner_id="alice",
                                                action_type="webhook"))
            recorded = await tx.idempotency.put("k", {"ok": True})
    finally:
        await upgrading.stop()
    assert applied == ["0002_idempotency_keys", "0003_automation_state", "0004_runs_dedupe_key_first",
                       "0005_cheaper_claims_and_cursors", "0006_identity_and_event_index", "0007_mcp_confirmations",
                       "0008_operations", "0009_ui_sessions", "0010_retention", "0011_autovacuum",
                       "0012_runs_attention"]
    assert (due.enabled, due.status, due.next_run_at, due.version, due.partition) == (
        True, AutomationStatus.ACTIVE, T0, 3, 7)
    assert (due.owner_id, due.labels, due.trigger, due.created_at) == (
        "alice", {"session_id": "s-1"}, {"type": "cron"}, T0)
    assert (paused.enabled, paused.status, paused.next_run_at, paused.version, paused.partition) == (
        False, AutomationStatus.PAUSED, None, 1, 9)
    assert [a.id for a in listed] == ["due-1"]
    assert advanced is True
    assert (run.automation_id, run.dedupe_key, run.status, run.scheduled_for) == (
        "due-1", "schedule:1", RunStatus.PENDING, T0)
    assert (again.created, again.run.id) == (False, "run-1")  # invariant 1 holds on the rebuilt index
    assert recorded is True


async def test_the_automations_view_takes_rows_in_the_0001_shape(backend: Backend) -> None:
    """Since 0003 ``automations`` is a view over automation_specs + automation_state; ad hoc SQL
    and bulk loaders that insert 0001-shaped rows into it still write a whole automation."""
    async with backend.opened() as store:
        await _insert_0001_automations(backend)
        async with store.transaction() as tx:
            due = await tx.automations.get("due-1")
            listed = await tx.automations.due(T0 + timedelta(hours=1))
            deleted = await tx.automations.delete("due-1")
            with pytest.raises(NotFound):
                await tx.automations.get("due-1")
    assert (due.enabled, due.status, due.next_run_at, due.version, due.partition) == (
        True, AutomationStatus.ACTIVE, T0, 3, 7)
    assert [a.id for a in listed] == ["due-1"]
    assert deleted.automation_ids == ("due-1",)


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
    names = ["0001_init", "0002_idempotency_keys", "0003_automation_state", "0004_runs_dedupe_key_first",
             "0005_cheaper_claims_and_cursors", "0006_identity_and_event_index", "0007_mcp_confirmations",
             "0008_operations", "0009_ui_sessions", "0010_retention", "0011_autovacuum", "0012_runs_attention"]
    assert await migrate(backend.url, out) == names
    assert await migrate(backend.url, out) == []
    lines = out.getvalue().splitlines()
    count = len(names)
    assert lines[:count] == [f"applied {name}" for name in names]
    assert lines[count].endswith(f"{count} migration(s) applied, schema up to date")
    assert lines[count + 1].endswith("0 migration(s) applied, schema up to date")
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
            await tx.principals.create(NewPrincipal(id="alice", kind=PrincipalKind.USER, scopes=("*",)))
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
    pg_only = {"migration_lock", "db_now", "current_schema"}
    assert set(load_queries("postgres")) - pg_only == set(load_queries("sqlite"))
