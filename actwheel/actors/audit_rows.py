"""The audit rows of a lifecycle event: one rule for the auditor, which appends them for the events it hears,
and for the executor router, which appends those of its own finishes in the finish transaction.

An event's rows are idempotent by event id: the envelope id, or ``<envelope id>:<run id>`` for each entry of a
batched ``run.<status>`` / ``action.completed`` message. The router writes the rows of the lifecycle messages
its finish appends to the outbox (same ids, actor, time and details as the auditor would write) and marks
those outbox rows with :data:`AUDITED_HEADER`; the auditor then acknowledges such a delivery without writing.
A delivery without the mark (an older engine's, or any other event) is audited as it always was, and a row
written twice is kept once (its event id is a unique key): the mark only saves work, it never decides what
the trail holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from actwheel.bus.base import Delivery
from actwheel.bus.envelope import Envelope, decode
from actwheel.messages import ActionsCompleted, RunsTransitioned, message_from_data
from actwheel.storage.records import NewAuditEntry, NewOutboxMessage

__all__ = ["AUDITED_HEADER", "audit_entries_of", "audited_in_place", "entries_of", "pre_audited"]

#: On a ``run.<status>`` or ``action.completed`` message: its audit rows were committed with it, in the
#: transaction that appended it to the outbox.
AUDITED_HEADER = "x-actwheel-audited"

_MAX_EVENT_ID = 255
_PHASES = {"run": "LIFECYCLE", "automation": "AUTOMATION", "action": "ACTION", "cdc": "CDC"}
#: Batched message types and the key of their entries; the only types a publisher may mark audited.
_BATCHED = {RunsTransitioned.TYPE: "runs", ActionsCompleted.TYPE: "actions"}
_NOT_AUDITED = ("run.ready", "automation.due", "run.step")
#: The routing keys only the engine may publish on the events exchange: a mark on anything else is ignored.
_ENGINE_ONLY = ("run.", "action.")


def audit_entries_of(delivery: Delivery) -> list[NewAuditEntry]:
    """The audit rows for a delivery: none for traffic that is not audited (``run.ready``, ``run.step``),
    one per entry of a batched lifecycle message (a malformed batch is refused whole, never half-audited:
    :class:`~actwheel.errors.InvalidMessage`), else one."""
    return entries_of(delivery.routing_key, delivery.envelope)


def entries_of(routing_key: str, envelope: Envelope, *, checked: bool = False) -> list[NewAuditEntry]:
    """The audit rows of ``envelope`` published with ``routing_key``; ``checked``: the caller built the
    message itself, so its batch is not parsed again."""
    if routing_key in _NOT_AUDITED:
        return []
    data: dict[str, Any] = envelope.data
    phase = _PHASES.get(routing_key.split(".", 1)[0], "EVENT")
    entries = _BATCHED.get(envelope.type)
    if entries is None:
        return [_entry(routing_key, envelope, phase, data, envelope.id)]
    if not checked:
        message_from_data(envelope.type, data)
    return [_entry(routing_key, envelope, phase, item, _entry_id(envelope.id, item["run_id"]))
            for item in data[entries]]


def audited_in_place(rows: Sequence[NewOutboxMessage]) -> tuple[list[NewOutboxMessage], list[NewAuditEntry]]:
    """``rows`` with each lifecycle message (``run.<status>``, ``action.completed``) marked
    :data:`AUDITED_HEADER`, and those messages' audit rows: the caller appends both in one transaction. Other
    rows are returned as they are, for the auditor to audit."""
    marked: list[NewOutboxMessage] = []
    entries: list[NewAuditEntry] = []
    for row in rows:
        envelope = decode(row.body)
        if envelope.type not in _BATCHED:
            marked.append(row)
            continue
        entries.extend(entries_of(row.routing_key, envelope, checked=True))
        marked.append(replace(row, headers={**row.headers, AUDITED_HEADER: True}))
    return marked, entries


def pre_audited(delivery: Delivery) -> bool:
    """A lifecycle message whose rows its publisher committed with it (:func:`audited_in_place`). Only the
    engine publishes ``run.*`` and ``action.*`` (the broker's permissions: docs/security.md)."""
    return (delivery.headers.get(AUDITED_HEADER) is True and delivery.envelope.type in _BATCHED
            and delivery.routing_key.startswith(_ENGINE_ONLY))


def _entry_id(envelope_id: str, run_id: str) -> str:
    """``<envelope id>:<run id>``, or its SHA-256 when that is longer than an event id may be."""
    event_id = f"{envelope_id}:{run_id}"
    return event_id if len(event_id) <= _MAX_EVENT_ID else hashlib.sha256(event_id.encode()).hexdigest()


def _entry(routing_key: str, envelope: Envelope, phase: str, data: dict[str, Any], event_id: str) -> NewAuditEntry:
    return NewAuditEntry(
        event_id=event_id, phase=phase, actor=envelope.source, occurred_at=envelope.occurred_at,
        run_id=_text(data.get("run_id")), automation_id=_text(data.get("automation_id")),
        details={"event": routing_key, **{k: v for k, v in data.items() if k != "run_id"}})


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
