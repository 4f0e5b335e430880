"""The retention sweeper: bounded history (issue 14).

Every ``interval_s`` the instance holding the ``retention`` job lease removes what is older than
``retention_s`` (``ACTWHEEL_RETENTION_S``, 30 days by default): finished runs with their audit
rows, published outbox rows, dead letters and idempotency keys; and, whatever the window, the
credentials that expired more than a day ago (MCP run-now confirmations, dashboard sessions). It
removes at most ``batch`` rows of a kind per transaction and pauses ``pause_s`` between
transactions, so it never holds locks the claim and finish paths wait on (or SQLite's one writer)
for longer than one small delete; on SQLite it hands the freed pages back to the file after each
batch (incremental vacuum). A stop request ends a sweep between two batches.

Why it is safe: every delete re-checks its condition on the row it removes (a run still open, or
finished after the cutoff, stays), so two sweepers at once are harmless and the lease only saves
the duplicated work (invariant 9). What deleting a run means for dedupe: its key is free again —
an ad hoc request's idempotency key is honoured for the retention window only, and a scheduled
instant cannot fire again because the automation's cursor moved past it when it fired (the cursor
CAS, invariant 2), not because its run row is kept (docs/storage.md, "Retention").

It runs inside the ``recovery`` role: the same instances that sweep leases sweep history.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from actwheel.actors.base import Actor
from actwheel.actors.sleeping import sleep_or_wake
from actwheel.clock import Clock
from actwheel.errors import ActwheelError
from actwheel.logs import get_logger
from actwheel.storage.base import Store, Transaction

__all__ = ["LEASE_NAME", "RetentionReport", "RetentionSweeper"]

_log = get_logger("actwheel.retention")

#: The job lease (table ``job_leases``) that lets one sweeper at a time do the work.
LEASE_NAME = "retention"
#: How long a lease release at stop may take before the lease is left to expire.
_RELEASE_TIMEOUT_S = 2.0
#: How long an expired confirmation or dashboard session is kept (their rows answer "expired", not "unknown").
EXPIRED_KEPT = timedelta(days=1)
#: Free pages given back to the file after each batch that deleted something (SQLite; 8 MiB of 4 KiB pages).
_RECLAIM_PAGES = 2000


@dataclass(kw_only=True)
class RetentionReport:
    """What one sweep did. ``largest_batch``: the most rows one transaction removed (all kinds)."""

    leased: bool = False
    before: datetime | None = None
    batches: int = 0
    runs: int = 0
    audit: int = 0
    outbox: int = 0
    dead_letters: int = 0
    idempotency_keys: int = 0
    confirmations: int = 0
    ui_sessions: int = 0
    largest_batch: int = 0
    free_pages: int = 0
    complete: bool = False

    def count(self, rows: int) -> None:
        self.batches += 1
        self.largest_batch = max(self.largest_batch, rows)


class RetentionSweeper(Actor):
    """Removes history older than ``retention_s``, ``batch`` rows per transaction (see the module)."""

    name = "retention"

    def __init__(self, *, store: Store, clock: Clock, instance: str, retention_s: float,
                 interval_s: float = 300.0, batch: int = 1000, pause_s: float = 0.05,
                 lease_ttl_s: float | None = None) -> None:
        super().__init__()
        self._store = store
        self._clock = clock
        self._instance = instance
        self._retention = timedelta(seconds=retention_s)
        self._interval_s = interval_s
        self._batch = batch
        self._pause_s = pause_s
        # Outlives the pause between two sweeps, so the holder keeps it while it is alive.
        self._lease_ttl_s = lease_ttl_s or max(60.0, 2 * interval_s)

    async def run(self) -> None:
        self.mark_ready()
        try:
            while not self.stopping.is_set():
                try:
                    await self.sweep()
                except ActwheelError:  # the database is away: try again next interval
                    _log.exception("retention_sweep_failed")
                await sleep_or_wake(self._clock, self._interval_s, self.stopping)
        finally:
            await self._release()

    async def sweep(self) -> RetentionReport:
        """One pass over every kind, batch by batch, unless another instance holds the lease."""
        report = RetentionReport()
        async with self._store.transaction() as tx:
            if not await tx.retention.acquire_lease(LEASE_NAME, self._instance, self._lease_ttl_s):
                return report
            now = await tx.now()  # the database clock on PostgreSQL
        before = now - self._retention
        report.leased, report.before = True, before
        steps: list[Callable[[datetime, RetentionReport], Awaitable[bool]]] = [
            self._runs, self._outbox, self._dead_letters, self._idempotency_keys,
            lambda _, r: self._expired_credentials(now - EXPIRED_KEPT, r)]
        for step in steps:
            if not await step(before, report):
                break
        else:
            report.complete = True
        if report.batches and (report.runs or report.outbox or report.dead_letters or report.idempotency_keys
                               or report.confirmations or report.ui_sessions):
            _log.info("retention_swept", before=before.isoformat(), runs=report.runs, audit=report.audit,
                      outbox=report.outbox, dead_letters=report.dead_letters,
                      idempotency_keys=report.idempotency_keys, confirmations=report.confirmations,
                      ui_sessions=report.ui_sessions, batches=report.batches, complete=report.complete)
        return report

    async def _runs(self, before: datetime, report: RetentionReport) -> bool:
        after: tuple[datetime, str] | None = None
        while True:
            async with self._store.transaction() as tx:
                batch = await tx.retention.purge_runs(before, limit=self._batch, after=after)
                held = await self._renew(tx)
            report.count(batch.runs + batch.audit)
            report.runs += batch.runs
            report.audit += batch.audit
            if batch.runs:
                report.free_pages = await self._store.reclaim_space(_RECLAIM_PAGES)
            after = batch.after
            if after is None:
                return True
            if not held or not await self._pause():
                return False

    async def _outbox(self, before: datetime, report: RetentionReport) -> bool:
        after: int | None = 0
        while after is not None:
            async with self._store.transaction() as tx:
                batch = await tx.retention.purge_outbox(before, limit=self._batch, after=after)
                held = await self._renew(tx)
            report.count(batch.rows)
            report.outbox += batch.rows
            if batch.rows:
                report.free_pages = await self._store.reclaim_space(_RECLAIM_PAGES)
            after = batch.after
            if after is not None and (not held or not await self._pause()):
                return False
        return True

    async def _dead_letters(self, before: datetime, report: RetentionReport) -> bool:
        return await self._oldest_first(before, report, "dead_letters")

    async def _idempotency_keys(self, before: datetime, report: RetentionReport) -> bool:
        return await self._oldest_first(before, report, "idempotency_keys")

    async def _oldest_first(self, before: datetime, report: RetentionReport, kind: str) -> bool:
        """Dead letters or idempotency keys: oldest first, until a batch comes back short."""
        while True:
            async with self._store.transaction() as tx:
                purge = (tx.retention.purge_dead_letters if kind == "dead_letters"
                         else tx.retention.purge_idempotency_keys)
                removed = await purge(before, limit=self._batch)
                held = await self._renew(tx)
            report.count(removed)
            setattr(report, kind, getattr(report, kind) + removed)
            if removed < self._batch:
                return True
            if not held or not await self._pause():
                return False

    async def _expired_credentials(self, before: datetime, report: RetentionReport) -> bool:
        """Confirmations and dashboard sessions that expired before ``before``: one short transaction
        (at most what a day of issuing made; nothing else waits on these tables)."""
        async with self._store.transaction() as tx:
            report.confirmations += await tx.confirmations.purge(before)
            report.ui_sessions += await tx.ui_sessions.purge(before)
            await self._renew(tx)
        report.count(report.confirmations + report.ui_sessions)
        return True

    async def _renew(self, tx: Transaction) -> bool:
        """Renew the lease in the batch's transaction; False when another instance took it over."""
        return await tx.retention.acquire_lease(LEASE_NAME, self._instance, self._lease_ttl_s)

    async def _pause(self) -> bool:
        """The pause between two batches; False when a stop was requested (the sweep ends there)."""
        if self._pause_s > 0:
            await sleep_or_wake(self._clock, self._pause_s, self.stopping)
        else:
            await asyncio.sleep(0)
        return not self.stopping.is_set()

    async def _release(self) -> None:
        """Give the lease up at stop (bounded; on failure it expires after its TTL)."""
        with contextlib.suppress(ActwheelError, TimeoutError):
            async with asyncio.timeout(_RELEASE_TIMEOUT_S):
                async with self._store.transaction() as tx:
                    await tx.retention.release_lease(LEASE_NAME, self._instance)
