"""The auditor: appends the lifecycle events it hears to the audit trail.

Idempotent by event id (the envelope id; ``<envelope id>:<run id>`` for each
entry of a batched ``run.<status>`` / ``action.completed`` message), so
redelivered and duplicated events leave one row. Concurrent deliveries are
group committed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from actwheel.actors import queues
from actwheel.actors.consumer import ConsumerActor, Intake, outcome_of
from actwheel.batching import GroupCommitter
from actwheel.bus.base import Bus, Delivery, Retry
from actwheel.errors import ActwheelError, InvalidInput, StorageUnavailable
from actwheel.messages import ActionsCompleted, RunsTransitioned, message_from_data
from actwheel.storage.base import Store
from actwheel.storage.records import NewAuditEntry

__all__ = ["Auditor", "audit_entries_of"]

_MAX_EVENT_ID = 255
_PHASES = {"run": "LIFECYCLE", "automation": "AUTOMATION", "action": "ACTION", "cdc": "CDC"}


class Auditor(ConsumerActor):
    name = "auditor"

    def __init__(self, *, bus: Bus, store: Store, queue_prefix: str = "", prefetch: int = 256) -> None:
        super().__init__(bus)
        self._store = store
        self._prefix = queue_prefix
        self._prefetch = prefetch
        self._committer: GroupCommitter[list[NewAuditEntry], int | ActwheelError] = GroupCommitter(
            self._append, max_batch=100)

    def intake(self) -> Sequence[Intake]:
        return (Intake(queues.auditor_events(self.bus.topology, self._prefix), self.on_event, self._prefetch),)

    async def on_event(self, delivery: Delivery) -> None:
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


def audit_entries_of(delivery: Delivery) -> list[NewAuditEntry]:
    """The audit rows for an event: none for traffic that is not audited (``run.ready``, ``run.step``),
    one per entry of a batched lifecycle message, else one."""
    envelope = delivery.envelope
    if delivery.routing_key in ("run.ready", "automation.due", "run.step"):
        return []
    data: dict[str, Any] = envelope.data
    phase = _PHASES.get(delivery.routing_key.split(".", 1)[0], "EVENT")
    entries = _BATCHED.get(envelope.type)
    if entries is None:
        return [_entry(delivery, phase, data, envelope.id)]
    message_from_data(envelope.type, data)  # a malformed batch is refused whole (InvalidMessage), never half-audited
    return [_entry(delivery, phase, item, _entry_id(envelope.id, item["run_id"])) for item in data[entries]]


def _entry_id(envelope_id: str, run_id: str) -> str:
    """``<envelope id>:<run id>``, or its SHA-256 when that is longer than an event id may be."""
    event_id = f"{envelope_id}:{run_id}"
    return event_id if len(event_id) <= _MAX_EVENT_ID else hashlib.sha256(event_id.encode()).hexdigest()


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
