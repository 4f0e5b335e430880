"""The recovery sweeper: what to do with runs whose owner vanished (invariant 7).

Every ``interval_s`` it looks at

- RUNNING runs whose lease expired: STRONG actions are retried; BEST_EFFORT
  ones are retried only when the action confirms no side effect happened,
  else UNKNOWN; NONE → UNKNOWN. UNKNOWN is never retried automatically. A run
  that has used its attempts ends FAILED(lease_expired);
- RETRY_WAIT runs whose ``not_before`` passed: back to PENDING, announced;
- PENDING runs whose ``run.ready`` was never consumed: announced again (the
  claim is a conditional UPDATE, so a duplicate announcement is harmless).

Every correctness decision is a conditional UPDATE on the lease epoch, so
several sweepers on several instances can run at once.
"""

from __future__ import annotations

import asyncio

from actwheel.actions.base import ActionContext, Idempotency
from actwheel.actions.registry import ActionRegistry
from actwheel.actors.base import Actor
from actwheel.actors.runs import announce_runs
from actwheel.actors.sleeping import sleep_or_wake
from actwheel.clock import Clock
from actwheel.errors import ActwheelError
from actwheel.events import EventFactory
from actwheel.logs import get_logger
from actwheel.policy import Policy
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import NewAuditEntry, Run, RunStatus

__all__ = ["RecoverySweeper"]

_log = get_logger("actwheel.recovery")
#: How long a BEST_EFFORT action's confirm may take before the run is left UNKNOWN.
_CONFIRM_TIMEOUT_S = 10.0


class RecoverySweeper(Actor):
    name = "recovery"

    def __init__(self, *, store: Store, registry: ActionRegistry, events: EventFactory, clock: Clock,
                 instance: str, interval_s: float = 5.0, stale_pending_s: float = 30.0, batch: int = 500) -> None:
        super().__init__()
        self._store = store
        self._registry = registry
        self._events = events
        self._clock = clock
        self._instance = instance
        self._interval_s = interval_s
        self._stale_pending_s = stale_pending_s
        self._batch = batch

    async def run(self) -> None:
        self.mark_ready()
        while not self.stopping.is_set():
            try:
                await self.sweep()
            except ActwheelError:
                _log.exception("sweep_failed")
            await sleep_or_wake(self._clock, self._interval_s, self.stopping)

    async def sweep(self) -> dict[str, int]:
        """One pass; returns how many runs each rule touched."""
        return {
            "expired": await self._recover_expired(),
            "retries": await self._promote_retries(),
            "stale_pending": await self._reannounce_stale(),
        }

    async def _recover_expired(self) -> int:
        async with self._store.transaction() as tx:
            expired = await tx.runs.expired_leases(self._batch)
        # Verdicts may ask an action (confirm) over the network: outside any transaction, bounded.
        verdicts = [(run, await self._bounded_verdict(run)) for run in expired]
        async with self._store.transaction() as tx:
            recovered = [r for r in [await self._recover(tx, run, verdict) for run, verdict in verdicts]
                         if r is not None]
            await announce_runs(tx, self._events, recovered)
        return len(recovered)

    async def _recover(self, tx: Transaction, run: Run, verdict: tuple[RunStatus, str]) -> Run | None:
        status, reason = verdict
        recovered = await tx.runs.recover_expired(run.id, run.lease_epoch, status, reason=reason)
        if recovered is not None:
            await tx.audit.append(NewAuditEntry(
                event_id=f"{run.id}:recovery:{run.lease_epoch}", phase="RECOVERY", actor=self._instance,
                run_id=run.id, automation_id=run.automation_id,
                details={"lease_owner": run.lease_owner, "epoch": run.lease_epoch, "status": status.value,
                         "reason": reason}))
            _log.info("run_recovered", run_id=run.id, status=status.value, reason=reason)
        return recovered

    async def _bounded_verdict(self, run: Run) -> tuple[RunStatus, str]:
        try:
            async with asyncio.timeout(_CONFIRM_TIMEOUT_S):
                return await self._verdict(run)
        except TimeoutError:
            return RunStatus.UNKNOWN, "lease_expired_confirm_timed_out"

    async def _verdict(self, run: Run) -> tuple[RunStatus, str]:
        if run.attempt >= _max_attempts(run):
            return RunStatus.FAILED, "lease_expired"
        try:
            definition = self._registry.get(run.action_type)
        except ActwheelError:
            return RunStatus.FAILED, "unknown_type"
        idempotency = definition.idempotency_for(run.action_config)
        if idempotency is Idempotency.STRONG:
            return RunStatus.PENDING, "lease_expired_retry"
        if idempotency is Idempotency.BEST_EFFORT:
            ctx = ActionContext(run_id=run.id, owner_id=run.owner_id, automation_id=run.automation_id,
                                attempt=run.attempt, clock=self._clock)
            if await definition.confirm(run.action_config, ctx) is False:
                return RunStatus.PENDING, "lease_expired_confirmed_no_effect"
        return RunStatus.UNKNOWN, "lease_expired"

    async def _promote_retries(self) -> int:
        async with self._store.transaction() as tx:
            promoted = await tx.runs.promote_due_retries(self._batch)
            if promoted:
                await tx.outbox.append_many(self._events.runs_ready([r.id for r in promoted]))
        return len(promoted)

    async def _reannounce_stale(self) -> int:
        async with self._store.transaction() as tx:
            stale = await tx.runs.stale_pending(self._stale_pending_s, self._batch)
            if stale:
                await tx.outbox.append_many(self._events.runs_ready([r.id for r in stale]))
        return len(stale)


def _max_attempts(run: Run) -> int:
    try:
        return Policy.parse(run.policy).retry.max_attempts
    except ActwheelError:
        return Policy().retry.max_attempts
