"""The executor router: claims ready runs, executes them through the pipeline, finishes them.

``run.ready`` → claim (a conditional UPDATE that sets the lease, invariant 3) →
ack → dispatch pipeline → finish, which commits the new status (only while
this instance still holds the lease and epoch), the audit trail and the
outbox events in one transaction. Finishes from concurrent runs are group
committed. Leases of in-flight runs are renewed together every third of the
lease. Ad hoc ``action.request`` messages become runs and take the same path.

A ``run.ready`` with ``not_before`` (runs planned ahead of their instant: fire-ahead) is held until that
instant, then claimed; the overlap check of such a run is taken at its claim (docs/design.md invariant 14).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import orjson
import structlog

from actwheel.actions.base import ActionResult
from actwheel.actions.pipeline import AuditRecord, DispatchOutcome, DispatchPipeline, DispatchRequest
from actwheel.actions.secrets import masked
from actwheel.actors import queues
from actwheel.actors.audit_rows import audited_in_place
from actwheel.actors.consumer import ConsumerActor, Intake, outcome_of
from actwheel.actors.publishers import authorize_publisher
from actwheel.actors.sleeping import sleep_or_wake
from actwheel.auth.scopes import Grant, grant_of
from actwheel.batching import GroupCommitter
from actwheel.bus.base import Bus, Delivery, Retry
from actwheel.clock import Clock
from actwheel.errors import ActwheelError, InvalidMessage
from actwheel.events import EventFactory, transition_of
from actwheel.logs import get_logger
from actwheel.messages import QUIET_READY_RUNS, ActionRequested, CompletedAction, RunsReady, message_from_data
from actwheel.metrics import Metrics
from actwheel.policy import Policy
from actwheel.run_context import DRY_RUN_KEY, OWNER_KEY, RESERVED_PREFIX, acting_agent
from actwheel.service import ActionService
from actwheel.storage._codec import MAX_JSON_BYTES
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import (
    NewAuditEntry,
    NewDeadLetter,
    NewOutboxMessage,
    Origin,
    Principal,
    PrincipalKind,
    PrincipalStatus,
    Run,
    RunOutcome,
    RunStatus,
)
from actwheel.storage.retry import in_transaction
from actwheel.storage.trail import pipeline_entry

__all__ = ["AHEAD_HELD", "AHEAD_RECLAIMS", "AHEAD_RECLAIM_S", "LANE_RUNS", "LANE_SLOTS", "MAX_RESULT_BYTES",
           "OWNER_INACTIVE", "ExecutorRouter", "authority_of", "bounded_result", "overlapped_outcome",
           "owner_inactive", "planned_ahead", "request_of"]

#: The reason of a run whose owner is missing or banned when it is dispatched (as the planner's).
OWNER_INACTIVE = "owner_inactive"
#: After the claim at the instant of runs planned ahead, how long before the ones still PENDING are claimed
#: again (a database whose clock runs behind this process's, or an edit's open transaction), and how often.
AHEAD_RECLAIM_S = 0.25
AHEAD_RECLAIMS = 8
#: A ``run.ready`` of at most this many runs may start on the lane's :data:`LANE_SLOTS` slots of its own
#: (beyond ``concurrency``), so that a quiet automation's run does not wait behind a burst's. It comes on a
#: queue of its own (``run.ready.quiet``), so deliveries waiting for the shared slots do not hold it back.
LANE_RUNS = QUIET_READY_RUNS
LANE_SLOTS = 16
#: With fire-ahead on, ``run.ready`` deliveries the router may hold until their instant beyond its prefetch
#: (64 at most) for the ones it claims at once, so that held ones do not keep a run now from being delivered.
AHEAD_HELD = 256
_log = get_logger("actwheel.router")


@dataclass(frozen=True, slots=True)
class _Finish:
    run: Run
    outcome: DispatchOutcome
    status: RunStatus
    reason: str | None
    not_before: datetime | None
    masked_result: dict[str, Any]


class ExecutorRouter(ConsumerActor):
    name = "router"

    def __init__(self, *, bus: Bus, store: Store, pipeline: DispatchPipeline, actions: ActionService,
                 events: EventFactory, clock: Clock, metrics: Metrics, instance: str, lease_s: float = 30.0,
                 concurrency: int = 256, queue_prefix: str = "", implicit_owners: bool = False,
                 ahead_held: int = 0) -> None:
        """``implicit_owners``: an owner without a principal row runs with every scope (``--insecure-no-auth``
        only); otherwise such a run is SKIPPED(owner_inactive) like a banned owner's.

        ``ahead_held``: extra ``run.ready`` prefetch for deliveries held until their instant (fire-ahead on:
        :data:`AHEAD_HELD`; 0, the default, keeps the prefetch of the runs claimed at once as it is)."""
        super().__init__(bus)
        self._ahead_held = ahead_held
        self._implicit_owners = implicit_owners
        self._store = store
        self._pipeline = pipeline
        self._actions = actions
        self._events = events
        self._clock = clock
        self._metrics = metrics
        self._instance = instance
        self._lease_s = lease_s
        self._slots = asyncio.Semaphore(concurrency)
        self._lane = _Lane(LANE_SLOTS)
        # One handler gathers slots at a time: handlers that each hold part of the slots they need
        # while waiting for the rest would deadlock once the runs in flight have finished.
        self._gathering = asyncio.Lock()
        self._concurrency = concurrency
        self._prefix = queue_prefix
        self._in_flight: dict[str, tuple[Run, asyncio.Task[None]]] = {}
        # Runs whose finish is submitted: a renewal refused now means the finish committed first (not a
        # lost lease); if the lease really was lost, the fenced finish says so.
        self._finishing: set[str] = set()
        self._finisher: GroupCommitter[_Finish, bool] = GroupCommitter(self._commit_finishes)
        #: Renewals refused since start (each a run this instance stopped executing; benchmarks read it).
        self.leases_lost = 0

    def intake(self) -> Sequence[Intake]:
        topology, prefix = self.bus.topology, self._prefix
        prefetch = max(1, min(self._concurrency, 64))
        return (
            Intake(queues.router_ready(topology, prefix), self.on_ready, prefetch + self._ahead_held),
            Intake(queues.router_ready_quiet(topology, prefix), self.on_ready, prefetch + self._ahead_held),
            Intake(queues.router_requests(topology, prefix), self.on_request, prefetch),
        )

    async def run(self) -> None:
        # A fresh committer per (re)start: drain() closes the previous one.
        self._finisher = GroupCommitter(self._commit_finishes)
        try:
            await super().run()
        except asyncio.CancelledError:
            if self.stopping.is_set():  # the stop's grace is over, wherever the stop found this actor
                self._abandon_in_flight()
            raise

    async def work(self) -> None:
        """Renew the leases of in-flight runs until stopped; then let them finish (bounded by the supervisor)."""
        while not self.stopping.is_set():
            await sleep_or_wake(self._clock, self._lease_s / 3, self.stopping)
            try:
                await self._renew_leases()
            except ActwheelError:  # the database is briefly away: try again next round, never crash
                _log.exception("lease_renewal_failed", in_flight=len(self._in_flight))

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # --- intake --------------------------------------------------------------------------

    async def on_ready(self, delivery: Delivery) -> None:
        try:
            message = message_from_data(delivery.envelope.type, delivery.envelope.data)
            if not isinstance(message, RunsReady):
                raise InvalidMessage("type", delivery.envelope.type, RunsReady.TYPE)
            if message.not_before is not None:
                await self._claim_at(message.run_ids, message.not_before)
            else:
                await self.claim_and_start(message.run_ids)
        except ActwheelError as exc:
            raise outcome_of(exc) from exc

    async def _claim_at(self, run_ids: Sequence[str], instant: datetime) -> None:
        """Runs planned ahead of ``instant`` (fire-ahead): wait for it here, holding the delivery (a process
        that dies meanwhile leaves it unacked: the broker gives it to another instance), then claim.

        What is not claimed and still PENDING — early by the database's clock (the claim needs
        ``not_before <= now``), or skipped while an edit's transaction held its row — is claimed again
        every :data:`AHEAD_RECLAIM_S`, at most :data:`AHEAD_RECLAIMS` times; then it is the recovery
        sweeper's, as any PENDING run whose announcement went unanswered. Stopping meanwhile requeues the
        delivery (a claim is a conditional UPDATE: the runs already claimed are not claimed twice)."""
        wait = (instant - self._clock.now()).total_seconds()
        if wait > 0:
            await sleep_or_wake(self._clock, wait, self.stopping, precise=True)
        rest = list(run_ids)
        for attempt in range(AHEAD_RECLAIMS + 1):
            if attempt:
                await sleep_or_wake(self._clock, AHEAD_RECLAIM_S, self.stopping)
            if self.stopping.is_set():
                raise Retry()
            claimed = {r.id for r in await self.claim_and_start(rest)}
            rest = await self._still_pending([i for i in rest if i not in claimed])
            if not rest:
                return
        _log.warning("ahead_runs_left_to_recovery", runs=len(rest), instant=instant.isoformat())

    async def _still_pending(self, run_ids: Sequence[str]) -> list[str]:
        """Those of ``run_ids`` still PENDING (not claimed elsewhere, withdrawn or canceled meanwhile)."""
        if not run_ids:
            return []
        async with self._store.transaction() as tx:
            runs = await tx.runs.get_many(run_ids)
        return [i for i in run_ids if i in runs and runs[i].status is RunStatus.PENDING]

    async def on_request(self, delivery: Delivery) -> None:
        """An ad hoc request from the bus. On the amqp bus its publisher must be a service that may act
        for the owner and holds ``action:request`` and the action's scopes (else dead-lettered
        ``unauthenticated`` / ``permission``, no run); the memory bus is trusted."""
        try:
            message = message_from_data(delivery.envelope.type, delivery.envelope.data)
            if not isinstance(message, ActionRequested):
                raise InvalidMessage("type", delivery.envelope.type, ActionRequested.TYPE)
            caller = await authorize_publisher(self._store, delivery, message.owner_id)
            if caller is None:
                await self._actions.submit_published(message)
            else:
                await self._actions.submit(caller, message)
        except ActwheelError as exc:
            raise outcome_of(exc) from exc

    async def claim_and_start(self, run_ids: Sequence[str]) -> list[Run]:
        """Claim what this instance can; start executing each claimed run. Returns the claimed runs.

        Execution slots are taken *before* claiming, so a claimed run never waits for a slot
        while its lease runs out; the bus handler waits instead (backpressure through prefetch).
        """
        claimed_all: list[Run] = []
        chunk = max(1, self._concurrency // 2)
        small = len(run_ids) <= LANE_RUNS
        for start in range(0, len(run_ids), chunk):
            ids = list(run_ids[start : start + chunk])
            slots = await self._slots_for(len(ids), small=small)
            async with _released_on_error(slots, len(ids)), self._store.transaction(urgent=small) as tx:
                claimed = await tx.runs.claim_many(ids, self._instance, self._lease_s)
                # once per claimed batch, never cached across batches: a ban bites on the next claim
                principals = await tx.principals.get_many(_principals_of(claimed)) if claimed else {}
                overlapped = await _overlapped_at_instant(tx, claimed)
            for _ in range(len(ids) - len(claimed)):
                slots.release()
            for run in claimed:
                agent_id = acting_agent(run.context)
                authority = authority_of(run, principals.get(run.owner_id), implicit=self._implicit_owners,
                                         agent=None if agent_id is None else principals.get(agent_id))
                task = self._execute(run, authority, slots, overlapped=run.id in overlapped)
                self._in_flight[run.id] = (run, asyncio.create_task(task, name=f"run:{run.id}"))
            claimed_all.extend(claimed)
        return claimed_all

    async def _slots_for(self, count: int, *, small: bool) -> _Slots:
        """Take ``count`` execution slots; returns where they were taken from. The runs of a ``small``
        announcement (at most :data:`LANE_RUNS`: a quiet automation's instant, a run now) take the lane's own
        slots when they are free, so they do not queue behind a burst's batches for the shared ones. Speed
        only: every run is claimed and finished the same way whichever slot it holds."""
        if small and self._lane.take(count):
            return self._lane
        async with self._gathering:
            await _take(self._slots, count)
        return self._slots

    # --- execution -------------------------------------------------------------------------

    async def _execute(self, run: Run, authority: Grant | None, slots: _Slots, *, overlapped: bool = False) -> None:
        structlog.contextvars.bind_contextvars(run_id=run.id, automation_id=run.automation_id, correlation_id=run.id,
                                               attempt=run.attempt)  # this task's own context
        try:
            policy = _policy(run)
            if overlapped:  # never started: no start lateness
                outcome = overlapped_outcome(run, self._clock.now())
            elif authority is None:
                self._observe_start(run)
                outcome = owner_inactive(run, self._clock.now())
            else:
                self._observe_start(run)
                outcome = await self._pipeline.dispatch(request_of(run, authority, policy))
            await self._finish(run, outcome, policy)
        except Exception:
            _log.exception("run_execution_failed", run_id=run.id)  # the lease expires; recovery takes it
        finally:
            self._in_flight.pop(run.id, None)
            self._finishing.discard(run.id)
            slots.release()

    async def _finish(self, run: Run, outcome: DispatchOutcome, policy: Policy) -> None:
        status, reason, not_before = self._decide(run, outcome, policy)
        masked_result = bounded_result(masked(outcome.result.as_dict()))
        self._finishing.add(run.id)
        applied = await self._finisher.submit(_Finish(run, outcome, status, reason, not_before, masked_result))
        if not applied:
            _log.warning("run_fenced_out", run_id=run.id, epoch=run.lease_epoch)
            self.leases_lost += 1
            return
        self._metrics.runs.labels(status.value).inc()

    def _decide(self, run: Run, outcome: DispatchOutcome,
                policy: Policy) -> tuple[RunStatus, str | None, datetime | None]:
        if outcome.retryable and run.attempt < policy.retry.max_attempts:
            delay = policy.retry.delay_for(run.attempt)
            return RunStatus.RETRY_WAIT, outcome.reason, self._clock.now() + timedelta(seconds=delay)
        return RunStatus(outcome.status), outcome.reason, None

    async def _commit_finishes(self, batch: Sequence[_Finish]) -> list[bool]:
        return await in_transaction(self._store, lambda tx: self._write_finishes(tx, batch), clock=self._clock)

    async def _write_finishes(self, tx: Transaction, batch: Sequence[_Finish]) -> list[bool]:
        """Statuses (only where owner and epoch still hold), audit trails (the pipeline's and the lifecycle
        events' rows, which the auditor then need not write), events and dead letters: one transaction."""
        applied = await tx.runs.finish_many([_outcome_row(f, self._instance) for f in batch])
        done = [f for f in batch if f.run.id in applied]
        rows, lifecycle = audited_in_place(self._finish_events(done))
        await tx.audit.append_many(_trail_rows(done, lifecycle, self._instance))
        if rows:
            await tx.outbox.append_many(rows)
        for letter in [_dead_letter(f) for f in done if f.status is RunStatus.DEAD]:
            await tx.dead_letters.add(letter)
        return [f.run.id in applied for f in batch]

    def _finish_events(self, done: Sequence[_Finish]) -> list[NewOutboxMessage]:
        """The batch's lifecycle events: one ``run.<status>`` per status, one ``action.completed``."""
        transitions = [transition_of(f.run, status=f.status, reason=f.reason, summary=f.outcome.result.summary,
                                     error=f.outcome.result.error) for f in done]
        completed = [CompletedAction(run_id=f.run.id, automation_id=f.run.automation_id,
                                     action_type=f.run.action_type, result=f.masked_result)
                     for f in done if f.status is RunStatus.SUCCEEDED]
        return self._events.runs_transitioned(transitions) + self._events.actions_completed(completed)

    def _observe_start(self, run: Run) -> None:
        if run.scheduled_for is not None and run.attempt <= 1:
            lateness = (self._clock.now() - run.scheduled_for).total_seconds()
            self._metrics.start_lateness.observe(max(0.0, lateness))

    async def _renew_leases(self) -> None:
        runs = [run for run, _ in list(self._in_flight.values())]
        if not runs:
            return
        async with self._store.transaction() as tx:  # one statement for all: a round never waits per run
            renewed = await tx.runs.renew_many([(r.id, r.lease_epoch) for r in runs], self._instance, self._lease_s)
        lost = [run for run in runs if run.id not in renewed]
        for run in lost:
            if run.id in self._finishing or run.id not in self._in_flight:
                continue  # finished meanwhile (a fenced finish is counted where it is refused)
            # Fenced out: recovery may have handed the run to another worker. Stop executing it here;
            # its finish would be refused anyway.
            _log.warning("lease_lost", run_id=run.id)
            self.leases_lost += 1
            entry = self._in_flight.get(run.id)
            if entry is not None:
                entry[1].cancel()

    async def drain(self) -> None:
        """Let every run executing finish — including those a bus handler still in flight claimed after intake
        stopped, which a single look would miss. (A task cancelled before its first step never runs the
        ``finally`` that drops it from the in-flight map: only tasks not done are waited for.)"""
        while going := [task for _, task in list(self._in_flight.values()) if not task.done()]:
            try:
                await asyncio.gather(*going, return_exceptions=True)
            except asyncio.CancelledError:  # the gather cancelled ``going`` before it gave up
                self._abandon_in_flight(cancelled=sum(1 for task in going if task.cancelled()))
                raise
        await self._finisher.close()

    def _abandon_in_flight(self, *, cancelled: int = 0) -> None:
        """After the stop's grace: the runs still executing are cancelled (``cancelled`` of them already were)
        rather than left to write their finish into a store that is about to close; their leases expire and
        recovery takes them, as for a killed process (docs/operations.md)."""
        going = [task for _, task in list(self._in_flight.values()) if not task.done() and not task.cancelling()]
        for task in going:
            task.cancel()
        if going or cancelled:
            _log.warning("runs_abandoned_at_stop", runs=len(going) + cancelled, lease_s=self._lease_s)


class _Slots(Protocol):
    def release(self) -> None: ...


class _Lane:
    """Execution slots for small batches, taken without waiting (or not at all): :meth:`take` is all or
    nothing, so a batch either starts on the lane at once or queues for the shared slots."""

    def __init__(self, size: int) -> None:
        self._free = size

    def take(self, count: int) -> bool:
        if count > self._free:
            return False
        self._free -= count
        return True

    def release(self) -> None:
        self._free += 1


async def _take(slots: asyncio.Semaphore, count: int) -> None:
    """Acquire ``count`` slots; if interrupted, give back the ones already taken."""
    taken = 0
    try:
        for _ in range(count):
            await slots.acquire()
            taken += 1
    except BaseException:
        for _ in range(taken):
            slots.release()
        raise


@contextlib.asynccontextmanager
async def _released_on_error(slots: _Slots, count: int) -> AsyncIterator[None]:
    try:
        yield
    except BaseException:
        for _ in range(count):
            slots.release()
        raise


def _principals_of(runs: Sequence[Run]) -> list[str]:
    """The owners of ``runs`` and the agents they act as (read together, once per claimed batch)."""
    ids = {r.owner_id for r in runs} | {a for r in runs if (a := acting_agent(r.context)) is not None}
    return sorted(ids)


def authority_of(run: Run, owner: Principal | None, *, implicit: bool = False,
                 agent: Principal | None = None) -> Grant | None:
    """What ``run`` may do, decided when it is dispatched against its owner as they are now; ``None``:
    the owner is missing or banned, or the owner's agent the run acts as is banned (the run is
    SKIPPED(owner_inactive), its executor never called).

    Scheduled, event and retried runs act with the owner's ceiling; a manual run or an ad hoc request
    with what its requester held (the snapshot) ∩ the owner's ceiling. A run that acts as one of the
    owner's agents (an agent's automation, an agent-bound key's request) is held to that agent's
    ceiling too; an ``agent_id`` label that names no agent of this owner is only a label. With
    ``implicit``, a missing owner's ceiling is every scope: a manual run or a request still acts only
    within its snapshot.
    """
    if owner is None and not implicit:
        return None
    if owner is not None and owner.status is PrincipalStatus.BANNED:
        return None
    ceiling = Grant.all() if owner is None else grant_of(owner.scopes)
    if agent is not None and agent.kind is PrincipalKind.AGENT and agent.parent_id == run.owner_id:
        if agent.status is PrincipalStatus.BANNED:
            return None
        ceiling = ceiling.intersect(grant_of(agent.scopes))
    if run.origin in (Origin.MANUAL, Origin.REQUEST):
        return ceiling.intersect(grant_of((run.context.get(OWNER_KEY) or {}).get("scopes", [])))
    return ceiling


def owner_inactive(run: Run, now: datetime) -> DispatchOutcome:
    """The outcome of a run whose owner (or the owner's agent it acts as) is missing or banned: SKIPPED,
    with its audit row."""
    agent = acting_agent(run.context)
    who = f"owner {run.owner_id!r}" + (f" or its agent {agent!r}" if agent else "")
    details = {"granted": False, "reason": OWNER_INACTIVE, "owner_id": run.owner_id}
    return DispatchOutcome(
        status=RunStatus.SKIPPED.value, reason=OWNER_INACTIVE, executor_type=run.action_type,
        result=ActionResult.fail(f"{who} is missing or banned", retryable=False, code=OWNER_INACTIVE),
        audit=(AuditRecord("PERMISSION", details | ({"agent_id": agent} if agent else {}), now),))


def planned_ahead(run: Run) -> bool:
    """A scheduled run planned ahead of its instant (fire-ahead), on its first attempt: its overlap check
    is still to be taken (a retried attempt took it on its first claim)."""
    return run.origin is Origin.SCHEDULE and run.not_before is not None and run.attempt == 1


async def _overlapped_at_instant(tx: Transaction, claimed: Sequence[Run]) -> set[str]:
    """The overlap check of the runs planned ahead, at their instant (their claim), as the planner takes it
    for an instant planned when due: ``skip`` while any earlier run of the automation is still going,
    ``buffer_one`` while two are. Earlier by ``scheduled_for``, so that of two runs planned ahead the first
    goes, whichever router claims which first. One read for the batch; none without a run planned ahead."""
    checked = {r.id: r for r in claimed if planned_ahead(r) and _policy(r).overlap != "allow"}
    if not checked:
        return set()
    going = await tx.runs.going_before(list(checked))
    return {run_id for run_id, n in going.items()
            if n >= (2 if _policy(checked[run_id]).overlap == "buffer_one" else 1)}


def overlapped_outcome(run: Run, now: datetime) -> DispatchOutcome:
    """The outcome of a run planned ahead that finds, at its instant, an earlier run of its automation still
    going: SKIPPED(overlap), as the planner would have recorded the instant; nothing is executed."""
    details = {"reason": "overlap", "overlap": _policy(run).overlap, "at": "instant"}
    return DispatchOutcome(
        status=RunStatus.SKIPPED.value, reason="overlap", executor_type=run.action_type,
        result=ActionResult.fail("an earlier run of the automation was still going at the instant",
                                 retryable=False, code="overlap"),
        audit=(AuditRecord("OVERLAP", details, now),))


def request_of(run: Run, authority: Grant, policy: Policy | None = None) -> DispatchRequest:
    """The dispatch request for a run: its snapshots, never the automation's current config, with the
    authority decided at dispatch (:func:`authority_of`)."""
    variables = {k: v for k, v in run.context.items() if not k.startswith(RESERVED_PREFIX)}
    return DispatchRequest(
        run_id=run.id, owner_id=run.owner_id, action_type=run.action_type, config=run.action_config,
        scopes=authority.expanded(), automation_id=run.automation_id, attempt=run.attempt,
        timeout_s=(policy or _policy(run)).timeout_s, variables=variables, dry_run=bool(run.context.get(DRY_RUN_KEY)),
        idempotency_key=f"run:{run.id}")


#: Parsed run policies by their canonical JSON: a burst's runs share a handful of policies, and a parse is
#: tens of microseconds. Bounded; speed only (a Policy is immutable).
_POLICIES: dict[bytes, Policy] = {}
_POLICIES_MAX = 1024


def _policy(run: Run) -> Policy:
    try:
        key = orjson.dumps(run.policy, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON (a store never gives such a policy): parsed, not cached
        return _parsed(run.policy)
    policy = _POLICIES.get(key)
    if policy is None:
        policy = _parsed(run.policy)
        if len(_POLICIES) >= _POLICIES_MAX:
            _POLICIES.clear()
        _POLICIES[key] = policy
    return policy


def _parsed(raw: Any) -> Policy:
    try:
        return Policy.parse(raw)
    except ActwheelError:
        return Policy()


def _outcome_row(finish: _Finish, owner: str) -> RunOutcome:
    result = finish.outcome.result
    return RunOutcome(run_id=finish.run.id, owner=owner, epoch=finish.run.lease_epoch, status=finish.status,
                      reason=finish.reason, result=finish.masked_result, error=_bounded_error(result.error),
                      not_before=finish.not_before)


#: The most of an action's result (encoded) a run record and its events keep; more is replaced by a note.
MAX_RESULT_BYTES = 64 * 1024


def bounded_result(result: dict[str, Any]) -> dict[str, Any]:
    """``result``, or a small note in its place when it encodes to more than MAX_RESULT_BYTES.

    One finish transaction commits many runs: a result the store would refuse (256 KiB) must
    not fail its neighbours' finishes, nor make an event too big for the bus.
    """
    size = len(orjson.dumps(result, default=str))
    if size <= MAX_RESULT_BYTES:
        return result
    summary = result.get("summary")
    return {"status": result.get("status"), "summary": summary if isinstance(summary, str) else None,
            "truncated": True, "bytes": size,
            "note": f"the result was {size} bytes; at most {MAX_RESULT_BYTES} are kept"}


def _bounded_error(error: str | None) -> str | None:
    if error is None or len(error) <= MAX_RESULT_BYTES // 4:
        return error
    return error[: MAX_RESULT_BYTES // 4] + "… (truncated)"


def _trail_rows(done: Sequence[_Finish], lifecycle: Sequence[NewAuditEntry], actor: str) -> list[NewAuditEntry]:
    """The finishes' audit rows: per attempt, one row of its pipeline phases that carries the lifecycle
    entries of its run (``storage/trail.py``); the entries of a run without phases stand as rows of their own."""
    by_run: dict[str | None, list[NewAuditEntry]] = {}
    for entry in lifecycle:
        by_run.setdefault(entry.run_id, []).append(entry)
    rows = [row for f in done for row in _audit_rows(f, actor, by_run)]
    return rows + [entry for entries in by_run.values() for entry in entries]


def _audit_rows(finish: _Finish, actor: str, events: dict[str | None, list[NewAuditEntry]]) -> list[NewAuditEntry]:
    """One trail row for the attempt's phases (read back as one entry per phase), carrying the run's entries
    taken from ``events`` — unless together they would be more than a row may hold (a long composite's
    phases and a large result): then the entries are left in ``events``, to stand as rows of their own."""
    run, phases = finish.run, finish.outcome.audit
    if not phases:
        return []
    key = f"{run.id}:{run.attempt}"
    packed = pipeline_entry(event_id=key, actor=actor, run_id=run.id, automation_id=run.automation_id,
                            phases=phases, events=events.get(run.id, ()))
    if run.id in events and len(orjson.dumps(packed.details, default=str)) > MAX_JSON_BYTES:
        return [pipeline_entry(event_id=key, actor=actor, run_id=run.id, automation_id=run.automation_id,
                               phases=phases)]
    events.pop(run.id, None)
    return [packed]


def _dead_letter(finish: _Finish) -> NewDeadLetter:
    return NewDeadLetter(source="run", reason=finish.reason or "dead", ref_id=finish.run.id,
                         payload={"action_type": finish.run.action_type, "result": finish.masked_result})
