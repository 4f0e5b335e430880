"""The seam between the repositories and a dialect: :class:`SqlRunner` runs the named queries
of ``sql/<dialect>/queries.sql`` on one transaction's connection.

The repositories (one module each: ``_automations``, ``_runs``, ``_ontology``, ``_outbox``,
``_identity`` and the rest; ``_repos`` assembles them into a transaction) are written once
against it; ``sqlite.py`` and ``postgres.py`` each implement it. Parameter names are the same
in both dialects.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

__all__ = ["Row", "SqlRunner"]

#: One result row, by column name (asyncpg ``Record`` or a dict from SQLite).
Row = Mapping[str, Any]


class SqlRunner(ABC):
    """Runs named queries on the transaction's connection; maps driver errors to ours.

    :raises IntegrityViolation: a constraint refused the statement
    :raises StorageUnavailable: connection lost, timeout, or a transient conflict (retry the transaction)
    """

    #: set once the transaction appended to the outbox (the relay is woken at commit)
    outbox_touched: bool = False

    @abstractmethod
    async def fetch(self, name: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        """Run query ``name`` and return its rows."""

    async def fetchrow(self, name: str, params: Mapping[str, Any] | None = None) -> Row | None:
        rows = await self.fetch(name, params)
        return rows[0] if rows else None

    @abstractmethod
    async def guarded_row(self, name: str, params: Mapping[str, Any] | None = None) -> Row | None:
        """:meth:`fetchrow`, but a constraint violation leaves the transaction usable
        (a savepoint on PostgreSQL; SQLite undoes only the failed statement anyway)."""

    @abstractmethod
    async def fetch_rows(
        self, name: str, rows: Sequence[Mapping[str, Any]], params: Mapping[str, Any] | None = None
    ) -> list[Row]:
        """Run batched query ``name`` over ``rows`` (same keys in each) in one statement."""

    async def insert_rows(self, name: str, rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert ``rows`` with query ``name`` (``ON CONFLICT … DO NOTHING``), in order, all or none
        on a constraint violation; how many were inserted (a row a unique key already holds is not).

        By default one batched statement (:meth:`fetch_rows`, its ``RETURNING`` counted); SQLite
        binds each row's values instead, which spares it parsing the batch as JSON.
        """
        return len(await self.fetch_rows(name, rows))

    @abstractmethod
    async def execute_rows(
        self, name: str, rows: Sequence[Mapping[str, Any]], params: Mapping[str, Any] | None = None
    ) -> None:
        """Run query ``name`` once per row (or once over all rows); returns nothing."""

    @abstractmethod
    async def copy_rows(self, name: str, rows: Sequence[Mapping[str, Any]], *, guarded: bool = True) -> None:
        """Bulk-insert ``rows`` as they are with query ``name`` (``COPY … FROM STDIN`` on PostgreSQL,
        one ``INSERT … VALUES`` run by ``executemany`` on SQLite), in order.

        ``guarded``: under a savepoint, so that a constraint violation undoes every row of the
        call and leaves the transaction usable (then :class:`IntegrityViolation` is raised).
        """

    @abstractmethod
    async def now(self) -> datetime:
        """The clock that decides correctness for this dialect."""

    def saw_now(self, row: Row) -> None:  # noqa: B027 - a hook: only PostgreSQL's clock is the database's
        """A statement returned the database's clock in column ``now`` of ``row``: :meth:`now`
        may answer with it instead of asking the database again (PostgreSQL)."""
