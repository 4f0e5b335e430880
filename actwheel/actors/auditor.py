"""The auditor: appends the lifecycle events it hears to the audit trail.

Idempotent by event id (the envelope id), so redelivered and duplicated
events leave one row. Concurrent deliveries are group committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actwheel.actors import queues
from actwheel.actors.batching import GroupCommitter
from actwheel.actors.consumer import ConsumerActor, Intake
from actwheel.bus.base import Bus, Delivery, Retry
from actwheel.errors import StorageUnavailable
from actwheel.storage.base import Store
from actwheel.storage.records import NewAuditEntry

__all__ = ["Auditor", "audit_entry_of"]

_PHASES = {"run": "LIFECYCLE", "automation": "AUTOMATION", "action": "ACTION", "cdc": "CDC"}


class Auditor(ConsumerActor):
    name = "auditor"

    def __init__(self, *, bus: Bus, store: Store, queue_prefix: str = "", prefetch: int = 256) -> None:
        super().__init__(bus)
        self._store = store
        self._prefix = queue_prefix
        self._prefetch = prefetch
        self._committer: GroupCommitter[NewAuditEntry, int] = GroupCommitter(self._append)

    def intake(self) -> Sequence[Intake]:
        return (Intake(queues.auditor_events(self.bus.topology, self._prefix), self.on_event, self._prefetch),)

    async def on_event(self, delivery: Delivery) -> None:
        entry = audit_entry_of(delivery)
        if entry is None:
            return
        try:
            await self._committer.submit(entry)
        except StorageUnavailable:
            raise Retry(delay=1.0) from None

    async def run(self) -> None:
        # A fresh committer per (re)start: drain() closes the previous one.
        self._committer = GroupCommitter(self._append)
        await super().run()

    async def drain(self) -> None:
        await self._committer.close()

    async def _append(self, entries: Sequence[NewAuditEntry]) -> list[int]:
        async with self._store.transaction() as tx:
            await tx.audit.append_many(list(entries))
        return [1] * len(entries)


def audit_entry_of(delivery: Delivery) -> NewAuditEntry | None:
    """The audit row for an event, or ``None`` for traffic that is not audited (``run.ready``, ``run.step``)."""
    envelope = delivery.envelope
    if delivery.routing_key in ("run.ready", "automation.due", "run.step"):
        return None
    data: dict[str, Any] = envelope.data
    phase = _PHASES.get(delivery.routing_key.split(".", 1)[0], "EVENT")
    return NewAuditEntry(
        event_id=envelope.id, phase=phase, actor=envelope.source, occurred_at=envelope.occurred_at,
        run_id=_text(data.get("run_id")), automation_id=_text(data.get("automation_id")),
        details={"event": delivery.routing_key, **{k: v for k, v in data.items() if k not in ("run_id",)}})


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
