"""One trail row per run attempt: the pipeline's phases (DISPATCH, PERMISSION, VALIDATE, EXECUTE,
an action's own steps, ...) are stored together in one ``audit`` row of phase ``PIPELINE`` instead of one
row per phase, and read back as one :class:`~actwheel.storage.records.AuditEntry` per phase. The lifecycle
entries the finish of that attempt writes (``LIFECYCLE`` for its ``run.<status>``, ``ACTION`` for its
``action.completed``) travel in the same row, under ``events``, each with its own event id, actor and time.

Readers never see the packing: :meth:`AuditRepository.trail` and ``for_automation`` expand a pipeline
row into its phases, each with its own time and the event id ``<run id>:<attempt>:<i>`` that a
per-phase row had, then its events as the rows the auditor would have written. An event id read twice
(an older auditor wrote the same lifecycle entry as a row of its own) is kept once, the first. Rows
written one per phase (by an older version) read as they were.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from actwheel.storage.records import AuditEntry, NewAuditEntry

__all__ = ["PIPELINE_PHASE", "PhaseLike", "expand", "expand_all", "pipeline_entry"]

#: The phase of a packed row; its details hold ``phases``: [{"phase", "at", "details"}, ...].
PIPELINE_PHASE = "PIPELINE"


class PhaseLike(Protocol):
    """What the pipeline records per phase (``actwheel.actions.pipeline.AuditRecord``)."""

    @property
    def phase(self) -> str: ...

    @property
    def details(self) -> dict[str, Any]: ...

    @property
    def at(self) -> datetime: ...


def pipeline_entry(*, event_id: str, actor: str, run_id: str, automation_id: str | None,
                   phases: Sequence[PhaseLike], events: Sequence[NewAuditEntry] = ()) -> NewAuditEntry:
    """The one row of a run attempt's phases (``phases`` must not be empty), carrying ``events``: the
    lifecycle entries of the same run committed with it."""
    if not phases:
        raise ValueError("a pipeline trail row needs at least one phase")
    # The times stay datetimes: orjson writes them as isoformat() would (a test holds the two equal), in a
    # tenth of the time — seven a run, ≈ 0.8 µs each.
    packed = [{"phase": p.phase, "at": p.at, "details": p.details} for p in phases]
    details: dict[str, Any] = {"phases": packed}
    if events:
        details["events"] = [{"event_id": e.event_id, "phase": e.phase, "actor": e.actor, "at": e.occurred_at,
                              "automation_id": e.automation_id, "details": e.details} for e in events]
    return NewAuditEntry(event_id=event_id, phase=PIPELINE_PHASE, actor=actor, run_id=run_id,
                         automation_id=automation_id, details=details, occurred_at=phases[-1].at)


def expand(entry: AuditEntry) -> list[AuditEntry]:
    """A pipeline row as its phases, in order, then its events; any other row as itself."""
    phases = entry.details.get("phases") if entry.phase == PIPELINE_PHASE else None
    if not isinstance(phases, list):
        return [entry]
    expanded = [AuditEntry(seq=entry.seq, event_id=f"{entry.event_id}:{i}", phase=str(p["phase"]),
                           actor=entry.actor, run_id=entry.run_id, automation_id=entry.automation_id,
                           details=dict(p["details"]), occurred_at=datetime.fromisoformat(p["at"]))
                for i, p in enumerate(phases)]
    events = entry.details.get("events")
    for e in events if isinstance(events, list) else []:
        at = e.get("at")
        expanded.append(AuditEntry(seq=entry.seq, event_id=str(e["event_id"]), phase=str(e["phase"]),
                                   actor=str(e["actor"]), run_id=entry.run_id,
                                   automation_id=e.get("automation_id") or entry.automation_id,
                                   details=dict(e["details"]),
                                   occurred_at=entry.occurred_at if at is None else datetime.fromisoformat(at)))
    return expanded


def expand_all(entries: Iterable[AuditEntry]) -> list[AuditEntry]:
    """Every row expanded, in order; an event id seen already is left out (the first is kept)."""
    seen: set[str] = set()
    out: list[AuditEntry] = []
    for entry in entries:
        for one in expand(entry):
            if one.event_id not in seen:
                seen.add(one.event_id)
                out.append(one)
    return out
