"""Firing transient (``durable: false``) automations: the ticker's collaborator for the wheel-only schedules.

A transient automation has no row, so the planner's compare-and-set on a
stored cursor does not apply. When one comes due, this inserts its runs
directly, in ONE transaction with their ``run.ready`` (and ``run.skipped``)
outbox rows, exactly as the planner would: the same snapshots, owner
snapshot, overlap and misfire planning (:func:`plan_instants`), so execution
goes through the same router, pipeline, audit trail and CDC. The runs carry
``automation_id = <the tr_ id>`` (there is no foreign key: the runs of a
transient automation are found like any other's) and the dedupe key
``transient:<id>:<instant ISO UTC>``; the unique ``(automation_id,
dedupe_key)`` makes each instant fire at most once however often it is
announced. The cursor then moves in memory, after the commit; a schedule
that ends leaves the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from actwheel.actors.plan_inputs import active_runs, owner_activity
from actwheel.actors.planning import ParsedSpecs, Plan, latest_per_automation, plan_instants, plannable
from actwheel.actors.runs import announce_runs, owner_context, planned_runs
from actwheel.actors.ticker import ScheduledAutomation, scheduled_of
from actwheel.errors import StorageUnavailable
from actwheel.events import EventFactory
from actwheel.logs import get_logger
from actwheel.messages import DueItem
from actwheel.metrics import Metrics
from actwheel.run_context import CANCELED_DISABLED, TRANSIENT_KEY
from actwheel.storage.base import Store
from actwheel.storage.records import Automation, InsertedRun, NewRun, RunStatus
from actwheel.transient import TransientRegistry, cancel_transient_runs

__all__ = ["TransientTimers", "transient_dedupe_key"]

_log = get_logger("actwheel.transient")


def transient_dedupe_key(automation_id: str, instant: datetime) -> str:
    return f"transient:{automation_id}:{instant.astimezone(UTC).isoformat()}"


class TransientTimers:
    """What the wheel ticker needs of this instance's transient automations (its ``transients``)."""

    def __init__(self, *, registry: TransientRegistry, store: Store, events: EventFactory,
                 metrics: Metrics | None = None) -> None:
        self._registry = registry
        self._store = store
        self._events = events
        self._metrics = metrics
        self._parsed = ParsedSpecs()  # fired every second, edited rarely: parse once per version, as the planner

    def due_before(self, before: datetime) -> list[ScheduledAutomation]:
        return [s for s in map(scheduled_of, self._registry.due_before(before)) if s is not None]

    def get_scheduled(self, automation_id: str) -> ScheduledAutomation | None:
        """The automation's timer, or ``None`` when it is gone, disabled or has no next instant."""
        found = self._registry.find(automation_id)
        return None if found is None else scheduled_of(found)

    def watch(self, on_change: Callable[[str], None]) -> Callable[[], None]:
        return self._registry.watch(on_change)

    async def fire(self, items: Sequence[DueItem]) -> int:
        """Insert the runs of the due instants; returns how many were queued (PENDING).

        All in one transaction; when that fails for another reason than the database, each automation is
        fired on its own, and one that fails again (its trigger or policy no longer parses, the store refuses
        its runs) is disabled: the others fire, and it is not tried again every tick.

        :raises StorageUnavailable: the database failed; what it interrupted moved no cursor: fire again later
        """
        due = latest_per_automation(items)
        async with self._registry.lock:
            try:
                inserted = await self._fire_locked(due)
            except StorageUnavailable:
                raise
            except Exception:  # one of them is broken: find which, alone, so that the others still fire
                inserted = []
                for item in due:
                    inserted += await self._fire_alone(item)
        self._observe(inserted)
        return sum(1 for r in inserted if r.created and r.run.status is RunStatus.PENDING)

    async def _fire_alone(self, item: DueItem) -> list[InsertedRun]:
        try:
            return await self._fire_locked([item])
        except StorageUnavailable:
            raise
        except Exception as exc:  # persistent: the same input fails the same way every time
            await self._disable_failing(item.automation_id, exc)
            return []

    async def _disable_failing(self, automation_id: str, exc: Exception) -> None:
        """Disable it, as a disable by its owner would (canceling its waiting runs), and say why without
        the offending value (it may hold what a log must not)."""
        if self._registry.find(automation_id) is None:
            return
        async with self._store.transaction() as tx:
            canceled = await cancel_transient_runs(tx, self._events, automation_id, CANCELED_DISABLED)
        self._registry.change(automation_id, None, enabled=False)
        _log.error("transient_automation_disabled", automation_id=automation_id, error=type(exc).__name__,
                   field=getattr(exc, "field", None), canceled_runs=len(canceled),
                   hint="it fails to fire whatever the database does; fix it (PATCH) and enable it again")

    async def _fire_locked(self, due: Sequence[DueItem]) -> list[InsertedRun]:
        """One transaction for ``due``; the cursors move after its commit (a failed one moves nothing)."""
        planned, inserted = await self._insert(due)
        for automation, plan in planned:
            self._registry.advance(automation.id, automation.version, automation.next_run_at,
                                   plan.new_next_run_at)
        return inserted

    async def _insert(self, due: Sequence[DueItem]) -> tuple[list[tuple[Automation, Plan]], list[InsertedRun]]:
        found = [(self._registry.find(i.automation_id), i.scheduled_for) for i in due]
        live = [(a, at) for a, at in found if a is not None and plannable(a, at)]
        if not live:
            return [], []
        specs = [(a, at, *self._parsed.get(a)) for a, at in live]
        async with self._store.transaction() as tx:
            now = await tx.now()
            busy = await active_runs(tx, [a for a, _ in live])
            owners = await owner_activity(tx, {a.owner_id for a, _ in live})
            planned = [(a, plan_instants(trigger=trigger, cursor=a.next_run_at,  # type: ignore[arg-type]
                                         scheduled_for=at, now=now, policy=policy,
                                         busy=busy.get(a.id, 0), owner_active=owners[a.owner_id]))
                       for a, at, trigger, policy in specs]
            inserted = await tx.runs.insert_many([run for a, plan in planned for run in _runs_of(a, plan)])
            await announce_runs(tx, self._events, [r.run for r in inserted if r.created])
        ended = [a.id for a, plan in planned if plan.new_next_run_at is None]
        if ended:
            _log.info("transient_automations_ended", automation_ids=ended)
        return planned, inserted

    def _observe(self, inserted: list[InsertedRun]) -> None:
        if self._metrics is not None:
            self._metrics.observe_planned(inserted, lambda run: run.created_at)


def _runs_of(a: Automation, plan: Plan) -> list[NewRun]:
    return planned_runs(a, plan, dedupe_key_of=lambda at: transient_dedupe_key(a.id, at),
                        context={**owner_context(a), TRANSIENT_KEY: a.id})
