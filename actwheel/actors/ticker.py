"""The wheel ticker: holds the near horizon in a timing wheel and announces what comes due.

It loads from storage the automations due within the horizon (default one
hour) of the partitions it owns, keeps one timer per automation in the
:class:`~actwheel.wheel.TimingWheel`, sleeps until ``next_due_ms()`` and
publishes ``automation.due`` with every automation that came due in one
message. It then computes the following instant itself so that a
per-second schedule never waits for a database round trip; the planner's
compare-and-set on the cursor makes a duplicate or stale announcement
harmless. Automations whose ``next_run_at`` is already past (misfires after
downtime) come due at once; the planner applies their misfire policy.

An instant of an automation this instance's planner has *parked* (busy, ``overlap: skip``; see
:mod:`actwheel.actors.parking`) is handed to that planner in memory (``keep``) instead of being
announced: under overload that is most of the instants, and an announcement of each cost the
ticker, the bus and the planner's intake about what executing a run does. Speed only: the cursor
in the database is the truth, and a planner that does not keep an instant gets it announced.

With a lead window (``lead_s``, fire-ahead; docs/design.md invariant 14) a stored automation's timer
sits in the wheel ``lead_s`` before its instant, so the instant is announced (and planned ahead) that
early; a transient automation's timer stays at its instant.

Transient automations (``durable: false``) have no row: their timers come
from this instance's ``transients`` (loaded at every refill and reloaded when
the registry tells of a change), share the wheel, and when due they are handed
to ``transients.fire`` (which inserts their runs directly) instead of being
announced to the planners of every instance. That happens off the tick, in a
task of the ticker's own (:class:`_TransientFiring`): a transaction for a
transient never holds up a durable announcement, and while the database is
down the due transient instants wait there, retried with capped exponential
backoff, not in the wheel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from actwheel.actors.base import Actor
from actwheel.actors.planning import MAX_INSTANTS, keep_latest
from actwheel.actors.sleeping import sleep_or_wake, sleep_or_wake_until
from actwheel.backoff import exponential_delay
from actwheel.clock import Clock
from actwheel.errors import ActwheelError, StorageUnavailable
from actwheel.logs import get_logger
from actwheel.messages import AutomationChanged, AutomationsDue, DueItem
from actwheel.storage.records import Automation, AutomationStatus
from actwheel.transient import is_transient_id
from actwheel.triggers import Trigger, parse
from actwheel.wheel import TimingWheel

__all__ = ["Keep", "ScheduleSource", "ScheduledAutomation", "TransientSchedule", "WheelTicker", "scheduled_of"]

_log = get_logger("actwheel.ticker")
_MAX_BATCH = 2_000
_RESCHEDULE_CHUNK = 256
#: After a failed transient fire (database unavailable), try again this much later, doubling up to the cap.
_TRANSIENT_RETRY_S = 1.0
_TRANSIENT_RETRY_CAP_S = 30.0
#: How long the transient firing task sleeps when nothing arrives (it wakes at once when something does).
_IDLE_S = 3600.0


@dataclass(frozen=True, slots=True)
class ScheduledAutomation:
    """What the ticker needs of an automation: its cursor and its trigger."""

    id: str
    next_run_at: datetime
    trigger_spec: dict[str, Any]
    partition: int
    transient: bool = False


def scheduled_of(automation: Automation) -> ScheduledAutomation | None:
    """Its timer, or ``None`` when it has none (disabled, not ACTIVE, no next instant).

    One rule for the stored automations (the engine's schedule source) and the transient ones
    (their registry): ``transient`` is simply ``not durable``.
    """
    if not automation.enabled or automation.status is not AutomationStatus.ACTIVE or automation.next_run_at is None:
        return None
    return ScheduledAutomation(id=automation.id, next_run_at=automation.next_run_at, trigger_spec=automation.trigger,
                               partition=automation.partition, transient=not automation.durable)


class ScheduleSource(Protocol):
    """Where the ticker reads automations from (storage, through the engine)."""

    async def due_before(
        self, before: datetime, partitions: frozenset[int] | None
    ) -> list[ScheduledAutomation]:
        """Enabled, ACTIVE automations with ``next_run_at < before`` in ``partitions`` (None = all)."""
        ...

    async def get_scheduled(self, automation_id: str) -> ScheduledAutomation | None:
        """One automation, or ``None`` when it is gone, disabled or completed."""
        ...


class TransientSchedule(Protocol):
    """This instance's runtime-only automations (``durable: false``): no rows, timers in this wheel only."""

    def due_before(self, before: datetime) -> list[ScheduledAutomation]:
        """Enabled ones with ``next_run_at < before``."""
        ...

    def get_scheduled(self, automation_id: str) -> ScheduledAutomation | None:
        """One of them, or ``None`` when it is gone, disabled or ended."""
        ...

    def watch(self, on_change: Callable[[str], None]) -> Callable[[], None]:
        """Call ``on_change(id)`` after each change; returns the function that stops it."""
        ...

    async def fire(self, items: Sequence[DueItem]) -> int:
        """Insert the runs of these due instants and move the cursors; returns how many were queued.
        One automation that fails for good is dealt with there (disabled); it does not stop the others.

        :raises StorageUnavailable: the database failed; the cursors it did not move stay: fire again later
        """
        ...


class PartitionOwner(Protocol):
    """Which partitions this instance should load (speed only; ``None`` = all)."""

    def owned(self) -> frozenset[int] | None: ...

    async def refresh(self) -> bool:
        """Renew and rebalance; True when the owned set changed."""
        ...


@dataclass(slots=True)
class _Timer:
    automation_id: str
    scheduled_for: datetime
    trigger: Trigger
    transient: bool = False
    #: The instant after ``scheduled_for`` once :meth:`WheelTicker._caught_up` has computed it (a due timer's
    #: next timer is scheduled from it: one trigger computation per instant, not two).
    following: datetime | None = None
    #: Fire-ahead: moved from its lead window to its instant, because the planner asked for it there
    #: (``at_instant``); it fires at its instant, as a transient one does.
    at_instant: bool = False


Publish = Callable[[AutomationsDue], Awaitable[None]]
#: ``keep(automation_id, instant)``: ``True`` when this instance's planner has the automation parked and
#: keeps the instant (it is then not announced), ``False`` when it should be announced.
Keep = Callable[[str, datetime], bool]


#: ``at_instant(automation_id)``: ``True`` when this instance's planner wants the automation's instant at the
#: instant, not its lead window early (fire-ahead; a busy automation it parks).
AtInstant = Callable[[str], bool]


def _never(_automation_id: str) -> bool:
    return False


def _keeps_nothing(_automation_id: str, _instant: datetime) -> bool:
    return False


class WheelTicker(Actor):
    name = "ticker"

    def __init__(
        self,
        *,
        source: ScheduleSource,
        publish: Publish,
        clock: Clock,
        horizon_s: float = 3600.0,
        partitions: PartitionOwner | None = None,
        partition_refresh_s: float = 10.0,
        on_wheel_size: Callable[[int], None] | None = None,
        changes: Callable[[Callable[[AutomationChanged], Awaitable[None]]], Awaitable[Any]] | None = None,
        transients: TransientSchedule | None = None,
        keep: Keep = _keeps_nothing,
        lead_s: float = 0.0,
        at_instant: AtInstant = _never,
    ) -> None:
        """``lead_s``: fire-ahead — a stored automation's instant is announced this long before it (the
        planner then plans it ahead, ``not_before`` = the instant); transient ones fire at their instant, and
        so does a stored one for which ``at_instant`` says so when its lead-early timer comes due."""
        super().__init__()
        self.keep = keep
        self.at_instant = at_instant
        self._lead = timedelta(seconds=lead_s)
        self._lead_ms = int(lead_s * 1000)
        self._source = source
        self._publish = publish
        self._clock = clock
        self._horizon = timedelta(seconds=horizon_s)
        self._partitions = partitions
        self._partition_refresh = timedelta(seconds=partition_refresh_s)
        self._next_partition_refresh: datetime | None = None
        self._on_wheel_size = on_wheel_size or (lambda _: None)
        self._subscribe_changes = changes
        self._transients = transients
        self._firing = _TransientFiring(transients, clock) if transients is not None else None
        self._wheel: TimingWheel[str, _Timer] = TimingWheel(now_ms=clock.now_ms())
        self._loaded_until: datetime | None = None
        self._wake = asyncio.Event()
        # Automations changed since the current tick took its due timers: their change placed (or
        # removed) their timer, which the tick's rescheduling from the old trigger must not undo.
        self._changed_in_tick: set[str] = set()

    @property
    def wheel_size(self) -> int:
        return len(self._wheel)

    async def run(self) -> None:
        subscription = None
        if self._subscribe_changes is not None:
            subscription = await self._subscribe_changes(self.apply_change)
        unwatch = self._transients.watch(self.apply_transient_change) if self._transients is not None else None
        try:
            async with asyncio.TaskGroup() as tasks:  # the firing task ends with the loop (or crashes it)
                if self._firing is not None:
                    tasks.create_task(self._firing.run(self.stopping))
                await self._run_loop()
        finally:
            if unwatch is not None:
                unwatch()
            if subscription is not None:
                await subscription.cancel()

    async def _run_loop(self) -> None:
        await self._refresh_partitions()
        await self.refill()
        self.mark_ready()
        while not self.stopping.is_set():
            await self.tick()
            await sleep_or_wake_until(self._clock, self._next_wake(), self._wake, self.stopping, precise=True)
            self._wake.clear()

    async def tick(self) -> int:
        """Publish every timer due now, then refresh the partitions and refill when the loaded horizon
        runs low. Returns how many fired.

        The upkeep comes after the announcement so that neither delays the instant: a partition
        refresh is a transaction, a refill reads the whole horizon. What it loads that is due already
        fires at the next tick, at once (:meth:`_next_wake`); a partition lost meanwhile may be
        announced once more by this tick, which the planner's cursor CAS makes harmless (invariant 9)."""
        fired = await self._announce_due()
        if await self._refresh_partitions() or self._needs_refill():
            await self.refill()
        return fired

    async def _announce_due(self) -> int:
        now = self._clock.now()
        self._changed_in_tick.clear()
        ahead = now + self._lead  # a stored automation's timer is in the wheel at its instant minus the lead
        popped = self._wheel.advance(_ms(now))
        if self._lead_ms:  # before the catch-up: a timer's own instant, not the last one within the lead
            popped = self._move_to_instant(popped, now)
        due = [self._caught_up(timer, now if timer.transient or timer.at_instant else ahead) for timer in popped]
        fired = [t for t in due if not t.transient]
        keep = self.keep
        announced = [t for t in fired if not keep(t.automation_id, t.scheduled_for)]
        for start in range(0, len(announced), _MAX_BATCH):
            batch = announced[start : start + _MAX_BATCH]
            await self._publish(AutomationsDue(items=tuple(
                DueItem(automation_id=t.automation_id, scheduled_for=t.scheduled_for) for t in batch)))
        self._hand_over_transients([t for t in due if t.transient])
        await self._schedule_all_following(fired)
        self._on_wheel_size(len(self._wheel))
        return len(due)

    def _move_to_instant(self, popped: list[_Timer], now: datetime) -> list[_Timer]:
        """Fire-ahead: a stored timer whose planner wants its instants at the instant (``at_instant``) is
        caught up to now only, never to the lead; one still ahead goes back into the wheel at its own
        instant, unannounced. This runs before the catch-up, so that an automation whose period is shorter
        than the lead has each of its instants handed over at that instant, not bundled into the last one
        within the lead; and before any await of the tick (a change applied meanwhile places its own timer,
        which this must not overwrite). Returns the timers that fire now."""
        at_instant = self.at_instant
        firing: list[_Timer] = []
        for timer in popped:
            if timer.transient or timer.at_instant or not at_instant(timer.automation_id):
                firing.append(timer)
                continue
            moved = _Timer(timer.automation_id, timer.scheduled_for, timer.trigger, at_instant=True)
            if timer.scheduled_for <= now:
                firing.append(moved)
            else:
                self._wheel.schedule(timer.automation_id, _ms(timer.scheduled_for), moved)
        return firing

    async def refill(self) -> None:
        """Load everything due before now + horizon into the wheel."""
        until = self._clock.now() + self._horizon
        owned = self._partitions.owned() if self._partitions is not None else None
        rows = await self._source.due_before(until, owned)
        if self._transients is not None:
            rows = [*rows, *self._transients.due_before(until)]
        for row in rows:
            self._load(row)
        if owned is not None:
            self._drop_unowned({r.id for r in rows})
        self._loaded_until = until
        self._on_wheel_size(len(self._wheel))
        _log.debug("wheel_refilled", loaded=len(rows), wheel_size=len(self._wheel))

    async def apply_change(self, change: AutomationChanged) -> None:
        """Apply a created / updated / enabled / disabled / deleted / completed event at once."""
        if self._is_transient_timer(change.automation_id):
            return  # no row and no events: its registry tells this ticker directly
        self._changed_in_tick.add(change.automation_id)
        if change.change in ("disabled", "deleted", "completed"):
            self._wheel.cancel(change.automation_id)
        else:
            row = await self._source.get_scheduled(change.automation_id)
            if row is None:
                self._wheel.cancel(change.automation_id)
            elif self._in_horizon(row.next_run_at) and self._owns(row.partition):
                self._load(row, replace=True)
            else:  # moved beyond the horizon or to a partition another instance owns
                self._wheel.cancel(change.automation_id)
        self._wake.set()

    def apply_transient_change(self, automation_id: str) -> None:
        """The registry changed a transient automation (created, edited, disabled, fired, deleted)."""
        self._changed_in_tick.add(automation_id)
        row = self._transients.get_scheduled(automation_id) if self._transients is not None else None
        if row is None or not self._in_horizon(row.next_run_at):
            self._wheel.cancel(automation_id)  # beyond the horizon: the next refill loads it
        else:
            self._load(row, replace=True)
        self._wake.set()

    def _hand_over_transients(self, timers: list[_Timer]) -> None:
        """To the firing task: the tick goes on at once (their cursors move when fired, and
        apply_transient_change then loads their next timers)."""
        if timers and self._firing is not None:
            self._firing.submit([DueItem(automation_id=t.automation_id, scheduled_for=t.scheduled_for)
                                 for t in timers])

    @staticmethod
    def _is_transient_timer(automation_id: str) -> bool:
        return is_transient_id(automation_id)  # its registry, not the bus, tells of its changes

    def _load(self, row: ScheduledAutomation, *, replace: bool = False) -> None:
        due = self._wheel.due_ms_of(row.id)
        row_ms = self._wheel_ms(row.next_run_at, transient=row.transient)
        if due is not None and due >= row_ms and not replace:
            return  # already fired this instant and moved on; the planner has not caught up yet
        try:
            trigger = parse(row.trigger_spec)
        except ActwheelError:
            _log.warning("automation_trigger_unparsable", automation_id=row.id)
            return
        self._wheel.schedule(row.id, row_ms, _Timer(row.id, row.next_run_at, trigger, row.transient))

    def _caught_up(self, timer: _Timer, now: datetime) -> _Timer:
        """After downtime, the latest instant at or before ``now`` (at most MAX_INSTANTS on): one
        announcement then covers the whole backlog, and the planner applies the misfire policy to it."""
        at = timer.scheduled_for
        following = None
        for _ in range(MAX_INSTANTS - 1):
            following = timer.trigger.next_after(at)
            if following is None or following > now:
                break
            at = following
        else:  # the cap: the instant after ``at`` is still to be computed
            following = timer.trigger.next_after(at)
        if at == timer.scheduled_for:  # on time: the timer the wheel gave back, no longer in it
            timer.following = following
            return timer
        return _Timer(timer.automation_id, at, timer.trigger, timer.transient, following)

    async def _schedule_all_following(self, fired: Sequence[_Timer]) -> None:
        """Each fired timer's next instant, yielding to the loop between chunks: in a burst the planners
        (same loop) start on the announced batches instead of waiting for 10,000 next-instant computations."""
        for start in range(0, len(fired), _RESCHEDULE_CHUNK):
            if start:
                await asyncio.sleep(0)
            for timer in fired[start : start + _RESCHEDULE_CHUNK]:
                if timer.automation_id not in self._changed_in_tick:
                    self._schedule_following(timer)

    def _schedule_following(self, timer: _Timer) -> None:
        following = timer.following if timer.following is not None else timer.trigger.next_after(timer.scheduled_for)
        if following is not None and self._in_horizon(following):
            self._wheel.schedule(timer.automation_id, self._wheel_ms(following, transient=False),
                                 _Timer(timer.automation_id, following, timer.trigger))

    def _wheel_ms(self, instant: datetime, *, transient: bool) -> int:
        """Where an instant's timer sits in the wheel: a stored automation's ``lead_s`` early (fire-ahead)."""
        return _ms(instant) - (0 if transient else self._lead_ms)

    def _drop_unowned(self, kept: set[str]) -> None:
        # Timers loaded from partitions this instance no longer owns go; the new owner loads them.
        pending = self._wheel.keys()
        for key in [k for k in pending if k not in kept]:
            self._wheel.cancel(key)

    async def _refresh_partitions(self) -> bool:
        now = self._clock.now()
        if self._partitions is None or (self._next_partition_refresh and now < self._next_partition_refresh):
            return False
        self._next_partition_refresh = now + self._partition_refresh
        return await self._partitions.refresh()

    def _in_horizon(self, instant: datetime) -> bool:
        return self._loaded_until is None or instant < self._loaded_until

    def _owns(self, partition: int) -> bool:
        owned = self._partitions.owned() if self._partitions is not None else None
        return owned is None or partition in owned

    def _needs_refill(self) -> bool:
        if self._loaded_until is None:
            return True
        return self._clock.now() >= self._loaded_until - self._horizon / 2

    def _next_wake(self) -> datetime:
        """When the next tick is due: the wheel's next timer, a refill or a partition refresh, whichever
        comes first. A deadline, not a duration, so that the sleep ends at it however late it starts."""
        wake = (self._loaded_until - self._horizon / 2) if self._loaded_until else self._clock.now()
        if self._next_partition_refresh is not None:
            wake = min(wake, self._next_partition_refresh)
        next_ms = self._wheel.next_due_ms()
        if next_ms is not None:
            wake = min(wake, datetime.fromtimestamp(next_ms / 1000, UTC))
        return wake


class _TransientFiring:
    """Due transient instants waiting for ``transients.fire``, fired one batch at a time off the tick.

    A batch the database refused (:class:`StorageUnavailable`) stays, merged with what arrives meanwhile, and
    is fired again after 1 s, 2 s, 4 s ... up to 30 s (back to 1 s after a success). Any other error was
    the automation's own and ``fire`` dealt with it; one escaping here is a bug and crashes the ticker
    (the supervisor restarts it, and its refill loads the transient timers again).
    """

    def __init__(self, transients: TransientSchedule, clock: Clock) -> None:
        self._transients = transients
        self._clock = clock
        self._due: dict[str, DueItem] = {}
        self._arrived = asyncio.Event()
        self._retry_s = 0.0
        self._failures = 0  # consecutive refused batches: the backoff attempt number

    def submit(self, items: Sequence[DueItem]) -> None:
        keep_latest(self._due, items)
        self._arrived.set()

    async def run(self, stopping: asyncio.Event) -> None:
        """Fire until ``stopping``; a fire in flight finishes (what is still waiting is dropped with the process
        memory that holds these automations anyway)."""
        while not stopping.is_set():
            while not (self._arrived.is_set() or stopping.is_set()):
                await sleep_or_wake(self._clock, _IDLE_S, self._arrived, stopping)
            if stopping.is_set():
                return
            self._arrived.clear()
            await self._fire_waiting(stopping)

    async def _fire_waiting(self, stopping: asyncio.Event) -> None:
        items, self._due = list(self._due.values()), {}
        try:
            await self._transients.fire(items)
        except StorageUnavailable as exc:
            self._failures += 1
            self._retry_s = exponential_delay(self._failures, base_s=_TRANSIENT_RETRY_S, max_s=_TRANSIENT_RETRY_CAP_S)
            _log.warning("transient_fire_failed", error=type(exc).__name__, automations=len(items),
                         retry_in_s=self._retry_s)
            self.submit(items)
            await sleep_or_wake(self._clock, self._retry_s, stopping)
        else:
            self._failures = 0


def _ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)

