"""WheelTicker over an in-memory ScheduleSource and a VirtualClock (the storage path is covered end to end)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actwheel.actors.ticker import ScheduledAutomation, WheelTicker
from actwheel.clock import VirtualClock
from actwheel.messages import AutomationChanged, AutomationsDue, DueItem

T0 = datetime(2030, 1, 1, tzinfo=UTC)
EVERY_MINUTE = {"type": "cron", "expression": "0 * * * * ?", "timezone": "UTC"}


async def _settle(rounds: int = 50) -> None:
    """Let every runnable task run (before asserting that something did NOT happen)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


@dataclass
class Source:
    """The ticker's view of storage, in memory."""

    rows: dict[str, ScheduledAutomation] = field(default_factory=dict)
    loads: list[tuple[datetime, frozenset[int] | None]] = field(default_factory=list)

    def add(self, automation_id: str, next_run_at: datetime, partition: int = 0,
            spec: dict[str, Any] | None = None) -> ScheduledAutomation:
        row = ScheduledAutomation(id=automation_id, next_run_at=next_run_at, trigger_spec=spec or EVERY_MINUTE,
                                  partition=partition)
        self.rows[automation_id] = row
        return row

    async def due_before(self, before: datetime, partitions: frozenset[int] | None) -> list[ScheduledAutomation]:
        self.loads.append((before, partitions))
        return [r for r in self.rows.values()
                if r.next_run_at < before and (partitions is None or r.partition in partitions)]

    async def get_scheduled(self, automation_id: str) -> ScheduledAutomation | None:
        return self.rows.get(automation_id)


@dataclass
class Owner:
    """Partition ownership that a test changes by hand."""

    owned_now: frozenset[int]
    changed: bool = False

    def owned(self) -> frozenset[int] | None:
        return self.owned_now

    async def refresh(self) -> bool:
        changed, self.changed = self.changed, False
        return changed


@dataclass
class Harness:
    clock: VirtualClock
    source: Source
    published: list[AutomationsDue]
    ticker: WheelTicker

    def items(self) -> list[tuple[str, datetime]]:
        return [(i.automation_id, i.scheduled_for) for m in self.published for i in m.items]

    async def at(self, instant: datetime) -> None:
        """Move the clock to ``instant`` and let the ticker react."""
        self.clock.set(instant)
        await _settle()


Start = Callable[..., Awaitable[Harness]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    tasks: list[tuple[WheelTicker, asyncio.Task[None]]] = []

    async def starter(source: Source, **kwargs: Any) -> Harness:
        clock = VirtualClock(T0)
        published: list[AutomationsDue] = []

        async def publish(message: AutomationsDue) -> None:
            published.append(message)

        ticker = WheelTicker(source=source, publish=publish, clock=clock, **kwargs)
        task = asyncio.create_task(ticker.run())
        tasks.append((ticker, task))
        await asyncio.wait_for(ticker.ready.wait(), timeout=5)
        await _settle()
        return Harness(clock, source, published, ticker)

    yield starter
    for ticker, task in tasks:
        ticker.request_stop()
        await asyncio.wait_for(task, timeout=5)


async def test_fires_at_the_due_instant_not_before(start: Start) -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))
    h = await start(source)
    assert h.ticker.ready.is_set()
    assert h.ticker.wheel_size == 1
    await h.at(T0 + timedelta(seconds=59.999))
    assert h.published == []
    await h.at(T0 + timedelta(minutes=1))
    assert h.items() == [("a", T0 + timedelta(minutes=1))]


async def test_simultaneous_timers_are_one_batched_message(start: Start) -> None:
    source = Source()
    for name in ("a", "b", "c"):
        source.add(name, T0 + timedelta(minutes=1))
    source.add("later", T0 + timedelta(minutes=1, seconds=1), spec={"type": "once", "at": "2030-01-01T00:01:01Z"})
    h = await start(source)
    await h.at(T0 + timedelta(minutes=1))
    assert len(h.published) == 1
    assert sorted(i.automation_id for i in h.published[0].items) == ["a", "b", "c"]


