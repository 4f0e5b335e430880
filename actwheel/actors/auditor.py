"""The auditor: appends the lifecycle events it hears to the audit trail.

Idempotent by event id (the envelope id; ``<envelope id>:<run id>`` for each
entry of a batched ``run.<status>`` / ``action.completed`` message), so
redelivered and duplicated events leave one row. Concurrent deliveries are
group committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actwheel.actors import queues
from actwheel.actors.batching import GroupCommitter
from actwheel.actors.consumer import ConsumerActor, Intake
from actwheel.bus.base import Bus, Delivery, Retry
from actwheel.errors import StorageUnavailable
from actwheel.messages import ActionsCompleted, RunsTransitioned
from actwheel.storage.base import Store
from actwheel.storage.records import NewAuditEntry

__all__ = ["Auditor", "audit_entries_of"]

_PHASES = {"run": "LIFECYCLE", "automation": "AUTOMATION", "action": "ACTION", "cdc": "CDC"}


class Auditor(ConsumerActor):
    name = "auditor"

    def __init__(self, *, bus: Bus, store: Store, queue_prefix: str = "", prefetch: int = 256) -> None:
        super().__init__(bus)
        self._store = store
        self._prefix = queue_prefix
        self._prefetch = prefetch
        self._committer: GroupCommitter[list[NewAuditEntry], int] = GroupCommitter(self._append, max_batch=100)

    def intake(self) -> Sequence[Intake]:
        return (Intake(queues.auditor_events(self.bus.topology, self._prefix), self.on_event, self._prefetch),)

    async def on_event(self, delivery: Delivery) -> None:
        entries = audit_entries_of(delivery)
        if not entries:
            return
        try:
            await self._committer.submit(entries)
        except StorageUnavailable:
            raise Retry(delay=1.0) from None

    async def run(self) -> None:
        # A fresh committer per (re)start: drain() closes the previous one.
        self._committer = GroupCommitter(self._append, max_batch=100)
        await super().run()

    async def drain(self) -> None:
        await self._committer.close()

    async def _append(self, batches: Sequence[list[NewAuditEntry]]) -> list[int]:
        async with self._store.transaction() as tx:
            await tx.audit.append_many([entry for entries in batches for entry in entries])
        return [len(entries) for entries in batches]


def audit_entries_of(delivery: Delivery) -> list[NewAuditEntry]:
    """The audit rows for an event: none for traffic that is not audited (``run.ready``, ``run.step``),
    one per entry of a batched lifecycle message, else one."""
    envelope = delivery.envelope
    if delivery.routing_key in ("run.ready", "automation.due", "run.step"):
        return []
    data: dict[str, Any] = envelope.data
    phase = _PHASES.get(delivery.routing_key.split(".", 1)[0], "EVENT")
    entries = _BATCHED.get(envelope.type)
    if entries is not None and isinstance(data.get(entries), list):
        return [_entry(delivery, phase, item, f"{envelope.id}:{item.get('run_id')}")
                for item in data[entries] if isinstance(item, dict)]
    return [_entry(delivery, phase, data, envelope.id)]


#: Batched message types and the key of their entries.
_BATCHED = {RunsTransitioned.TYPE: "runs", ActionsCompleted.TYPE: "actions"}


def _entry(delivery: Delivery, phase: str, data: dict[str, Any], event_id: str) -> NewAuditEntry:
    envelope = delivery.envelope
    return NewAuditEntry(
        event_id=event_id, phase=phase, actor=envelope.source, occurred_at=envelope.occurred_at,
        run_id=_text(data.get("run_id")), automation_id=_text(data.get("automation_id")),
        details={"event": delivery.routing_key, **{k: v for k, v in data.items() if k != "run_id"}})


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
