"""The SQLite adapter (aiosqlite): the embedded default.

One connection, one writer: every transaction takes the writer lock (``_writer_lock.py``: urgent
ones go ahead of the ordinary waiters) and ``BEGIN IMMEDIATE``,
so transactions in this process are serialised and another process on the same file waits
(``busy_timeout``) instead of failing. WAL lets readers in other processes go on. Instants
are integer microseconds; "now" is the store's injected :class:`~actwheel.clock.Clock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from functools import cache
from operator import itemgetter
from typing import Any, cast

import aiosqlite
import orjson

from actwheel.backoff import exponential_delay
from actwheel.clock import Clock, SystemClock
from actwheel.errors import IntegrityViolation, InvalidInput, StorageError, StorageFull, StorageUnavailable
from actwheel.logs import get_logger
from actwheel.storage import _codec as codec
from actwheel.storage._repos import SqlTransaction
from actwheel.storage._runner import Row, SqlRunner
from actwheel.storage._sql import Query, load_migrations, load_queries, qmark, split_statements
from actwheel.storage._writer_lock import WriterLock
from actwheel.storage.base import Store, Transaction

__all__ = ["SqliteStore"]

_log = get_logger("actwheel.storage.sqlite")

_INTEGRITY_KINDS = (
    ("UNIQUE", "unique"),
    ("PRIMARY KEY", "unique"),
    ("FOREIGN KEY", "foreign_key"),
    ("CHECK", "check"),
    ("NOT NULL", "not_null"),
)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return codec.to_micros(value)
    if isinstance(value, bytes):
        raise TypeError("bytes cannot travel in a JSON batch; use copy_rows")
    raise TypeError(f"cannot encode {type(value).__name__}")


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return codec.to_micros(value)
    if isinstance(value, list | tuple):
        return orjson.dumps(value, default=_json_default, option=orjson.OPT_PASSTHROUGH_DATETIME).decode()
    return value


#: Values sqlite3 binds as they are (everything else goes through :func:`_encode`).
_PLAIN = frozenset({str, int, float, bytes, type(None), codec.JsonText})


@cache
def _positional(query: Query) -> tuple[str, Any]:
    """``query`` with ``?`` placeholders, and a row → values getter in their order."""
    sql, names = qmark(query.sql)
    return sql, itemgetter(*names) if len(names) > 1 else (lambda row: (row[names[0]],))


@contextmanager
def _mapped() -> Iterator[None]:
    """Translate sqlite3 errors into the port's errors."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        message = str(exc)
        kind = next((k for marker, k in _INTEGRITY_KINDS if marker in message), "unique")
        raise IntegrityViolation(kind, message.split(":")[-1].strip(), message) from None
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL" or "disk is full" in str(exc):
            raise StorageFull("sqlite", str(exc)) from exc
        if "locked" in str(exc) or "busy" in str(exc):
            raise StorageUnavailable(f"sqlite database is busy: {exc}") from exc
        raise StorageError(f"sqlite: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise StorageError(f"sqlite: {exc}") from exc
    except ValueError as exc:  # aiosqlite: "no active connection"
        raise StorageUnavailable(f"sqlite connection closed: {exc}") from exc


class _SqliteRunner(SqlRunner):
    def __init__(self, conn: aiosqlite.Connection, queries: Mapping[str, Query], clock: Clock) -> None:
        self._conn = conn
        self._queries = queries
        self._clock = clock
        self.outbox_touched = False

    def _bind(self, query: Query, params: Mapping[str, Any] | None) -> dict[str, Any]:
        given = params or {}
        bound = {name: _encode(given[name]) for name in query.params if name != "now"}
        if "now" in query.params:
            bound["now"] = codec.to_micros(self._clock.now())
        return bound

    async def fetch(self, name: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        query = self._queries[name]
        with _mapped():
            rows = await self._conn.execute_fetchall(query.sql, self._bind(query, params))
        return cast(list[Row], list(rows))  # sqlite3.Row is a mapping by column name

    async def guarded_row(self, name: str, params: Mapping[str, Any] | None = None) -> Row | None:
        return await self.fetchrow(name, params)

    async def fetch_rows(
        self, name: str, rows: Sequence[Mapping[str, Any]], params: Mapping[str, Any] | None = None
    ) -> list[Row]:
        if not rows:
            return []
        packed = orjson.dumps(rows, default=_json_default, option=orjson.OPT_PASSTHROUGH_DATETIME).decode()
        return await self.fetch(name, {**(params or {}), "rows": packed})

    async def execute_rows(
        self, name: str, rows: Sequence[Mapping[str, Any]], params: Mapping[str, Any] | None = None
    ) -> None:
        query = self._queries[name]
        bound = [self._bind(query, {**(params or {}), **row}) for row in rows]
        with _mapped():
            await self._conn.executemany(query.sql, bound)

    async def copy_rows(self, name: str, rows: Sequence[Mapping[str, Any]], *, guarded: bool = True) -> None:
        if not rows:
            return
        sql, values = self._positional_rows(name, rows)
        if not guarded:
            with _mapped():
                await self._conn.executemany(sql, values)
            return
        await self._guarded_many(sql, values)

    async def insert_rows(self, name: str, rows: Sequence[Mapping[str, Any]]) -> int:
        if not rows:
            return 0
        return await self._guarded_many(*self._positional_rows(name, rows))

    def _positional_rows(self, name: str, rows: Sequence[Mapping[str, Any]]) -> tuple[str, list[list[Any]]]:
        """Query ``name`` with ``?`` placeholders and each row's values in their order (``now`` read once)."""
        query = self._queries[name]
        sql, pick = _positional(query)
        if "now" in query.params:
            now = codec.to_micros(self._clock.now())  # once, not once per row
            rows = [{**row, "now": now} for row in rows]
        return sql, [[v if type(v) in _PLAIN else _encode(v) for v in pick(row)] for row in rows]

    async def _guarded_many(self, sql: str, values: list[list[Any]]) -> int:
        """``executemany`` under a savepoint; the rows it changed."""
        # executemany stops at the first refused row, keeping the ones before: a savepoint undoes them.
        with _mapped():
            await self._conn.execute("SAVEPOINT copy_rows")
        try:
            with _mapped():
                cursor = await self._conn.executemany(sql, values)
        except BaseException:
            with contextlib.suppress(sqlite3.Error, ValueError):
                await self._conn.execute("ROLLBACK TO copy_rows")
                await self._conn.execute("RELEASE copy_rows")
            raise
        with _mapped():
            await self._conn.execute("RELEASE copy_rows")
        return max(cursor.rowcount, 0)

    async def now(self) -> datetime:
        return self._clock.now()


#: ``PRAGMA auto_vacuum`` value of INCREMENTAL.
_INCREMENTAL = 2
#: The largest file :meth:`SqliteStore.start` vacuums once to switch it to incremental vacuum (≈ 1 s).
VACUUM_AT_START_MAX_BYTES = 64 * 1024 * 1024
#: A PRAGMA refused with "database is locked" is retried after 5 ms, doubling up to 100 ms.
_PRAGMA_RETRY_S, _PRAGMA_RETRY_CAP_S = 0.005, 0.1


async def _pragma(conn: aiosqlite.Connection, name: str) -> int:
    with _mapped():
        async with conn.execute(f"PRAGMA {name}") as cursor:
            row = await cursor.fetchone()
    return int(row[0]) if row is not None else 0


class SqliteStore(Store):
    """A store in one SQLite file (or ``:memory:``).

    :param path: the database file, or ``":memory:"``
    :param clock: the clock that decides leases and due times (default: the system clock)
    :param partitions: N in ``partition = hash(id) mod N`` for new automations
    :param migrate_on_start: apply pending migrations in :meth:`start`
    :param busy_timeout_s: how long to wait for another process's write lock
    :param stop_wait_s: how long :meth:`stop` waits for a running transaction before closing under it
    """

    dialect = "sqlite"

    def __init__(
        self,
        path: str,
        *,
        clock: Clock | None = None,
        partitions: int = 64,
        migrate_on_start: bool = True,
        busy_timeout_s: float = 5.0,
        stop_wait_s: float = 5.0,
    ) -> None:
        self.path = path
        self.clock = clock or SystemClock()
        self._partitions = partitions
        self._migrate_on_start = migrate_on_start
        self._busy_timeout_ms = int(busy_timeout_s * 1000)
        self._stop_wait_s = stop_wait_s
        self._queries = load_queries("sqlite")
        self._conn: aiosqlite.Connection | None = None
        self._lock = WriterLock()
        self._outbox_signal = asyncio.Event()
        self._stopped = False

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    async def start(self) -> None:
        if self._conn is not None:
            return
        if self._stopped:
            raise StorageUnavailable("this SqliteStore was stopped; open a new one")
        self._conn = await self._open()
        if self._migrate_on_start:
            await self.migrate()
        await self._ensure_incremental_vacuum()

    async def _open(self) -> aiosqlite.Connection:
        try:
            conn = await aiosqlite.connect(self.path, isolation_level=None)
        except sqlite3.Error as exc:
            raise StorageUnavailable(f"cannot open sqlite database {self.path!r}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        for pragma in (
            f"PRAGMA busy_timeout = {self._busy_timeout_ms}",
            # Before anything writes page 1 (journal_mode = WAL does): a new file then has it from
            # its first table; an existing one only after a VACUUM (_ensure_incremental_vacuum).
            "PRAGMA auto_vacuum = INCREMENTAL",
            "PRAGMA journal_mode = WAL",
            "PRAGMA synchronous = NORMAL",
            # Checkpoint the WAL into the database every ~40 MB instead of every ~4 MB: a batch
            # of 1000 runs writes hundreds of pages, and each checkpoint ends in an fsync. Same
            # durability (commits are in the WAL either way); the WAL file grows larger between
            # checkpoints and the committing transaction that crosses the mark pays for it.
            "PRAGMA wal_autocheckpoint = 10000",
            "PRAGMA foreign_keys = ON",
        ):
            await self._pragma(conn, pragma)
        return conn

    async def _pragma(self, conn: aiosqlite.Connection, pragma: str) -> None:
        """One PRAGMA, retried while the file is locked: switching a new file to WAL needs its exclusive
        lock and SQLite answers "database is locked" at once, without its busy handler, when another
        connection opening the same new file holds it (processes migrating one file at once)."""
        attempt, waited = 0, 0.0
        while True:
            try:
                await conn.execute(pragma)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or waited * 1000 >= self._busy_timeout_ms:
                    raise
            attempt += 1
            delay = exponential_delay(attempt, base_s=_PRAGMA_RETRY_S, max_s=_PRAGMA_RETRY_CAP_S)
            await asyncio.sleep(delay)  # a retry backoff, bounded by busy_timeout in all
            waited += delay

    async def _ensure_incremental_vacuum(self) -> None:
        """Switch a database made before 0010 to ``auto_vacuum = INCREMENTAL``, which takes a VACUUM (a
        rewrite of the whole file, under an exclusive lock, outside any transaction): done once here
        when the file is at most ``VACUUM_AT_START_MAX_BYTES``; a larger one is left as it is, with a
        warning. Without the mode the retention sweeper's deletes still free pages for reuse; the
        file just does not shrink."""
        conn = self._connection()
        async with self._lock:
            mode = await _pragma(conn, "auto_vacuum")
            if mode == _INCREMENTAL or self.path == ":memory:":
                return
            size = await _pragma(conn, "page_count") * await _pragma(conn, "page_size")
            if size > VACUUM_AT_START_MAX_BYTES:
                _log.warning("sqlite_auto_vacuum_not_incremental", path=self.path, bytes=size,
                             fix="stop every instance, then: sqlite3 <file> "
                                 "'PRAGMA auto_vacuum = INCREMENTAL; VACUUM;'")
                return
            with _mapped():
                await conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                await conn.execute("VACUUM")
            _log.info("sqlite_auto_vacuum_incremental", path=self.path, bytes=size)

    async def reclaim_space(self, max_pages: int = 2000) -> int:
        """``PRAGMA incremental_vacuum(max_pages)`` in a transaction of its own (sqlite3 steps a
        pragma once per ``execute``, freeing one page: ``executescript`` runs it to the end); returns
        the free pages left."""
        if isinstance(max_pages, bool) or not isinstance(max_pages, int) or not 1 <= max_pages <= 1_000_000:
            raise InvalidInput("max_pages", max_pages, "an integer from 1 to 1000000")
        async with self._lock:
            conn = self._connection()
            with _mapped():
                await conn.executescript(f"PRAGMA incremental_vacuum({max_pages});")
            return await _pragma(conn, "freelist_count")

    async def stop(self) -> None:
        """Close once the running transaction is done, waiting for it at most ``stop_wait_s``.

        A transaction stuck between statements (awaiting something unbounded) must not hang
        shutdown: past the bound the connection is closed under it, which rolls it back, and its
        next statement fails with :class:`StorageUnavailable`. Shielded: a cancelled ``stop()``
        still closes the connection it has already detached.
        """
        self._stopped = True
        conn, self._conn = self._conn, None
        if conn is not None:
            await asyncio.shield(self._close_after_writer(conn))

    async def _close_after_writer(self, conn: aiosqlite.Connection) -> None:
        if not await self._acquire_lock_within(self._stop_wait_s):
            _log.warning("sqlite_closed_under_transaction", path=self.path, stop_wait_s=self._stop_wait_s)
            await conn.close()
            return
        try:
            await conn.close()
        finally:
            self._lock.release()

    async def _acquire_lock_within(self, timeout: float) -> bool:  # noqa: ASYNC109
        """Take the write lock, or give up after ``timeout`` seconds (False)."""
        try:
            async with asyncio.timeout(timeout):
                await self._lock.acquire()
        except TimeoutError:
            return False
        return True

    def _connection(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise StorageUnavailable("the SqliteStore is not started")
        return self._conn

    @asynccontextmanager
    async def _immediate(self, *, urgent: bool = False) -> AsyncIterator[aiosqlite.Connection]:
        """The write lock of this process (``urgent``: ahead of the ordinary waiters), then of the file
        (BEGIN IMMEDIATE); commit or roll back."""
        await self._lock.acquire(urgent=urgent)
        try:
            conn = self._connection()
            with _mapped():
                await conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                with _mapped():
                    await conn.execute("COMMIT")
            except BaseException:
                await asyncio.shield(self._rollback(conn))
                raise
        finally:
            self._lock.release()

    @staticmethod
    async def _rollback(conn: aiosqlite.Connection) -> None:
        # The connection may be gone or have no transaction: then there is nothing to undo.
        with contextlib.suppress(sqlite3.Error, ValueError):
            await conn.execute("ROLLBACK")

    async def migrate(self) -> list[str]:
        applied: list[str] = []
        async with self._immediate() as conn:
            sql = _SqliteRunner(conn, self._queries, self.clock)
            await sql.fetch("create_migrations_table")
            done = {row["version"] for row in await sql.fetch("applied_migrations")}
            for migration in load_migrations("sqlite"):
                if migration.version in done:
                    continue
                with _mapped():
                    for statement in split_statements(migration.sql):
                        await conn.execute(statement)
                await sql.fetch("record_migration", {"version": migration.version, "name": migration.name})
                applied.append(migration.name)
        return applied

    @asynccontextmanager
    async def transaction(self, *, urgent: bool = False) -> AsyncIterator[Transaction]:
        async with self._immediate(urgent=urgent) as conn:
            tx = SqlTransaction(_SqliteRunner(conn, self._queries, self.clock), partitions=self._partitions)
            yield tx
        if tx.outbox_touched:
            self._outbox_signal.set()

    async def wait_for_outbox(self, timeout: float) -> bool:  # noqa: ASYNC109
        try:
            await asyncio.wait_for(self._outbox_signal.wait(), timeout)
        except TimeoutError:
            return False
        self._outbox_signal.clear()
        return True
