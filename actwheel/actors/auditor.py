"""The auditor: appends the lifecycle events it hears to the audit trail.

Idempotent by event id (the envelope id; ``<envelope id>:<run id>`` for each
entry of a batched ``run.<status>`` / ``action.completed`` message), so
redelivered and duplicated events leave one row. Concurrent deliveries are
group committed. A lifecycle message whose rows its publisher committed with it
(the executor router's finishes: :mod:`actwheel.actors.audit_rows`) is
acknowledged without writing.
"""

from __future__ import annotations

from collections.abc import Sequence

from actwheel.actors import queues
from actwheel.actors.audit_rows import audit_entries_of, pre_audited
from actwheel.actors.consumer import ConsumerActor, Intake, outcome_of
from actwheel.batching import GroupCommitter
from actwheel.bus.base import Bus, Delivery, Retry
from actwheel.errors import ActwheelError, InvalidInput, StorageUnavailable
from actwheel.storage.base import Store
from actwheel.storage.records import NewAuditEntry

__all__ = ["Auditor", "audit_entries_of"]


class Auditor(ConsumerActor):
    name = "auditor"

    def __init__(self, *, bus: Bus, store: Store, queue_prefix: str = "", prefetch: int = 256) -> None:
        super().__init__(bus)
        self._store = store
        self._prefix = queue_prefix
        self._prefetch = prefetch
        self._committer: GroupCommitter[list[NewAuditEntry], int | ActwheelError] = GroupCommitter(
            self._append, max_batch=100)
        #: Deliveries acknowledged without writing: their rows were committed with them (tests read it).
        self.pre_audited = 0

    def intake(self) -> Sequence[Intake]:
        return (Intake(queues.auditor_events(self.bus.topology, self._prefix), self.on_event, self._prefetch),)

    async def on_event(self, delivery: Delivery) -> None:
        if pre_audited(delivery):
            self.pre_audited += 1
            return
        try:
            entries = audit_entries_of(delivery)
            if not entries:
                return
            outcome = await self._committer.submit(entries)
            if isinstance(outcome, ActwheelError):
                raise outcome
        except StorageUnavailable:
            raise Retry(delay=1.0) from None
        except ActwheelError as exc:  # a malformed batch, or entries the store refuses: this delivery only
            raise outcome_of(exc) from exc

    async def run(self) -> None:
        # A fresh committer per (re)start: drain() closes the previous one.
        self._committer = GroupCommitter(self._append, max_batch=100)
        await super().run()

    async def drain(self) -> None:
        await self._committer.close()

    async def _append(self, batches: Sequence[list[NewAuditEntry]]) -> list[int | ActwheelError]:
        """One transaction for all deliveries; if the store refuses one's entries, each delivery on its own."""
        try:
            async with self._store.transaction() as tx:
                await tx.audit.append_many([entry for entries in batches for entry in entries])
        except InvalidInput:
            return [await self._append_alone(entries) for entries in batches]
        return [len(entries) for entries in batches]

    async def _append_alone(self, entries: list[NewAuditEntry]) -> int | ActwheelError:
        try:
            async with self._store.transaction() as tx:
                await tx.audit.append_many(entries)
        except InvalidInput as exc:
            return exc
        return len(entries)