async def test_schedules_the_following_instant_itself(start: Start) -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))
    h = await start(source)
    loads = len(source.loads)
    await h.at(T0 + timedelta(minutes=1))
    await h.at(T0 + timedelta(minutes=2))
    await h.at(T0 + timedelta(minutes=3))
    assert h.items() == [("a", T0 + timedelta(minutes=m)) for m in (1, 2, 3)]
    assert len(source.loads) == loads  # no database round trip between fires


async def test_a_once_trigger_leaves_the_wheel_after_firing(start: Start) -> None:
    source = Source()
    source.add("once", T0 + timedelta(seconds=5), spec={"type": "once", "at": "2030-01-01T00:00:05Z"})
    h = await start(source)
    await h.at(T0 + timedelta(seconds=5))
    assert h.items() == [("once", T0 + timedelta(seconds=5))]
    assert h.ticker.wheel_size == 0


async def test_loads_only_the_horizon_and_refills_before_it_runs_out(start: Start) -> None:
    source = Source()
    source.add("near", T0 + timedelta(seconds=60))
    source.add("far", T0 + timedelta(seconds=150), spec={"type": "once", "at": "2030-01-01T00:02:30Z"})
    h = await start(source, horizon_s=100)
    assert source.loads[-1][0] == T0 + timedelta(seconds=100)
    assert h.ticker.wheel_size == 1  # "far" is beyond the horizon
    await h.at(T0 + timedelta(seconds=49))
    assert len(source.loads) == 1
    await h.at(T0 + timedelta(seconds=50))  # half the horizon is left: refill
    assert len(source.loads) == 2
    assert source.loads[-1][0] == T0 + timedelta(seconds=150)
    await h.at(T0 + timedelta(seconds=60))
    await h.at(T0 + timedelta(seconds=100))  # next refill loads up to 200 s: "far" comes in
    await h.at(T0 + timedelta(seconds=150))
    assert ("far", T0 + timedelta(seconds=150)) in h.items()
    assert ("near", T0 + timedelta(seconds=60)) in h.items()


async def test_a_misfire_comes_due_at_once(start: Start) -> None:
    source = Source()
    source.add("late", T0 - timedelta(minutes=1), spec={"type": "once", "at": "2029-12-31T23:59:00Z"})
    h = await start(source)
    assert h.items() == [("late", T0 - timedelta(minutes=1))]


async def test_a_backlog_after_downtime_is_announced_once(start: Start) -> None:
    source = Source()
    source.add("minutely", T0 - timedelta(hours=1))
    h = await start(source)
    announced = [at for key, at in h.items() if key == "minutely"]
    assert announced == [T0]  # one announcement, at the latest instant not after now: the whole backlog


async def test_apply_change_created_updated_disabled_deleted(start: Start) -> None:
    source = Source()
    h = await start(source)
    source.add("new", T0 + timedelta(seconds=30), spec={"type": "once", "at": "2030-01-01T00:00:30Z"})
    await h.ticker.apply_change(AutomationChanged(automation_id="new", change="created"))
    assert h.ticker.wheel_size == 1
    source.rows["new"] = replace(source.rows["new"], next_run_at=T0 + timedelta(seconds=20),
                                 trigger_spec={"type": "once", "at": "2030-01-01T00:00:20Z"})
    await h.ticker.apply_change(AutomationChanged(automation_id="new", change="updated"))
    await h.at(T0 + timedelta(seconds=20))
    assert h.items() == [("new", T0 + timedelta(seconds=20))]
    for change in ("disabled", "deleted"):
        source.add(change, T0 + timedelta(seconds=40))
        await h.ticker.apply_change(AutomationChanged(automation_id=change, change="created"))
        await h.ticker.apply_change(AutomationChanged(automation_id=change, change=change))
    await h.at(T0 + timedelta(seconds=40))
    assert h.items() == [("new", T0 + timedelta(seconds=20))]
    assert h.ticker.wheel_size == 0


async def test_a_change_wakes_a_sleeping_ticker(start: Start) -> None:
    source = Source()
    source.add("slow", T0 + timedelta(minutes=30))
    h = await start(source)
    h.clock.set(T0 + timedelta(seconds=10))
    source.add("soon", T0 + timedelta(seconds=5), spec={"type": "once", "at": "2030-01-01T00:00:05Z"})
    await h.ticker.apply_change(AutomationChanged(automation_id="soon", change="created"))
    await _settle()
    assert h.items() == [("soon", T0 + timedelta(seconds=5))]


