"""The runs a plan or an event becomes, and their announcement: one builder for every path that creates runs.

The planner (scheduled instants of stored automations, business events) and the transient timers
(``durable: false``) all create runs here, so a run carries the same snapshots (action, config,
policy), the same owner snapshot and the same status rules whichever path made it; only the dedupe
key, the origin and the extra context differ. :func:`announce_runs` then appends, in the caller's
transaction, ``run.ready`` for each PENDING run and ``run.<status>`` for the others (SKIPPED at
planning, UNKNOWN / FAILED at recovery) — the rule every creator and the recovery sweeper share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from actwheel.actors.planning import Plan, PlannedInstant
from actwheel.events import EventFactory, transition_of
from actwheel.run_context import OWNER_KEY, SKIPPED_KEY, owner_snapshot, skipped_range
from actwheel.storage.base import Transaction
from actwheel.storage.records import Automation, NewAuditEntry, NewOutboxMessage, NewRun, Origin, Run, RunStatus

__all__ = ["announce_runs", "event_run", "owner_context", "planned_runs", "schedule_dedupe_key"]

#: A scheduled or event run carries no scopes of its own: the router authorises it against its
#: owner's ceiling as it is when the run is dispatched.
_OWNER_SCOPES: tuple[str, ...] = ()
_OWNER_INACTIVE = "owner_inactive"


def owner_context(automation: Automation) -> dict[str, Any]:
    """The context every run of ``automation`` starts from: who it runs for, with what authority."""
    return {OWNER_KEY: owner_snapshot(automation.owner_id, _OWNER_SCOPES, automation.agent_id)}


def schedule_dedupe_key(instant: datetime) -> str:
    """A stored automation's instant: ``schedule:<ISO UTC>`` (one run per instant, however often announced)."""
    return f"schedule:{instant.astimezone(UTC).isoformat()}"


def planned_runs(automation: Automation, plan: Plan, *, dedupe_key_of: Callable[[datetime], str],
                 context: Mapping[str, Any]) -> list[NewRun]:
    """One run per planned instant: PENDING, or SKIPPED with the plan's reason (each its own context copy).

    A range (a parked overlap's instants) is one row: its first instant's key, ``$skipped`` naming the rest.
    An instant planned ahead (fire-ahead) may not start before it: ``not_before`` is the instant."""
    return [_new_run(automation, dedupe_key=dedupe_key_of(i.at), origin=Origin.SCHEDULE, scheduled_for=i.at,
                     skip_reason=i.skip_reason, context=_range_context(context, i),
                     not_before=i.at if i.ahead else None)
            for i in plan.instants]


def _range_context(context: Mapping[str, Any], instant: PlannedInstant) -> Mapping[str, Any]:
    if instant.through is None:
        return context
    return {**context, SKIPPED_KEY: skipped_range(instant.through.astimezone(UTC).isoformat(), instant.count)}


def event_run(automation: Automation, *, event_id: str, context: Mapping[str, Any], at: datetime,
              owner_active: bool) -> NewRun:
    """The run a business event makes: ``event:<event id>``; SKIPPED(owner_inactive) for a banned owner."""
    return _new_run(automation, dedupe_key=f"event:{event_id}", origin=Origin.EVENT, scheduled_for=at,
                    skip_reason=None if owner_active else _OWNER_INACTIVE,
                    context={**context, **owner_context(automation)})


def _new_run(automation: Automation, *, dedupe_key: str, origin: Origin, scheduled_for: datetime,
             skip_reason: str | None, context: Mapping[str, Any], not_before: datetime | None = None) -> NewRun:
    a = automation
    return NewRun(automation_id=a.id, dedupe_key=dedupe_key, owner_id=a.owner_id, action_type=a.action_type,
                  action_config=a.action_config, policy=a.policy, origin=origin, scheduled_for=scheduled_for,
                  status=RunStatus.SKIPPED if skip_reason else RunStatus.PENDING, reason=skip_reason,
                  context=dict(context), not_before=not_before)


async def announce_runs(tx: Transaction, events: EventFactory, runs: Sequence[Run],
                        extra: Sequence[NewOutboxMessage] = ()) -> None:
    """Append ``run.ready`` for the PENDING ``runs``, ``run.<status>`` for the others, then ``extra``.

    In ``tx``, the transaction that wrote the runs (invariant 4): a run is announced if and only if it
    was committed. Nothing is appended when there is nothing to say.
    """
    rows = _ready_rows(events, [r for r in runs if r.status is RunStatus.PENDING])
    rows += events.runs_transitioned([transition_of(r) for r in runs if r.status is not RunStatus.PENDING])
    rows += extra
    if rows:
        await tx.outbox.append_many(rows)
    refused = [_refused_at_planning(r, events.source) for r in runs if r.reason == _OWNER_INACTIVE]
    if refused:
        await tx.audit.append_many(refused)


def _ready_rows(events: EventFactory, pending: Sequence[Run]) -> list[NewOutboxMessage]:
    """``run.ready`` for ``pending``: one group per ``not_before`` (the runs planned ahead of an instant are
    announced with it, so that a router waits for it instead of claiming too early), in first-seen order."""
    if all(r.not_before is None for r in pending):
        return events.runs_ready([r.id for r in pending])
    groups: dict[datetime | None, list[str]] = {}
    for run in pending:
        groups.setdefault(run.not_before, []).append(run.id)
    return [row for at, ids in groups.items() for row in events.runs_ready(ids, not_before=at)]


def _refused_at_planning(run: Run, actor: str) -> NewAuditEntry:
    """The PERMISSION row of an instant SKIPPED(owner_inactive) when it was planned (the owner was banned
    then), like the one the router writes for a run it refuses at dispatch."""
    return NewAuditEntry(event_id=f"{run.id}:{run.attempt}:permission", phase="PERMISSION", actor=actor,
                         run_id=run.id, automation_id=run.automation_id, occurred_at=run.created_at,
                         details={"granted": False, "reason": _OWNER_INACTIVE, "owner_id": run.owner_id,
                                  "at": "planning"})
