"""The PostgreSQL adapter (asyncpg): the store for running several instances.

An asyncpg pool; every acquire and every statement has a timeout; driver errors are
translated here and nowhere else. A connection the server dropped is detected by the pool
and replaced on the next acquire, so the pool never empties. Correctness times are the
database's ``now()``. The relay is woken by LISTEN/NOTIFY on a channel per schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from functools import cache
from operator import itemgetter
from typing import Any

import asyncpg
import orjson

from actwheel.errors import IntegrityViolation, StorageError, StorageFull, StorageUnavailable, TransientStorageError
from actwheel.redact import redact_url
from actwheel.storage._codec import JsonText
from actwheel.storage._repos import SqlTransaction
from actwheel.storage._runner import Row, SqlRunner
from actwheel.storage._sql import Query, load_migrations, load_queries, split_statements
from actwheel.storage.base import Store, Transaction

__all__ = ["PostgresStore"]

_INTEGRITY_KINDS: tuple[tuple[type[Exception], str], ...] = (
    (asyncpg.UniqueViolationError, "unique"),
    (asyncpg.ForeignKeyViolationError, "foreign_key"),
    (asyncpg.CheckViolationError, "check"),
    (asyncpg.NotNullViolationError, "not_null"),
)
_UNREACHABLE = (
    asyncpg.PostgresConnectionError,
    asyncpg.InternalClientError,  # the protocol of a connection the server dropped under us
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    ConnectionError,
    OSError,
)

#: Seconds each statement of a migration may take (and the wait for another process's migration lock).
MIGRATION_TIMEOUT_S = 600.0
_CLOSED_MARKERS = ("connection has been released back to the pool", "connection is closed")


def _translate(exc: BaseException, *, at_commit: bool = False) -> Exception | None:
    """Our error for a driver error, or None when ``exc`` is not the driver's.

    Deadlocks, serialisation failures and connections lost before COMMIT become
    :class:`TransientStorageError` (the database rolled the transaction back: run it again);
    a connection lost during COMMIT leaves the outcome unknown, so it is not transient.
    """
    for kind_type, kind in _INTEGRITY_KINDS:
        if isinstance(exc, kind_type):
            constraint = getattr(exc, "constraint_name", None) or "?"
            return IntegrityViolation(kind, constraint, str(exc))
    if isinstance(exc, asyncpg.DiskFullError):
        return StorageFull("postgres", str(exc))
    if isinstance(exc, asyncpg.DeadlockDetectedError):
        return TransientStorageError("deadlock", str(exc))
    if isinstance(exc, asyncpg.SerializationError):
        return TransientStorageError("serialization", str(exc))
    if isinstance(exc, TimeoutError | asyncpg.QueryCanceledError):
        return StorageUnavailable(f"postgres timed out: {exc or type(exc).__name__}")
    if isinstance(exc, _UNREACHABLE) or _closed_under_us(exc):
        if at_commit:
            return StorageUnavailable(f"connection lost during COMMIT, outcome unknown: {type(exc).__name__}: {exc}")
        return TransientStorageError("connection_lost", f"{type(exc).__name__}: {exc}")
    if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError):
        return StorageError(f"postgres: {type(exc).__name__}: {exc}")
    return None


def _closed_under_us(exc: BaseException) -> bool:
    """asyncpg's word for a connection that closed while we held it: the pool detaches the
    proxy (we never release a connection mid-transaction), or the connection reports closed."""
    return isinstance(exc, asyncpg.InterfaceError) and any(m in str(exc) for m in _CLOSED_MARKERS)


@contextmanager
def _mapped(*, at_commit: bool = False) -> Iterator[None]:
    try:
        yield
    except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, TimeoutError, OSError) as exc:
        ours = _translate(exc, at_commit=at_commit)
        if ours is None:
            raise
        raise ours from exc


_COPY = re.compile(r"COPY\s+(\w+)\s*\(([^)]*)\)\s+FROM\s+STDIN", re.IGNORECASE)


@cache
def _copy_target(sql: str) -> tuple[str, tuple[str, ...], Any]:
    """Table, columns and a row → tuple getter of a named ``COPY table (columns) FROM STDIN`` query."""
    statement = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    match = _COPY.fullmatch(statement.strip())
    if match is None:
        raise ValueError(f"not a COPY … FROM STDIN query: {sql[:60]!r}")
    columns = tuple(col.strip() for col in match.group(2).split(","))
    if len(columns) < 2:
        raise ValueError(f"a COPY query needs at least two columns: {sql[:60]!r}")
    return match.group(1), columns, itemgetter(*columns)


class _PgRunner(SqlRunner):
    def __init__(self, conn: asyncpg.Connection, queries: Mapping[str, Query], timeout: float) -> None:
        self._conn = conn
        self._queries = queries
        self._timeout = timeout
        self._now: datetime | None = None
        self.outbox_touched = False

    def _args(self, query: Query, params: Mapping[str, Any] | None) -> list[Any]:
        given = params or {}
        return [given[name] for name in query.params]

    async def fetch(self, name: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        query = self._queries[name]
        with _mapped():
            rows: list[Row] = await self._conn.fetch(query.sql, *self._args(query, params), timeout=self._timeout)
        return rows

    async def guarded_row(self, name: str, params: Mapping[str, Any] | None = None) -> Row | None:
        savepoint = self._conn.transaction()  # nested in the open transaction: a SAVEPOINT
        with _mapped():
            await savepoint.start()
        try:
            row = await self.fetchrow(name, params)
        except BaseException:
            with _mapped():
                await savepoint.rollback()
            raise
        with _mapped():
            await savepoint.commit()
        return row

    async def fetch_rows(
        self, name: str, rows: Sequence[Mapping[str, Any]], params: Mapping[str, Any] | None = None
    ) -> list[Row]:
        if not rows:
            return []
        if "rows" not in self._queries[name].params:
            # A few scalar columns: one array each (unnest), binary-encoded by asyncpg.
            return await self.fetch(name, {**_columns(rows), **(params or {})})
        # One JSON document for the whole batch: orjson encodes it in C, far cheaper than
        # asyncpg's per-element array encoding of JSON columns; the query unpacks it with json_to_recordset.
        packed = orjson.dumps(rows, default=_embed_json, option=orjson.OPT_PASSTHROUGH_SUBCLASS).decode()
        return await self.fetch(name, {**(params or {}), "rows": packed})

    async def execute_rows(
        self, name: str, rows: Sequence[Mapping[str, Any]], params: Mapping[str, Any] | None = None
    ) -> None:
        if not rows:
            return
        query = self._queries[name]
        with _mapped():
            await self._conn.execute(
                query.sql, *self._args(query, {**_columns(rows), **(params or {})}), timeout=self._timeout
            )

    async def copy_rows(self, name: str, rows: Sequence[Mapping[str, Any]], *, guarded: bool = True) -> None:
        if not rows:
            return
        table, columns, pick = _copy_target(self._queries[name].sql)
        records = [pick(row) for row in rows]
        if not guarded:
            await self._copy(table, columns, records)
            return
        savepoint = self._conn.transaction()
        with _mapped():
            await savepoint.start()
        try:
            await self._copy(table, columns, records)
        except BaseException:
            with _mapped():
                await savepoint.rollback()
            raise
        with _mapped():
            await savepoint.commit()

    async def _copy(self, table: str, columns: tuple[str, ...], records: list[Any]) -> None:
        with _mapped():
            await self._conn.copy_records_to_table(table, records=records, columns=columns, timeout=self._timeout)

    async def execute_script(self, sql: str) -> None:
        with _mapped():
            await self._conn.execute(sql, timeout=self._timeout)

    def saw_now(self, row: Row) -> None:
        self._now = row["now"]

    async def now(self) -> datetime:
        # now() is the transaction's start time: the same for every statement of it.
        if self._now is None:
            row = await self.fetchrow("db_now")
            assert row is not None
            self._now = row["now"]
        return self._now


_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_PG_INFINITY = 2**63 - 1
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)


def _timestamptz_out(value: datetime) -> tuple[int]:
    """A ``timestamptz`` on the wire (binary format): microseconds since 2000-01-01 UTC.

    asyncpg's built-in codec computes the same through several Python-level steps per value;
    this one costs about 0.25 µs less per value sent, and a planning batch sends three per run.
    A naive datetime is refused (the input checks refuse them before any SQL anyway); the
    extreme datetimes go back as ``±infinity``, what :func:`_timestamptz_in` reads them from.
    """
    if value == _LATEST:
        return (_PG_INFINITY,)
    if value == _EARLIEST:
        return (-_PG_INFINITY - 1,)
    return ((value - _PG_EPOCH) // _MICROSECOND,)


def _timestamptz_in(value: tuple[int]) -> datetime:
    """The inverse of :func:`_timestamptz_out`, in UTC; ``±infinity`` become the extreme datetimes."""
    micros = value[0]
    if micros >= _PG_INFINITY:
        return _LATEST
    if micros <= -_PG_INFINITY:
        return _EARLIEST
    return _PG_EPOCH + timedelta(microseconds=micros)


async def _set_codecs(conn: asyncpg.Connection) -> None:
    """Each pooled connection's codecs (the pool's ``init``)."""
    await conn.set_type_codec("timestamptz", schema="pg_catalog", encoder=_timestamptz_out,
                              decoder=_timestamptz_in, format="tuple")


async def _no_session_state(_: asyncpg.Connection) -> None:
    """The pool's reset on release: nothing to undo beyond what asyncpg itself does.

    asyncpg still rolls back a transaction left open and drops listeners; its default reset
    query (advisory unlock all, CLOSE ALL, UNLISTEN *, RESET ALL) would cost one more round trip
    per transaction. Pooled connections here carry no session state: the only advisory lock is
    transaction-scoped (migrations), no statement uses SET or cursors, and LISTEN runs on a
    connection of its own (:meth:`PostgresStore._ensure_listener`).
    """


def _embed_json(value: Any) -> Any:
    """JSON documents travel as JSON (not as strings holding JSON); other str subclasses as str."""
    if isinstance(value, JsonText):
        return orjson.Fragment(str(value))
    if isinstance(value, str):
        return str(value)
    raise TypeError(f"cannot encode {type(value).__name__} in a batch")


def _columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Rows → one array per column (what ``unnest`` takes)."""
    return {key: [row[key] for row in rows] for key in rows[0]}