async def test_a_change_whose_automation_is_gone_cancels_its_timer(start: Start) -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))
    h = await start(source)
    del source.rows["a"]
    await h.ticker.apply_change(AutomationChanged(automation_id="a", change="updated"))
    await h.at(T0 + timedelta(minutes=1))
    assert h.published == []


async def test_an_update_beyond_the_horizon_drops_the_old_timer(start: Start) -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))
    h = await start(source, horizon_s=600)
    hourly = {"type": "cron", "expression": "0 0 * * * ?", "timezone": "UTC"}
    source.rows["a"] = replace(source.rows["a"], next_run_at=T0 + timedelta(hours=1), trigger_spec=hourly)
    await h.ticker.apply_change(AutomationChanged(automation_id="a", change="updated"))
    await h.at(T0 + timedelta(minutes=1))
    assert h.published == []


async def test_changes_for_partitions_not_owned_are_ignored(start: Start) -> None:
    source = Source()
    h = await start(source, partitions=Owner(frozenset({0})))
    source.add("mine", T0 + timedelta(seconds=10), partition=0)
    source.add("theirs", T0 + timedelta(seconds=10), partition=1)
    for name in ("mine", "theirs"):
        await h.ticker.apply_change(AutomationChanged(automation_id=name, change="created"))
    await h.at(T0 + timedelta(seconds=10))
    assert h.items() == [("mine", T0 + timedelta(seconds=10))]


async def test_losing_a_partition_drops_its_timers(start: Start) -> None:
    source = Source()
    source.add("p0", T0 + timedelta(minutes=1), partition=0)
    source.add("p1", T0 + timedelta(minutes=1), partition=1)
    owner = Owner(frozenset({0, 1}))
    h = await start(source, partitions=owner, partition_refresh_s=10)
    assert source.loads[-1][1] == frozenset({0, 1})
    assert h.ticker.wheel_size == 2
    owner.owned_now, owner.changed = frozenset({0}), True
    await h.at(T0 + timedelta(seconds=10))  # the next refresh sees the change and refills
    assert source.loads[-1][1] == frozenset({0})
    assert h.ticker.wheel_size == 1
    await h.at(T0 + timedelta(minutes=1))
    assert h.items() == [("p0", T0 + timedelta(minutes=1))]


async def test_gaining_a_partition_loads_its_timers(start: Start) -> None:
    source = Source()
    source.add("p1", T0 + timedelta(minutes=1), partition=1)
    owner = Owner(frozenset({0}))
    h = await start(source, partitions=owner, partition_refresh_s=10)
    assert h.ticker.wheel_size == 0
    owner.owned_now, owner.changed = frozenset({0, 1}), True
    await h.at(T0 + timedelta(seconds=10))
    await h.at(T0 + timedelta(minutes=1))
    assert h.items() == [("p1", T0 + timedelta(minutes=1))]


async def test_stop_cancels_the_change_subscription() -> None:
    cancelled = asyncio.Event()
    applied: list[Callable[[AutomationChanged], Awaitable[None]]] = []

    class Subscription:
        async def cancel(self) -> None:
            cancelled.set()

    async def subscribe(apply: Callable[[AutomationChanged], Awaitable[None]]) -> Subscription:
        applied.append(apply)
        return Subscription()

    async def publish(message: AutomationsDue) -> None:
        return None

    ticker = WheelTicker(source=Source(), publish=publish, clock=VirtualClock(T0), changes=subscribe)
    task = asyncio.create_task(ticker.run())
    await asyncio.wait_for(ticker.ready.wait(), timeout=5)
    assert applied == [ticker.apply_change]
    ticker.request_stop()
    await asyncio.wait_for(task, timeout=5)
    assert cancelled.is_set()


async def test_due_items_carry_the_trigger_instant() -> None:
    item = DueItem(automation_id="a", scheduled_for=T0)
    assert AutomationsDue(items=(item,)).to_data() == {"items": [{"automation_id": "a",
                                                                 "scheduled_for": T0.isoformat()}]}


