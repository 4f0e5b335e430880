"""One trail row per run attempt: the pipeline's phases (DISPATCH, PERMISSION, VALIDATE, EXECUTE,
an action's own steps, ...) are stored together in one ``audit`` row of phase ``PIPELINE`` instead of one
row per phase, and read back as one :class:`~actwheel.storage.records.AuditEntry` per phase.

Readers never see the packing: :meth:`AuditRepository.trail` and ``for_automation`` expand a pipeline
row into its phases, each with its own time and the event id ``<run id>:<attempt>:<i>`` that a
per-phase row had. Rows written one per phase (by an older version) read as they were.
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
                   phases: Sequence[PhaseLike]) -> NewAuditEntry:
    """The one row of a run attempt's phases (``phases`` must not be empty)."""
    if not phases:
        raise ValueError("a pipeline trail row needs at least one phase")
    packed = [{"phase": p.phase, "at": p.at.isoformat(), "details": p.details} for p in phases]
    return NewAuditEntry(event_id=event_id, phase=PIPELINE_PHASE, actor=actor, run_id=run_id,
                         automation_id=automation_id, details={"phases": packed}, occurred_at=phases[-1].at)


def expand(entry: AuditEntry) -> list[AuditEntry]:
    """A pipeline row as its phases, in order; any other row as itself."""
    phases = entry.details.get("phases") if entry.phase == PIPELINE_PHASE else None
    if not isinstance(phases, list):
        return [entry]
    return [AuditEntry(seq=entry.seq, event_id=f"{entry.event_id}:{i}", phase=str(p["phase"]), actor=entry.actor,
                       run_id=entry.run_id, automation_id=entry.automation_id, details=dict(p["details"]),
                       occurred_at=datetime.fromisoformat(p["at"]))
            for i, p in enumerate(phases)]


def expand_all(entries: Iterable[AuditEntry]) -> list[AuditEntry]:
    return [phase for entry in entries for phase in expand(entry)]
