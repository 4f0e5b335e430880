"""The CDC emitter: the outbox relay (invariant 4).

Takes unpublished outbox rows in order, publishes them with confirms, marks
them published. Woken by the store's commit signal (NOTIFY on PostgreSQL),
polling as a fallback. A crash between publish and mark republishes the
batch: consumers dedupe by event id, so that is a duplicate, never a loss.
A row the bus cannot route is moved to the dead-letter table (and counted)
rather than blocking the relay forever. Every few seconds it reports the
backlog; every hour it deletes rows published more than ``retention_s`` ago, in bounded batches
(``tx.retention.purge_outbox``, the sweeper's: at most ``purge_batch`` rows per transaction, in id
order, stopping at the first row created after the cutoff), at most ``purge_batches`` of them
between two relay rounds, so a purge of an hour of outbox never holds one long transaction nor
stalls the relay (docs/storage.md, "Retention").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any

from actwheel.actors.base import Actor
from actwheel.actors.sleeping import wait_or_wake
from actwheel.bus.base import Bus
from actwheel.bus.envelope import Envelope, decode
from actwheel.bus.wire import message_headers
from actwheel.clock import Clock
from actwheel.errors import ActwheelError, InvalidInput, InvalidMessage, Unroutable
from actwheel.logs import get_logger
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import NewDeadLetter, OutboxMessage

__all__ = ["CdcEmitter"]

_log = get_logger("actwheel.cdc")
_BACKLOG_EVERY = timedelta(seconds=5)
_PURGE_EVERY = timedelta(hours=1)


class CdcEmitter(Actor):
    """The ``cdc`` role (one name for the role, the module and the class): relays the outbox to the bus."""

    name = "cdc"

    def __init__(self, *, store: Store, bus: Bus, clock: Clock, batch: int = 500, poll_s: float = 1.0,
                 on_dead_letter: Callable[[str], None] | None = None, on_backlog: Callable[[int], None] | None = None,
                 retention_s: float = 86_400.0, purge_batch: int = 1000, purge_batches: int = 10) -> None:
        super().__init__()
        self._store = store
        self._bus = bus
        self._clock = clock
        self._batch = batch
        self._poll_s = poll_s
        self._on_dead_letter = on_dead_letter or (lambda _: None)
        self._on_backlog = on_backlog or (lambda _: None)
        self._retention = timedelta(seconds=retention_s)
        self._next_backlog: datetime | None = None
        self._next_purge: datetime | None = None
        self._purge_batch = purge_batch
        self._purge_batches = purge_batches
        #: The purge under way: its cutoff, the id cursor and the rows removed so far (None: none under way).
        self._purging: tuple[datetime, int, int] | None = None
        self.published = 0

    async def run(self) -> None:
        self.mark_ready()
        while not self.stopping.is_set():
            try:
                moved = await self.relay_once()
            except ActwheelError:  # the broker or the database is away: poll again
                _log.exception("relay_failed")
                moved = 0
            if moved < self._batch and not self.stopping.is_set():
                await self._housekeeping()
                await wait_or_wake(self._store.wait_for_outbox(self._poll_s), self.stopping)
        await self.relay_until_empty()

    async def _housekeeping(self) -> None:
        """Report the backlog (every 5 s) and purge old published rows (hourly, a few batches per call); never fatal."""
        now = self._clock.now()
        try:
            if self._next_backlog is None or now >= self._next_backlog:
                self._next_backlog = now + _BACKLOG_EVERY
                async with self._store.transaction() as tx:
                    self._on_backlog(await tx.outbox.backlog())
            if self._purging is None and (self._next_purge is None or now >= self._next_purge):
                self._next_purge = now + _PURGE_EVERY
                self._purging = (now - self._retention, 0, 0)
            if self._purging is not None:
                await self.purge_some()
        except ActwheelError:
            _log.exception("outbox_housekeeping_failed")

    async def purge_some(self) -> bool:
        """Up to ``purge_batches`` batches of the purge under way; True when it is done (or none was)."""
        for _ in range(self._purge_batches):
            if self._purging is None:
                return True
            before, after, total = self._purging
            async with self._store.transaction() as tx:
                batch = await tx.retention.purge_outbox(before, limit=self._purge_batch, after=after)
            total += batch.rows
            if batch.after is None:
                self._purging = None
                if total:
                    _log.info("outbox_purged", rows=total)
                return True
            self._purging = (before, batch.after, total)
        return self._purging is None

    async def relay_until_empty(self, max_rounds: int = 100) -> int:
        """Relay until nothing is left (bounded), e.g. while draining."""
        total = 0
        for _ in range(max_rounds):
            moved = await self.relay_once()
            total += moved
            if moved == 0:
                break
        return total

    async def relay_once(self) -> int:
        """Publish one batch in order; returns how many rows were published or dead-lettered.

        Where the store has row locks (PostgreSQL), take, publish and mark happen in one
        transaction holding the rows, so relays of several instances split the outbox instead of
        each publishing every row. Otherwise (SQLite: one writer, which a publish waiting on a
        full in-process queue must not hold) the rows are taken, published, then marked, each in an
        urgent transaction (:meth:`Store.transaction`): two short statements that every message waits on
        go ahead of a burst's plans of thousands of rows instead of behind them.
        """
        if self._store.row_locks:
            async with self._store.transaction() as tx:
                rows = await tx.outbox.take_batch(self._batch, exclusive=True)
                if rows:
                    await self._finish(tx, rows, await self._publish(rows))
        else:
            async with self._store.transaction(urgent=True) as tx:
                rows = await tx.outbox.take_batch(self._batch)
            if rows:
                dead = await self._publish(rows)
                async with self._store.transaction(urgent=True) as tx:
                    await self._finish(tx, rows, dead)
        self.published += len(rows)
        return len(rows)

    @staticmethod
    async def _finish(tx: Transaction, rows: Sequence[OutboxMessage], dead: list[tuple[OutboxMessage, str]]) -> None:
        for row, reason in dead:
            await tx.dead_letters.add(NewDeadLetter(source="outbox", reason=reason, ref_id=str(row.id),
                                                    payload={"exchange": row.exchange, "routing_key": row.routing_key}))
        await tx.outbox.mark_published([row.id for row in rows])

    async def _publish(self, rows: Sequence[OutboxMessage]) -> list[tuple[OutboxMessage, str]]:
        dead: list[tuple[OutboxMessage, str]] = []
        for exchange, group in groupby(rows, key=lambda r: r.exchange):
            batch = list(group)
            items, headers, undecodable = _items(batch)
            dead.extend(undecodable)
            try:
                await self._bus.publish_many(exchange, items, headers=headers)
            except Unroutable:
                dead.extend(await self._publish_one_by_one(exchange, batch))
        for _, reason in dead:
            self._on_dead_letter(reason)
        return dead

    async def _publish_one_by_one(self, exchange: str,
                                  batch: Sequence[OutboxMessage]) -> list[tuple[OutboxMessage, str]]:
        dead = []
        for row in batch:
            items, headers, _ = _items([row])
            if not items:
                continue  # dead-lettered already (undecodable, or headers the bus cannot carry)
            try:
                await self._bus.publish(exchange, row.routing_key, items[0][1], headers=headers[0])
            except Unroutable:
                _log.warning("outbox_unroutable", exchange=exchange, routing_key=row.routing_key)
                dead.append((row, "unroutable"))
        return dead


def _items(rows: Sequence[OutboxMessage]) -> tuple[list[tuple[str, Envelope]], list[dict[str, Any]],
                                                   list[tuple[OutboxMessage, str]]]:
    """What to publish — ``(routing key, envelope)`` and the row's headers, each — and the undecodable rows."""
    items, headers, bad = [], [], []
    for row in rows:
        try:
            envelope = decode(row.body)
        except InvalidMessage:
            bad.append((row, "undecodable"))
            continue
        try:
            headers.append(message_headers(row.headers))
        except InvalidInput:
            bad.append((row, "bad_headers"))
            continue
        items.append((row.routing_key, envelope))
    return items, headers, bad