# --- changes that arrive while a tick is announcing -------------------------------------------


async def _ticker_changing_during_publish(source: Source, change: Callable[[WheelTicker], Awaitable[None]]
                                          ) -> WheelTicker:
    """A ticker whose first announcement lets ``change`` run (as a change event would, between awaits)."""
    clock = VirtualClock(T0)
    holder: list[WheelTicker] = []

    async def publish(message: AutomationsDue) -> None:
        await change(holder[0])

    ticker = WheelTicker(source=source, publish=publish, clock=clock)
    holder.append(ticker)
    await ticker.refill()
    clock.set(T0 + timedelta(minutes=1))
    await ticker.tick()
    return ticker


async def test_a_disable_during_the_announcement_is_not_undone_by_rescheduling() -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))

    async def disable(ticker: WheelTicker) -> None:
        del source.rows["a"]
        await ticker.apply_change(AutomationChanged(automation_id="a", change="disabled"))

    ticker = await _ticker_changing_during_publish(source, disable)
    assert ticker.wheel_size == 0


async def test_an_edit_during_the_announcement_keeps_the_edited_schedule() -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))
    every_ten_seconds = {"type": "cron", "expression": "*/10 * * * * ?", "timezone": "UTC"}

    async def edit(ticker: WheelTicker) -> None:
        source.add("a", T0 + timedelta(minutes=1, seconds=10), spec=every_ten_seconds)
        await ticker.apply_change(AutomationChanged(automation_id="a", change="updated"))

    ticker = await _ticker_changing_during_publish(source, edit)
    assert ticker._wheel.due_ms_of("a") == int((T0 + timedelta(minutes=1, seconds=10)).timestamp() * 1000)


# --- transient automations: fired off the tick --------------------------------------------------


class StuckTransients:
    """One transient automation every minute whose fire hangs until ``release`` (a slow database)."""

    def __init__(self) -> None:
        self.row = ScheduledAutomation(id="tr_1", next_run_at=T0 + timedelta(minutes=1), trigger_spec=EVERY_MINUTE,
                                       partition=-1, transient=True)
        self.release = asyncio.Event()
        self.fired: list[list[tuple[str, datetime]]] = []

    def due_before(self, before: datetime) -> list[ScheduledAutomation]:
        return [self.row] if self.row.next_run_at < before else []

    def get_scheduled(self, automation_id: str) -> ScheduledAutomation | None:
        return self.row if automation_id == self.row.id else None

    def watch(self, on_change: Callable[[str], None]) -> Callable[[], None]:
        return lambda: None

    async def fire(self, items: Sequence[DueItem]) -> int:
        self.fired.append([(i.automation_id, i.scheduled_for) for i in items])
        await self.release.wait()
        return len(items)


async def test_durable_announcements_do_not_wait_for_a_transient_fire(start: Start) -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))
    transients = StuckTransients()
    h = await start(source, transients=transients)
    assert h.ticker.wheel_size == 2
    await h.at(T0 + timedelta(minutes=1))
    assert transients.fired == [[("tr_1", T0 + timedelta(minutes=1))]]  # in flight, stuck
    assert h.items() == [("a", T0 + timedelta(minutes=1))]
    await h.at(T0 + timedelta(minutes=2))  # the ticker goes on while the transient's transaction hangs
    assert h.items() == [("a", T0 + timedelta(minutes=1)), ("a", T0 + timedelta(minutes=2))]
    assert len(transients.fired) == 1
    transients.release.set()
    await _settle()
    assert not any(item[0] == "tr_1" for item in h.items())  # never announced to the planners


