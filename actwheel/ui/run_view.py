"""What the run page shows of a run's history: its audit trail as a timeline, and a composite's steps.

Both are read from what the engine records, never guessed: the trail's phases (the pipeline packs an
attempt's phases into one row, read back one entry per phase with its own time) and the result a
composite writes when an attempt ends (``data.steps``, compensations included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actwheel.storage.records import AuditEntry, Run

__all__ = ["Phase", "StepState", "steps_of", "timeline"]

_COMPOSITE = "composite"


@dataclass(frozen=True, slots=True)
class Phase:
    """One trail entry; ``offset_s`` from the run's ``scheduled_for`` (its creation for an ad hoc run)."""

    entry: AuditEntry
    offset_s: float
    duration_s: float | None


@dataclass(frozen=True, slots=True)
class StepState:
    name: str
    type: str
    state: str
    summary: str | None = None
    compensation: str | None = None


def timeline(run: Run, entries: list[AuditEntry]) -> list[Phase]:
    """The trail, oldest first, each entry with its offset and its duration (:func:`_duration_of`)."""
    base = run.scheduled_for or run.created_at
    return [Phase(e, (e.occurred_at - base).total_seconds(), _duration_of(e, entries[i + 1:i + 2]))
            for i, e in enumerate(entries)]


def _duration_of(entry: AuditEntry, following: list[AuditEntry]) -> float | None:
    """What the pipeline measured (``duration_s``, the execution), else the time until the next phase of
    the same attempt (its phases share their row's ``seq``); None for the last phase of an attempt."""
    measured = entry.details.get("duration_s")
    if isinstance(measured, int | float) and not isinstance(measured, bool):
        return float(measured)
    if following and following[0].seq == entry.seq:
        return (following[0].occurred_at - entry.occurred_at).total_seconds()
    return None


def steps_of(run: Run, result: Any) -> list[StepState]:
    """A composite's steps: as its (masked) ``result`` recorded them when the attempt ended; before that,
    or when none ran, the snapshot's steps, not run (yet). Empty for any other action."""
    recorded = _recorded_steps(result)
    if recorded:
        return recorded
    if run.action_type != _COMPOSITE:
        return []
    planned = run.action_config.get("steps")
    state = "not run" if run.finished_at is not None else "not finished yet"
    return [StepState(name=str(s.get("name", "?")), type=str(s.get("type", "?")), state=state)
            for s in (planned if isinstance(planned, list) else []) if isinstance(s, dict)]


def _recorded_steps(result: Any) -> list[StepState]:
    data = result.get("data") if isinstance(result, dict) else None
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        return []
    return [_step_state(s) for s in steps if isinstance(s, dict)]


def _step_state(record: dict[str, Any]) -> StepState:
    """A step of ``data.steps``: an execution's record (``state``, ``result``, ``compensation``) or a dry
    run's report (``status``, ``summary``)."""
    outcome = record.get("result")
    summary = outcome.get("summary") if isinstance(outcome, dict) else record.get("summary")
    compensation = record.get("compensation")
    return StepState(name=str(record.get("name", "?")), type=str(record.get("type", "?")),
                     state=str(record.get("state") or record.get("status") or "?"),
                     summary=None if summary is None else str(summary),
                     compensation=None if compensation is None else str(compensation))