def _channel(schema: str) -> str:
    """The relay's wake-up channel of ``schema``: the outbox's insert trigger (migration 0005)
    notifies ``'actwheel_outbox_'`` and the first 12 hex digits of the SHA-256 of the schema's
    name in UTF-8 (not md5, which a server in FIPS mode refuses)."""
    digest = hashlib.sha256(schema.encode()).hexdigest()[:12]
    return f"actwheel_outbox_{digest}"


class PostgresStore(Store):
    """A store in a PostgreSQL database (the schema is the URL's ``search_path``, else ``public``).

    :param dsn: ``postgresql://user:password@host:port/db[?search_path=schema]``
    :param acquire_timeout_s: at most this long to get a pooled connection
    :param statement_timeout_s: at most this long for any one statement
    :param partitions: N in ``partition = hash(id) mod N`` for new automations
    :param migrate_on_start: apply pending migrations in :meth:`start`
    """

    dialect = "postgres"
    row_locks = True

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        acquire_timeout_s: float = 10.0,
        statement_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        partitions: int = 64,
        migrate_on_start: bool = True,
    ) -> None:
        self._dsn = dsn
        self._min_size = min_size
        self._max_size = max_size
        self.writers = max_size
        self._acquire_timeout = acquire_timeout_s
        self._statement_timeout = statement_timeout_s
        self._connect_timeout = connect_timeout_s
        self._partitions = partitions
        self._migrate_on_start = migrate_on_start
        self._queries = load_queries("postgres")
        self._pool: asyncpg.Pool | None = None
        self._channel = ""
        self._listener: asyncpg.Connection | None = None
        self._outbox_signal = asyncio.Event()
        self._stopped = False

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self._dsn)!r})"

    async def start(self) -> None:
        if self._pool is not None:
            return
        if self._stopped:
            raise StorageUnavailable("this PostgresStore was stopped; open a new one")
        try:
            self._pool = await asyncpg.create_pool(
                self._dsn,
                min_size=self._min_size,
                max_size=self._max_size,
                timeout=self._connect_timeout,
                command_timeout=self._statement_timeout,
                statement_cache_size=256,
                init=_set_codecs,
                reset=_no_session_state,
            )
        except Exception as exc:
            raise StorageUnavailable(f"cannot connect to {redact_url(self._dsn)}: {exc}") from exc
        try:
            async with self._connection() as conn:
                schema = await _PgRunner(conn, self._queries, self._statement_timeout).fetchrow("current_schema")
            assert schema is not None
            self._channel = _channel(str(schema["schema"]))
            if self._migrate_on_start:
                await self.migrate()
        except BaseException:  # a start that failed leaves no connection open behind it
            pool, self._pool = self._pool, None
            if pool is not None:
                pool.terminate()
            raise

    async def stop(self) -> None:
        self._stopped = True
        pool, self._pool = self._pool, None
        listener, self._listener = self._listener, None
        if listener is not None:
            await asyncio.shield(_close_quietly(listener, self._connect_timeout))
        if pool is not None:
            try:
                await asyncio.shield(asyncio.wait_for(pool.close(), self._connect_timeout))
            except (TimeoutError, asyncpg.InterfaceError, OSError):
                pool.terminate()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[asyncpg.Connection]:
        if self._pool is None:
            raise StorageUnavailable("the PostgresStore is not started")
        pool = self._pool
        with _mapped():
            conn = await pool.acquire(timeout=self._acquire_timeout)
        try:
            yield conn
        finally:
            await asyncio.shield(self._release(pool, conn))

    async def _release(self, pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
        try:
            await pool.release(conn, timeout=self._acquire_timeout)
        except Exception:  # a broken connection: drop it, the pool opens a fresh one on demand
            with contextlib.suppress(Exception):
                conn.terminate()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[_PgRunner]:
        async with self._begun() as (conn, tr):
            sql = _PgRunner(conn, self._queries, self._statement_timeout)
            try:
                yield sql  # an outbox insert notifies the relays itself (a trigger), delivered at COMMIT
                with _mapped(at_commit=True):
                    await tr.commit()
            except BaseException:
                await asyncio.shield(_rollback_quietly(tr, conn))
                raise

    @asynccontextmanager
    async def _begun(self) -> AsyncIterator[tuple[asyncpg.Connection, Any]]:
        """A pooled connection with an open transaction. A connection the server dropped while
        idle in the pool is found out at BEGIN, before any work: drop it and take another."""
        for attempt in range(self._max_size + 1):
            async with self._connection() as conn:
                tr = conn.transaction()
                try:
                    with _mapped():
                        await tr.start()
                except StorageUnavailable:
                    if attempt == self._max_size:
                        raise
                    with contextlib.suppress(asyncpg.InterfaceError):  # asyncpg may have released it already
                        conn.terminate()
                    continue
                yield conn, tr
                return

    @asynccontextmanager
    async def _migration_transaction(self) -> AsyncIterator[_PgRunner]:
        """A transaction on a connection of its own, whose every statement (COMMIT too) may take
        :data:`MIGRATION_TIMEOUT_S`: the pool's connections are bound by the statement timeout."""
        timeout = max(self._statement_timeout, MIGRATION_TIMEOUT_S)
        with _mapped():
            conn = await asyncpg.connect(self._dsn, timeout=self._connect_timeout, command_timeout=timeout)
        try:
            await _set_codecs(conn)
            tr = conn.transaction()
            with _mapped():
                await tr.start()
            try:
                yield _PgRunner(conn, self._queries, timeout)
                with _mapped(at_commit=True):
                    await tr.commit()
            except BaseException:
                await asyncio.shield(_rollback_quietly(tr, conn))
                raise
        finally:
            await asyncio.shield(_close_quietly(conn, self._connect_timeout))

    async def migrate(self) -> list[str]:
        """Apply what is missing, in one transaction. A migration's statements get
        :data:`MIGRATION_TIMEOUT_S` each, not the store's per-statement bound (an index build on a big
        table is not a slow query)."""
        applied: list[str] = []
        async with self._migration_transaction() as sql:
            # The lock first: two processes must not both create the version table.
            await sql.fetch("migration_lock")
            await sql.fetch("create_migrations_table")
            done = {row["version"] for row in await sql.fetch("applied_migrations")}
            for migration in load_migrations("postgres"):
                if migration.version in done:
                    continue
                for statement in split_statements(migration.sql):
                    await sql.execute_script(statement)
                await sql.fetch("record_migration", {"version": migration.version, "name": migration.name})
                applied.append(migration.name)
        return applied

    @asynccontextmanager
    async def transaction(self, *, urgent: bool = False) -> AsyncIterator[Transaction]:
        # ``urgent`` changes nothing here: the pool's connections write concurrently, no queue to jump.
        async with self._transaction() as sql:
            tx = SqlTransaction(sql, partitions=self._partitions)
            yield tx
        if tx.outbox_touched:
            self._outbox_signal.set()  # this process's relay need not wait for the round trip

    async def wait_for_outbox(self, timeout: float) -> bool:  # noqa: ASYNC109
        await self._ensure_listener()
        try:
            await asyncio.wait_for(self._outbox_signal.wait(), timeout)
        except TimeoutError:
            return False
        self._outbox_signal.clear()
        return True

    async def _ensure_listener(self) -> None:
        """LISTEN on a connection of its own; when it cannot be had, waiting degrades to polling."""
        if self._listener is not None and not self._listener.is_closed():
            return
        if self._pool is None:
            raise StorageUnavailable("the PostgresStore is not started")
        try:
            conn = await asyncpg.connect(self._dsn, timeout=self._connect_timeout)
            await conn.add_listener(self._channel, self._on_notify)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            self._listener = None
            return
        self._listener = conn

    def _on_notify(self, *_args: Any) -> None:
        self._outbox_signal.set()


async def _rollback_quietly(tr: Any, conn: asyncpg.Connection) -> None:
    try:
        await tr.rollback()
    except Exception:  # the connection broke mid-transaction: the server rolls back; drop it
        with contextlib.suppress(Exception):
            conn.terminate()


async def _close_quietly(conn: asyncpg.Connection, timeout_s: float) -> None:
    try:
        await conn.close(timeout=timeout_s)
    except Exception:
        conn.terminate()