@dataclass
class SlowOwner(Owner):
    """A partition refresh that waits until the test lets it finish (a transaction on a slow database)."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    refreshing: int = 0

    async def refresh(self) -> bool:
        self.refreshing += 1
        if self.refreshing > 1:  # the first one is the start's
            await self.release.wait()
        return await super().refresh()


async def test_a_slow_partition_refresh_does_not_delay_the_instant_it_coincides_with(start: Start) -> None:
    source = Source()
    source.add("a", T0 + timedelta(seconds=10))
    owner = SlowOwner(frozenset({0}))
    h = await start(source, partitions=owner, partition_refresh_s=10)
    await h.at(T0 + timedelta(seconds=10))  # the instant and the refresh are both due now
    assert owner.refreshing == 2  # the refresh is under way, and still waiting...
    assert h.items() == [("a", T0 + timedelta(seconds=10))]  # ...yet the instant is announced
    owner.release.set()
    await _settle()


async def test_a_timer_a_refill_loads_already_due_fires_at_the_next_tick_at_once(start: Start) -> None:
    source = Source()
    h = await start(source, horizon_s=100)
    source.add("late", T0 + timedelta(seconds=40))  # not in the wheel: stored after the start's load
    await h.at(T0 + timedelta(seconds=50))  # half the horizon is left: this tick refills, then fires it
    assert h.items() == [("late", T0 + timedelta(seconds=40))]


async def test_an_instant_the_planner_keeps_is_not_announced_and_its_timer_goes_on(start: Start) -> None:
    source = Source()
    source.add("parked", T0 + timedelta(minutes=1))
    source.add("free", T0 + timedelta(minutes=1))
    kept: list[tuple[str, datetime]] = []

    def keep(automation_id: str, instant: datetime) -> bool:
        if automation_id != "parked":
            return False
        kept.append((automation_id, instant))
        return True

    h = await start(source, keep=keep)
    await h.at(T0 + timedelta(minutes=1))
    await h.at(T0 + timedelta(minutes=2))
    assert h.items() == [("free", T0 + timedelta(minutes=1)), ("free", T0 + timedelta(minutes=2))]
    assert kept == [("parked", T0 + timedelta(minutes=1)), ("parked", T0 + timedelta(minutes=2))]
    h.ticker.keep = lambda _a, _i: False  # the planner no longer keeps it (released, or not ready): announced
    await h.at(T0 + timedelta(minutes=3))
    assert sorted(h.items()[2:]) == [("free", T0 + timedelta(minutes=3)), ("parked", T0 + timedelta(minutes=3))]


# --- fire-ahead: stored automations announced their lead early, transient ones at their instant ------------


async def test_with_a_lead_a_stored_instant_is_announced_that_much_before_it_and_not_earlier(start: Start) -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))
    h = await start(source, lead_s=1.5)
    await h.at(T0 + timedelta(seconds=58.499))
    assert h.published == []
    await h.at(T0 + timedelta(seconds=58.5))
    assert h.items() == [("a", T0 + timedelta(minutes=1))]  # the instant itself, announced 1.5 s early
    await h.at(T0 + timedelta(minutes=1, seconds=58.5))  # the following one, with the same lead
    assert h.items() == [("a", T0 + timedelta(minutes=1)), ("a", T0 + timedelta(minutes=2))]


async def test_with_a_lead_a_changed_cursor_inside_the_window_is_announced_at_once(start: Start) -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))
    h = await start(source, lead_s=2.0)
    await h.at(T0 + timedelta(seconds=58.5))
    assert len(h.items()) == 1
    source.add("a", T0 + timedelta(minutes=1))  # an edit withdrew the planned run: the cursor went back
    await h.ticker.apply_change(AutomationChanged(automation_id="a", change="updated"))
    await _settle()
    assert h.items() == [("a", T0 + timedelta(minutes=1))] * 2  # announced again: the planner plans it anew


async def test_with_a_lead_a_transient_instant_still_fires_at_the_instant(start: Start) -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))
    transients = StuckTransients()
    transients.release.set()
    h = await start(source, transients=transients, lead_s=2.0)
    await h.at(T0 + timedelta(seconds=58))
    assert h.items() == [("a", T0 + timedelta(minutes=1))]
    assert transients.fired == []  # its runs are inserted by the ticker: never before the instant
    await h.at(T0 + timedelta(minutes=1))
    assert transients.fired == [[("tr_1", T0 + timedelta(minutes=1))]]


async def test_with_a_lead_an_instant_the_planner_wants_at_the_instant_is_handed_over_then(start: Start) -> None:
    """Fire-ahead with parking: a busy automation's instant is not announced its lead early but handed to
    the planner (kept, or announced) at the instant itself; its next instant gets the lead again unless
    the planner still asks."""
    source = Source()
    source.add("busy", T0 + timedelta(minutes=1))
    source.add("free", T0 + timedelta(minutes=1))
    kept: list[tuple[str, datetime]] = []
    wanted = {"busy"}

    def keep(automation_id: str, instant: datetime) -> bool:
        kept.append((automation_id, instant))
        return False  # not parked (yet): announced

    h = await start(source, keep=keep, lead_s=2.0, at_instant=lambda a: a in wanted)
    await h.at(T0 + timedelta(seconds=58))
    assert h.items() == [("free", T0 + timedelta(minutes=1))]  # the lead early: only the free one
    await h.at(T0 + timedelta(seconds=59, microseconds=999_000))
    assert len(h.items()) == 1
    await h.at(T0 + timedelta(minutes=1))  # its instant: announced now (the planner then parks it, or plans it)
    assert h.items() == [("free", T0 + timedelta(minutes=1)), ("busy", T0 + timedelta(minutes=1))]
    assert kept[-1] == ("busy", T0 + timedelta(minutes=1))
    wanted.clear()  # it kept up: its next instant has the lead again
    await h.at(T0 + timedelta(minutes=1, seconds=58))
    assert sorted(h.items()[2:]) == [("busy", T0 + timedelta(minutes=2)), ("free", T0 + timedelta(minutes=2))]


async def test_without_a_lead_the_planner_is_never_asked_for_the_instant(start: Start) -> None:
    source = Source()
    source.add("a", T0 + timedelta(minutes=1))
    asked: list[str] = []

    def at_instant(automation_id: str) -> bool:
        asked.append(automation_id)
        return True

    h = await start(source, at_instant=at_instant)
    await h.at(T0 + timedelta(minutes=1))
    assert h.items() == [("a", T0 + timedelta(minutes=1))]
    assert asked == []


@pytest.mark.parametrize("lead_s", [2.0, 5.0])
async def test_with_a_lead_longer_than_the_period_each_instant_wanted_at_the_instant_is_handed_over_then(
        start: Start, lead_s: float) -> None:
    """An automation firing every second, its planner asking for its instants at the instant (parked), with a
    lead of several periods: every instant is handed over once, at that instant, none bundled into a later
    one (a catch-up to the lead would hand over only the last instant within it)."""
    every_second = {"type": "cron", "expression": "* * * * * ?", "timezone": "UTC"}
    source = Source()
    source.add("parked", T0 + timedelta(seconds=10), spec=every_second)
    handed: list[tuple[datetime, datetime]] = []  # (instant, when)

    def keep(automation_id: str, instant: datetime) -> bool:
        handed.append((instant, h.clock.now()))
        return True  # kept with its parking: not announced

    h = await start(source, keep=keep, lead_s=lead_s, at_instant=lambda a: a == "parked")
    for tenth in range(80, 201):  # 8 s to 20 s in tenths of a second
        await h.at(T0 + timedelta(seconds=tenth / 10))
    instants = [T0 + timedelta(seconds=s) for s in range(10, 21)]
    assert [instant for instant, _ in handed] == instants  # each once, in order, none skipped
    assert all(when == instant for instant, when in handed)  # at the instant, never its lead early
    assert h.published == []


@pytest.mark.parametrize("yields", range(8))
async def test_an_instant_is_announced_when_the_clock_moves_before_the_ticker_parks_in_its_sleep(
        start: Start, yields: int) -> None:
    """The ticker sleeps to a deadline, not for a duration measured before it parks: a clock moved exactly
    to the instant while a woken ticker is between ticking and parking still reaches it (parked relative to
    the moved clock, the sleep ended that much late: tests/engine/test_router_lane.py, once in CI).
    ``yields``: how far the woken ticker has got when the clock moves."""
    source = Source()
    h = await start(source)
    instant = T0 + timedelta(seconds=2)
    source.add("soon", instant, spec={"type": "once", "at": instant.isoformat()})
    await h.ticker.apply_change(AutomationChanged(automation_id="soon", change="created"))  # wakes it
    for _ in range(yields):
        await asyncio.sleep(0)
    await h.at(instant)
    assert h.items() == [("soon", instant)]
