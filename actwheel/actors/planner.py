"""The planner: turns due announcements, commands and events into runs, one transaction each.

For ``automation.due`` it compare-and-sets each cursor, inserts the runs with
their snapshots and dedupe keys, and appends ``run.ready`` to the outbox, all
in ONE transaction (invariants 1, 2, 4, 5). A cursor that lost its CAS is read
again; an announcement the cursor has already passed is stale and dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from actwheel.actors import queues
from actwheel.actors.allowance import Allowance
from actwheel.actors.base import ActorState
from actwheel.actors.consumer import ConsumerActor, Intake, outcome_of
from actwheel.actors.event_index import EventIndex
from actwheel.actors.parking import PARK_CHECK_S, PARK_FULL_CHECK_S, ParkedOverlaps, Release
from actwheel.actors.plan_inputs import active_runs, owner_activity
from actwheel.actors.planning import (
    ParsedSpecs,
    Plan,
    latest_per_automation,
    only_overlapped,
    plan_instants,
    plannable,
)
from actwheel.actors.publishers import authorize_publisher
from actwheel.actors.runs import announce_runs, event_run, owner_context, planned_runs, schedule_dedupe_key
from actwheel.actors.sleeping import sleep_or_wake
from actwheel.bus.base import Bus, Delivery, Retry
from actwheel.clock import Clock
from actwheel.errors import ActwheelError, InvalidMessage
from actwheel.events import EventFactory
from actwheel.logs import get_logger
from actwheel.messages import (
    QUIET_DUE_ITEMS,
    AutomationChanged,
    AutomationCommandRequested,
    AutomationsDue,
    DueItem,
    message_from_data,
)
from actwheel.metrics import Metrics
from actwheel.service import AutomationService, Caller
from actwheel.service.authorize import require
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import (
    Automation,
    AutomationStatus,
    CursorAdvance,
    Deleted,
    InsertedRun,
    NewRun,
    Run,
    RunStatus,
)

__all__ = ["CommandOutcome", "Planner"]

_log = get_logger("actwheel.planner")
#: What a command did: the automation (created, updated), it and its canceled runs (enabled,
#: disabled), what went (deleted), or the manual run (run).
CommandOutcome = Automation | tuple[Automation, list[str]] | Deleted | Run
_CAS_ROUNDS = 5
#: How often a held due announcement looks at the backlog again (and how long one count is reused).
BACKLOG_POLL_S = 0.1
#: A due announcement of at most QUIET_ITEMS instants (a quiet automation's) passes the backlog bound, up to
#: QUIET_PER_S runs a second per planner: a burst of others does not hold it, and what it costs stays bounded.
#: It also comes on a queue of its own (``automation.due.quiet``), so held big ones do not keep it undelivered.
QUIET_ITEMS = QUIET_DUE_ITEMS
QUIET_PER_S = 50.0
AUTOMATION_WRITE = "automation:write"


@dataclass(frozen=True, slots=True)
class _Planned:
    automation: Automation
    plan: Plan


class Planner(ConsumerActor):
    name = "planner"

    def __init__(self, *, bus: Bus, store: Store, service: AutomationService, events: EventFactory,
                 clock: Clock, metrics: Metrics, queue_prefix: str = "", prefetch: int = 16,
                 backlog_limit: int = 0, parking: bool = False, fire_ahead: bool = False) -> None:
        """``backlog_limit``: hold due announcements while this many runs (or more) are PENDING or
        RUNNING (0: never hold); see :meth:`_within_backlog`. ``parking``: park busy ``overlap: skip``
        automations instead of writing a SKIPPED row per instant (:mod:`actwheel.actors.parking`).
        ``fire_ahead``: plan an instant announced before it (the tickers' lead window) ahead of it, its run
        not to start before it (docs/design.md invariant 14); every instance should have the same lead."""
        super().__init__(bus)
        self._fire_ahead = fire_ahead
        self._parking = parking
        self.parked = ParkedOverlaps()
        self._backlog_limit = backlog_limit
        self._backlog_seen: tuple[datetime, int] | None = None
        self._quiet = Allowance(clock, per_s=QUIET_PER_S, burst=QUIET_PER_S)
        self._recount: asyncio.Task[None] | None = None
        self._recount_again = False
        self._counting: asyncio.Task[int] | None = None
        #: Due announcements held by the backlog bound since start (metrics, benchmarks).
        self.held = 0
        self._store = store
        self._service = service
        self._events = events
        self._clock = clock
        self._metrics = metrics
        self._prefix = queue_prefix
        self._prefetch = prefetch
        self._event_index = EventIndex(store=store, clock=clock)
        self._bound: set[str] = set()  # the patterns this instance bound (another instance may bind more)
        self._releasing: set[str] = set()
        self._release_lock = asyncio.Lock()
        #: Plans that are not urgent go to the store a fifth of its writers at a time (one on SQLite, 2 of
        #: PostgreSQL's 10 connections; 1 and 5 were measured too). Queued together, the plans of the
        #: announcements a burst delivers at once (the prefetch, 16 × 2,000 instants) were a chain of seconds
        #: on SQLite's one writer, and held every pooled connection on PostgreSQL, while finishes, claims and
        #: a quiet automation's release waited behind them. Speed only: the cursors' compare-and-set keeps
        #: two plans of one instant apart.
        self._big_plans = asyncio.Semaphore(max(1, store.writers // 5))
        self._events_declared = False
        self._parsed = ParsedSpecs()
        self._observers: list[Callable[[Sequence[Run], datetime], None]] = []

    @property
    def last_backlog(self) -> int | None:
        """The PENDING/RUNNING backlog by the last count taken (``None``: none yet, or it failed)."""
        return None if self._backlog_seen is None else self._backlog_seen[1]

    def intake(self) -> Sequence[Intake]:
        topology, prefix = self.bus.topology, self._prefix
        return (
            Intake(queues.planner_due(topology, prefix), self.on_due, self._prefetch),
            Intake(queues.planner_due_quiet(topology, prefix), self.on_due, self._prefetch),
            Intake(queues.planner_commands(topology, prefix), self.on_command, self._prefetch),
            Intake(queues.planner_changes(topology, prefix), self.on_change, self._prefetch),
            Intake(queues.planner_events(topology, prefix), self.on_event, self._prefetch),
        )

    async def run(self) -> None:
        await self._bind_event_patterns()
        await super().run()

    async def work(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._keep_event_patterns(), name="planner:event-patterns")
            if self._parking:
                group.create_task(self._check_parked_overlaps(), name="planner:parked-overlaps")

    async def _keep_event_patterns(self) -> None:
        while not self.stopping.is_set():
            await sleep_or_wake(self._clock, 5.0, self.stopping)
            if self._event_index.stale():
                await self._bind_event_patterns()

    # --- parked overlaps ------------------------------------------------------------------

    def keep_announced(self, automation_id: str, scheduled_for: datetime) -> bool:
        """This instance's ticker, before announcing ``scheduled_for``: ``True`` when the automation is
        parked here and the instant is kept with it (judged at the next check, as an announcement of it
        would be), so that nothing is announced. Only while this planner is ready: a stopping or
        restarting one would not check (the ticker then announces, and whichever planner gets it plans
        it, or keeps it with its own parking)."""
        return self.state is ActorState.READY and self._absorbs(automation_id, scheduled_for)

    def at_instant(self, automation_id: str) -> bool:
        """Fire-ahead with parking, for this instance's ticker: ``True`` when the automation is parked here,
        so that its next instant is handed over at the instant rather than its lead early. Parking judges
        an instant by what is going *after* it; one still ahead cannot be judged, so it is never kept
        (:meth:`_absorbs`), and without this a parked automation's instants would each be planned ahead
        and skipped at their claim, a run row per instant. Only parked ones: an automation merely seen
        busy when an instant of it was planned ahead (a quiet one whose run waits behind a burst) keeps
        its lead, which is what fire-ahead is for."""
        return (self._fire_ahead and self._parking and self.state is ActorState.READY
                and automation_id in self.parked)

    def _absorbs(self, automation_id: str, scheduled_for: datetime) -> bool:
        """Keep ``scheduled_for`` with its parked automation — never an instant still ahead (fire-ahead:
        announced before it), which is planned ahead instead and judged at its claim."""
        if self._fire_ahead and scheduled_for > self._clock.now():
            return False
        return self.parked.absorb(automation_id, scheduled_for)

    async def _check_parked_overlaps(self) -> None:
        """Every :data:`PARK_CHECK_S`, release what is parked and no longer busy (every parked one each
        :data:`PARK_FULL_CHECK_S`). A failed check is logged and tried again: parking is speed only."""
        last_full = self._clock.now()
        while not self.stopping.is_set():
            await sleep_or_wake(self._clock, PARK_CHECK_S, self.stopping)
            if not self.parked or self.stopping.is_set():
                continue
            everything = (self._clock.now() - last_full).total_seconds() >= PARK_FULL_CHECK_S
            if everything:
                last_full = self._clock.now()
            try:
                await self.release_parked(everything=everything)
            except Exception:  # the cursors are the truth: nothing is lost by checking again later
                _log.warning("parked_check_failed", parked=len(self.parked), exc_info=True)

    async def release_parked(self, *, everything: bool = True) -> int:
        """Ask which parked automations still have a run going (one read); mark those seen busy after the
        latest instant announced to them, and plan the others from their cursors, their instants up to
        the last sighting one SKIPPED(overlap) range. A plan that fails leaves them parked (what it
        committed before failing, its cursors show: the next release finds those instants passed).
        Returns how many runs were queued."""
        latest = self.parked.to_check(everything=everything)
        if not latest:
            return 0
        small = len(latest) <= QUIET_ITEMS  # a quiet automation's release: need not queue behind a burst's plans
        async with self._store.transaction(urgent=small) as tx:
            busy = await tx.runs.active_automation_ids(list(latest))
        self.parked.seen_busy({i: at for i, at in latest.items() if i in busy})
        releases = self.parked.release(i for i in latest if i not in busy)
        if not releases:
            return 0
        items = [DueItem(automation_id=r.automation_id, scheduled_for=r.scheduled_for) for r in releases]
        try:  # a deleted one plans nothing: its schedule went with it
            return await self.plan(items, released={r.automation_id: r for r in releases}, urgent=small)
        except BaseException:
            self.parked.restore(releases)  # nothing committed: they stay parked for the next check
            raise

    # --- business events (event triggers) -----------------------------------------------

    async def _bind_event_patterns(self) -> None:
        """The full read (at start, then every ``max_age_s``): every enabled event automation. Binds every
        pattern again (idempotent on the broker), which heals a binding lost to a release racing another
        instance's change, and releases the patterns this instance bound that nothing uses now."""
        patterns = await self._event_index.refresh()
        for pattern in sorted(patterns):
            await self._bind(pattern)
        if unused := self._bound - patterns:
            await self._release(unused)

    @property
    def _events_queue(self) -> str:
        return queues.planner_events(self.bus.topology, self._prefix).name

    async def _declare_events(self) -> None:
        if not self._events_declared:  # bindings are added and removed one by one: the queue comes first
            await self.bus.declare_queue(queues.planner_events(self.bus.topology, self._prefix))
            self._events_declared = True

    async def _bind(self, pattern: str) -> None:
        await self._declare_events()
        await self.bus.bind(self._events_queue, self.bus.topology.events, pattern)
        self._bound.add(pattern)

    async def _release(self, patterns: Collection[str]) -> None:
        """Unbind ``patterns``, which no entry of this instance's index uses any more, then bind again the
        ones an enabled event automation in the database still uses (another instance's, or one created
        meanwhile). Unbinding first means a create racing the release always ends bound: either the check
        sees its row, or its change (published after its commit) binds after the unbind. Concurrent
        releases are taken together, one database read for the lot."""
        self._releasing.update(patterns)
        async with self._release_lock:
            batch, self._releasing = self._releasing, set()
            if not batch:
                return
            await self._declare_events()
            for pattern in sorted(batch):  # the queue is shared: unbind what another instance bound, too
                await self.bus.unbind(self._events_queue, self.bus.topology.events, pattern)
                self._bound.discard(pattern)
            still = await self._event_index.in_use(batch)
            for pattern in sorted(still):
                await self._bind(pattern)
        _log.info("event_patterns_released", unbound=sorted(batch - still), kept=sorted(still))

    async def on_change(self, delivery: Delivery) -> None:
        """An automation changed: apply it to the event index from its own row alone (one read, whatever
        the number of automations), binding its pattern (again: idempotent) and releasing the pattern it
        no longer uses.

        No read at all when the index does not hold it and the change says it listens to no event (a
        cron's create, any delete): the row would change nothing here. A later change that makes it an
        event automation says so in its own message, read when it arrives.
        """
        try:
            change = message_from_data(delivery.envelope.type, delivery.envelope.data)
            if not isinstance(change, AutomationChanged):
                raise InvalidMessage("type", delivery.envelope.type, AutomationChanged.TYPE)
            if not change.may_listen and not self._event_index.holds(change.automation_id):
                return
            async with self._store.transaction() as tx:
                found = await tx.automations.get_many([change.automation_id])
        except ActwheelError as exc:
            raise outcome_of(exc) from exc
        applied = self._event_index.apply(change.automation_id, found.get(change.automation_id))
        if applied.pattern is not None:
            await self._bind(applied.pattern)
        if applied.released is not None:
            await self._release([applied.released])

    async def on_event(self, delivery: Delivery) -> None:
        """A business event: one run per matching event automation, dedupe key ``event:<event id>``."""
        if self._event_index.stale():
            await self._bind_event_patterns()
        envelope = delivery.envelope
        matching = self._event_index.matching(delivery.routing_key)
        if not matching:
            return
        context = {"event": {"id": envelope.id, "type": envelope.type, "routing_key": delivery.routing_key,
                             "source": envelope.source, "occurred_at": envelope.occurred_at.isoformat(),
                             "data": envelope.data}}
        try:
            async with self._store.transaction() as tx:
                # The index only finds candidates; the rows read here decide (disabled, edited, banned).
                fresh = await tx.automations.get_many([a.id for a in matching])
                live = [a for a in fresh.values() if a.enabled and a.status is AutomationStatus.ACTIVE
                        and a.trigger.get("type") == "event"]
                owners = await owner_activity(tx, {a.owner_id for a in live})
                now = await tx.now()
                inserted = await tx.runs.insert_many([
                    event_run(a, event_id=envelope.id, context=context, at=now, owner_active=owners[a.owner_id])
                    for a in live])
                await announce_runs(tx, self._events, [r.run for r in inserted if r.created])
        except ActwheelError as exc:
            raise outcome_of(exc) from exc

    # --- due announcements ---------------------------------------------------------------

    async def on_due(self, delivery: Delivery) -> None:
        try:
            message = message_from_data(delivery.envelope.type, delivery.envelope.data)
            if not isinstance(message, AutomationsDue):
                raise InvalidMessage("type", delivery.envelope.type, AutomationsDue.TYPE)
            await self.on_due_items(message.items)
        except ActwheelError as exc:
            raise outcome_of(exc) from exc
        self._recount_soon()

    async def on_due_items(self, items: Sequence[DueItem]) -> int:
        """Plan an announcement's items: those of parked automations are kept with them (judged at the
        next check), the rest planned once the backlog allows. Returns how many runs were queued."""
        unparked = [i for i in items if not self._absorbs(i.automation_id, i.scheduled_for)]
        if unparked and self._parking and self._over_backlog():
            unparked = await self._park_busy(unparked)
        if not unparked:
            return 0
        small = len(unparked) <= QUIET_ITEMS  # a quiet automation's instant: its plan need not queue behind a burst's
        if self._passes_as_quiet(unparked):
            queued = await self.plan(unparked, urgent=small)
            self._quiet.charge(queued - len(unparked))  # a caught-up item may queue more than one run
            return queued
        held = await self._within_backlog()
        return await self.plan(unparked, catch_up=held, urgent=small)

    def _passes_as_quiet(self, items: Sequence[DueItem]) -> bool:
        """A small announcement over the backlog bound (by a count taken), within this instance's quiet
        allowance: planned now, not held. The allowance is charged for the runs the plan queues."""
        seen = self._backlog_seen
        return (self._backlog_limit > 0 and len(items) <= QUIET_ITEMS and seen is not None
                and seen[1] >= self._backlog_limit
                and not any(i.automation_id in self.parked for i in items)  # busy, not quiet: held
                and self._quiet.take(len(items)))

    def _over_backlog(self) -> bool:
        """The last backlog count (or none yet) says this announcement would be held."""
        seen = self._backlog_seen
        return self._backlog_limit > 0 and (seen is None or seen[1] >= self._backlog_limit)

    async def _park_busy(self, items: Sequence[DueItem]) -> list[DueItem]:
        """Before holding an announcement for the backlog, park the automations it names that are busy
        (a read: their plans are overlap skips only, nothing to write), so that only the ones that
        would fire are held, and a held announcement never holds up parking. Returns the others: those
        not parked by this read, including an instant still ahead of an automation parked already (with
        fire-ahead it was not kept, :meth:`_absorbs`, and must be planned, or it would be lost until the
        automation's next announcement — never, after its last instant)."""
        parked_before = {i.automation_id for i in items if i.automation_id in self.parked}
        async with self._store.transaction() as tx:
            await self._plans(tx, latest_per_automation(items), await tx.now(), False, {})
        return [i for i in items if i.automation_id in parked_before or i.automation_id not in self.parked]

    async def _within_backlog(self) -> bool:
        """Backpressure: while the PENDING/RUNNING backlog is at ``backlog_limit`` or more, hold this
        announcement (un-acked: the bus's prefetch bounds how many wait) and look again every
        :data:`BACKLOG_POLL_S`. Planning late changes nothing the policies do not already say: the held
        instants are planned when the backlog drains, from the cursor, by the automation's overlap and
        misfire rules (SKIPPED(overlap) while its run is still going, SKIPPED(misfire) beyond ``grace_s``),
        and an announcement the cursor has passed meanwhile is dropped as stale. Speed only: with the
        bound off, execution is starved by planning but nothing is wrong.

        Under the bound by the count taken after the last plan (:meth:`_recount_soon`), it plans without
        a query of its own: at idle that is one round trip less between the instant and the commit.
        Only a count at or over the bound is taken again, here, before holding.

        Returns whether it held: a held announcement is planned with ``catch_up`` (every instant due by
        then, in one plan, so the misfire rule sees them together)."""
        if self._backlog_limit <= 0:
            return False
        seen = self._backlog_seen
        if seen is not None and seen[1] < self._backlog_limit:
            return False
        held = False
        while not self.stopping.is_set() and await self._backlog() >= self._backlog_limit:
            if not held:
                self.held += 1
                held = True
            await sleep_or_wake(self._clock, BACKLOG_POLL_S, self.stopping)
        return held

    async def _backlog(self) -> int:
        """The backlog, counted at most once per :data:`BACKLOG_POLL_S` (held announcements share it)."""
        seen = self._backlog_seen
        if seen is not None and self._count_fresh_for() > 0:
            return seen[1]
        return await self._count_backlog()

    def _count_fresh_for(self) -> float:
        """Seconds the last count may still be reused (≤ 0: stale, or no count yet)."""
        seen = self._backlog_seen
        return 0.0 if seen is None else BACKLOG_POLL_S - (self._clock.now() - seen[0]).total_seconds()

    async def _count_backlog(self) -> int:
        """The backlog counted now. Single flight: whoever asks while a count is in flight (the held
        announcements all look at once when the last count goes stale) shares that count's query."""
        if self._counting is None or self._counting.done():
            self._counting = asyncio.create_task(self._count_once(), name="planner:backlog-query")
        return await asyncio.shield(self._counting)

    async def _count_once(self) -> int:
        try:
            async with self._store.transaction() as tx:
                backlog = await tx.runs.count_backlog(self._backlog_limit)
        except ActwheelError:  # cannot tell: plan (the bound is speed only)
            _log.warning("backlog_unknown", exc_info=True)
            self._backlog_seen = None
            return 0
        self._backlog_seen = (self._clock.now(), backlog)
        return backlog

    def _recount_soon(self) -> None:
        """Count the backlog again in the background now that a plan committed, for the next
        announcement to decide on (one count in flight at a time; one asked meanwhile runs after it)."""
        if self._backlog_limit <= 0:
            return
        if self._recount is not None and not self._recount.done():
            self._recount_again = True
            return
        self._recount = asyncio.create_task(self._recounting(), name="planner:backlog-count")

    async def _recounting(self) -> None:
        """At most one count per :data:`BACKLOG_POLL_S`, as before the count left the instant's path."""
        self._recount_again = True
        while self._recount_again and not self.stopping.is_set():
            self._recount_again = False
            wait = self._count_fresh_for()
            if wait > 0:
                await sleep_or_wake(self._clock, wait, self.stopping)
            try:
                await self._count_backlog()
            except Exception:  # speed only: never fatal, never an unretrieved task error
                _log.exception("backlog_count_failed")
                self._backlog_seen = None
                return

    async def drain(self) -> None:
        await super().drain()
        if self._recount is not None:
            await self._recount  # one count at most: bounded by the store's own timeouts
        if self._counting is not None:  # a shared count whose askers have gone: it still holds a transaction
            await asyncio.wait({self._counting})  # its outcome was theirs; only its end matters here

    async def plan(self, items: Sequence[DueItem], *, catch_up: bool = False,
                   released: dict[str, Release] | None = None, urgent: bool = False) -> int:
        """Plan every item; returns how many runs were queued. Retries lost CAS rounds.

        ``catch_up``: plan each automation up to the transaction's now, not only to its item's instant
        (an announcement held by the backlog bound: the ones after it are stale by then).
        ``released``: parked automations whose runs have ended, by id (:func:`_overlapped_until`).
        ``urgent``: a small plan, whose transaction goes ahead of the ordinary ones where they queue for
        one writer (:meth:`Store.transaction`). The others wait their turn for :attr:`_big_plans` first."""
        if urgent:
            return await self._plan_rounds(items, catch_up, released, urgent=True)
        async with self._big_plans:
            return await self._plan_rounds(items, catch_up, released, urgent=False)

    async def _plan_rounds(self, items: Sequence[DueItem], catch_up: bool, released: dict[str, Release] | None,
                           *, urgent: bool) -> int:
        pending = latest_per_automation(items)
        queued = 0
        for _ in range(_CAS_ROUNDS):
            if not pending:
                return queued
            lost, fired = await self._plan_round(pending, catch_up, released or {}, urgent)
            queued += fired
            pending = lost
        if pending:
            _log.warning("cursor_contention", automations=len(pending))
            raise Retry(delay=0.5)
        return queued

    async def _plan_round(self, items: list[DueItem], catch_up: bool, released: dict[str, Release],
                          urgent: bool = False) -> tuple[list[DueItem], int]:
        async with self._store.transaction(urgent=urgent) as tx:
            now = await tx.now()
            planned = await self._plans(tx, items, now, catch_up, released)
            advances = [CursorAdvance(automation_id=p.automation.id, version=p.automation.version,
                                      expected_next_run_at=p.automation.next_run_at,
                                      new_next_run_at=p.plan.new_next_run_at) for p in planned]
            won = await tx.automations.advance_cursors(advances) if advances else set()
            winners = [p for p in planned if p.automation.id in won]
            inserted = await tx.runs.insert_many([run for p in winners for run in _runs_of(p)])
            await self._announce(tx, winners, inserted)
        self._observe(inserted)
        self._park_again(winners, released, {i.automation_id: i.scheduled_for for i in items})
        by_id = {item.automation_id: item for item in items}
        lost = [by_id[p.automation.id] for p in planned if p.automation.id not in won]
        return lost, sum(1 for r in inserted if r.created and r.run.status is RunStatus.PENDING)

    async def _plans(self, tx: Transaction, items: list[DueItem], now: datetime,
                     catch_up: bool, released: dict[str, Release]) -> list[_Planned]:
        """The plan of each plannable automation; a busy one whose plan is overlap skips only is parked
        instead (no plan: nothing is written and its cursor stays) when parking is on."""
        found = await tx.automations.get_many([i.automation_id for i in items])
        automations = [found[i.automation_id] for i in items if i.automation_id in found]
        due_for = {i.automation_id: max(i.scheduled_for, now) if catch_up else i.scheduled_for for i in items}
        live = [a for a in automations if plannable(a, due_for[a.id])]
        overlapped = {a.id: _overlapped_until(released[a.id], a) for a in automations if a.id in released}
        closing = [a for a in automations if a.id in overlapped and not plannable(a, due_for[a.id])
                   and a.status is AutomationStatus.ACTIVE and a.next_run_at is not None
                   and a.next_run_at <= overlapped[a.id]]
        busy = await active_runs(tx, live)
        owners = await owner_activity(tx, {a.owner_id for a in [*live, *closing]})
        planned = [_Planned(a, self._closing_plan(a, overlapped[a.id], now, owners[a.owner_id])) for a in closing]
        for a in live:
            trigger, policy = self._parsed.get(a)
            plan = plan_instants(
                trigger=trigger, cursor=a.next_run_at, scheduled_for=due_for[a.id], now=now,  # type: ignore[arg-type]
                policy=policy, busy=busy.get(a.id, 0), owner_active=owners[a.owner_id],
                overlapped_until=overlapped.get(a.id), plan_ahead=self._fire_ahead)
            if not (busy.get(a.id) and self._parks(a, plan, policy.overlap, due_for[a.id])):
                planned.append(_Planned(a, plan))
        return planned

    def _closing_plan(self, automation: Automation, until: datetime, now: datetime, owner_active: bool) -> Plan:
        """A released automation disabled while parked: its instants up to ``until`` (no later than the
        disable) are recorded as they were, one SKIPPED(overlap) range, and nothing fires."""
        trigger, policy = self._parsed.get(automation)
        return plan_instants(trigger=trigger, cursor=automation.next_run_at,  # type: ignore[arg-type]
                             scheduled_for=until, now=now, policy=policy, busy=1, owner_active=owner_active,
                             overlapped_until=until)

    def _park_again(self, winners: list[_Planned], released: dict[str, Release],
                    announced: dict[str, datetime]) -> None:
        """Committed releases that are still behind their schedule stay parked, so that their next
        announcement is kept without a plan of its own and judged at the next check:

        - one that was overlapped and fired its next instant, seen busy at that instant;
        - one that was overlapped and fired nothing (its run ended between two instants): seen busy at
          what was announced (nothing after it is overlapped), marked ``ranged``;
        - a ``ranged`` one that fired: the instant it fired waited for no run, which says nothing of
          whether its runs keep up with its instants.

        One that was not overlapped otherwise has kept up with its instants: it leaves parking (its next
        instants fire on their announcement, without waiting for a check)."""
        for p in winners:
            release = released.get(p.automation.id)
            instants = p.plan.instants
            if release is None or not instants or not p.automation.enabled or p.plan.new_next_run_at is None:
                continue
            automation_id, version = p.automation.id, p.automation.version
            until = _overlapped_until(release, p.automation)
            overlapped = instants[0].skip_reason == "overlap" and instants[0].at <= until
            fired = [i.at for i in instants if i.skip_reason is None]
            if overlapped and p.plan.new_next_run_at <= until:  # the cap cut the range: the rest at the next check
                self.parked.park(automation_id, version, announced[automation_id], until)
            elif fired and (overlapped or release.ranged):
                self.parked.park(automation_id, version, fired[-1], fired[-1])
            elif overlapped:
                self.parked.park(automation_id, version, announced[automation_id], announced[automation_id],
                                 ranged=True)

    def _parks(self, automation: Automation, plan: Plan, overlap: str, scheduled_for: datetime) -> bool:
        """Park busy ``automation`` rather than write ``plan`` (overlap skips only). It is recorded seen
        busy at the plan's last instant, not at the transaction's time: the read came after that instant
        was announced, and the database's clock (PostgreSQL's ``now()``) may run ahead of the ticker's,
        which would stretch the overlap past a run that had ended. A released one whose instants were
        all overlapped is written, not parked again: it is not busy (the caller checks)."""
        last = plan.instants[-1].at if plan.instants else scheduled_for
        return (self._parking and overlap == "skip" and only_overlapped(plan)
                and self.parked.park(automation.id, automation.version, last, last))

    async def _announce(self, tx: Transaction, winners: list[_Planned], inserted: list[InsertedRun]) -> None:
        completed = [self._events.automation_gone(p.automation.id, "completed")
                     for p in winners if p.plan.new_next_run_at is None]
        await announce_runs(tx, self._events, [r.run for r in inserted if r.created], completed)

    def on_commit(self, observer: Callable[[Sequence[Run], datetime], None]) -> None:
        """Call ``observer(created runs, commit time)`` after each committed due batch (metrics, benchmarks)."""
        self._observers.append(observer)

    def _observe(self, inserted: list[InsertedRun]) -> None:
        now = self._clock.now()
        if self._observers:
            created = [item.run for item in inserted if item.created]
            for observer in self._observers:
                try:
                    observer(created, now)
                except Exception:  # the batch is committed: an observer's bug must not make it look failed
                    _log.exception("commit_observer_failed")
        self._metrics.observe_planned(inserted, lambda _run: now)

    # --- commands ----------------------------------------------------------------------

    async def on_command(self, delivery: Delivery) -> None:
        """A command from the bus, as its publisher: on the amqp bus a service that may act for the owner
        (else dead-lettered ``unauthenticated`` / ``permission``, nothing written)."""
        try:
            message = message_from_data(delivery.envelope.type, delivery.envelope.data)
            if not isinstance(message, AutomationCommandRequested):
                raise InvalidMessage("type", delivery.envelope.type, AutomationCommandRequested.TYPE)
            caller = await authorize_publisher(self._store, delivery, message.owner_id)
            if caller is not None:  # every command changes automations (the API's route policy, here)
                require(caller, f"command.{message.command}", [AUTOMATION_WRITE])
            await self.execute_command(message, caller)
        except ActwheelError as exc:
            raise outcome_of(exc) from exc

    async def execute_command(self, command: AutomationCommandRequested,
                              caller: Caller | None = None) -> CommandOutcome:
        """Apply one command through the application service (same validation and scope rules as the API)
        as ``caller``; ``None``: the owner itself (a trusted, in-process publisher)."""
        caller = caller or Caller(command.owner_id)
        args = command.args
        if command.command == "create":
            return await self._service.create(caller, _mapping(args, "automation"))
        if command.command == "delete_by_session":
            return await self._service.delete_by(caller, session_id=_text(args, "session_id"))
        if command.command == "delete_by_agent":
            return await self._service.delete_by(caller, agent_id=_text(args, "agent_id"))
        automation_id = _text(args, "automation_id")
        if command.command == "update":
            return await self._service.update(caller, automation_id, _mapping(args, "changes"),
                                              _int(args, "expected_version"))
        if command.command in ("enable", "disable"):
            return await self._service.set_enabled(caller, automation_id, command.command == "enable",
                                                   args.get("expected_version"))
        if command.command == "delete":
            return await self._service.delete(caller, automation_id)
        return await self._service.run_now(caller, automation_id)


def _overlapped_until(release: Release, automation: Automation) -> datetime:
    """The instants a released automation is recorded overlapped up to: its last busy sighting; when it
    was edited while parked, no later than the edit (its new state decides after it); when it was
    disabled, every instant announced before the disable — it cannot fire any more, and a skip is what
    those instants were or would have been by then (their run going, or this check not yet come)."""
    if automation.version == release.version:
        return release.seen_busy_at
    if not automation.enabled:
        return min(release.scheduled_for, automation.updated_at)
    return min(release.seen_busy_at, automation.updated_at)


def _runs_of(planned: _Planned) -> list[NewRun]:
    a = planned.automation
    return planned_runs(a, planned.plan, dedupe_key_of=schedule_dedupe_key, context=owner_context(a))


def _mapping(args: dict[str, Any], key: str) -> dict[str, Any]:
    value = args.get(key)
    if not isinstance(value, dict):
        raise InvalidMessage(f"data.args.{key}", value, "an object")
    return value


def _text(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidMessage(f"data.args.{key}", value, "a non-empty string")
    return value


def _int(args: dict[str, Any], key: str) -> int:
    value = args.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidMessage(f"data.args.{key}", value, "an integer")
    return value

