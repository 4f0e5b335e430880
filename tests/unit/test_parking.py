"""Parked overlaps: a busy ``overlap: skip`` automation's instants wait in the planner's memory and are
written as ONE SKIPPED(overlap) range when its run ends. ParkedOverlaps alone (pure), then through the
planner on a real SQLite store with a VirtualClock (the conftest's engine: parking on, the default)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from actwheel.actors.parking import PARK_CHECK_S, PARK_FULL_CHECK_S, ParkedOverlaps, Release
from actwheel.actors.planner import Planner
from actwheel.actors.planning import MAX_INSTANTS
from actwheel.actors.ticker import WheelTicker
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import StorageUnavailable
from actwheel.messages import DueItem, RunsTransitioned
from actwheel.run_context import SKIPPED_KEY, instants_of
from actwheel.service import Caller
from actwheel.settings import Settings
from actwheel.storage.records import Run

START = datetime(2030, 1, 1, tzinfo=UTC)  # VirtualClock's default start
LOCAL = Caller("local")
T = [START + timedelta(minutes=m) for m in range(12)]  # every minute's instants from START


# --- ParkedOverlaps --------------------------------------------------------------------------------


def test_park_absorb_and_release_keep_the_latest_instant_and_the_last_sighting() -> None:
    parked = ParkedOverlaps()
    assert parked.park("a1", 3, T[1], T[1])
    assert parked.absorb("a1", T[3])
    assert parked.absorb("a1", T[2])  # out of order: the latest stays
    assert not parked.absorb("a2", T[3])  # not parked: plan it
    assert parked.to_check(everything=False) == {"a1": T[3]}  # T[3] not yet seen overlapped
    parked.seen_busy({"a1": T[3]})  # a run still going after T[3] was announced
    assert parked.to_check(everything=False) == {}
    assert parked.to_check(everything=True) == {"a1": T[3]}
    parked.seen_busy({"a1": T[2]})  # an older reading never moves the sighting back
    assert parked.release(["a1", "a2"]) == [Release("a1", T[3], T[3], 3)]
    assert len(parked) == 0
    assert "a1" not in parked


def test_a_failed_release_is_parked_again_as_it_was() -> None:
    parked = ParkedOverlaps()
    parked.park("a1", 3, T[3], T[2])
    released = parked.release(["a1"])
    parked.restore(released)
    assert parked.release(["a1"]) == released


def test_parking_is_bounded() -> None:
    parked = ParkedOverlaps(capacity=1)
    assert parked.park("a1", 1, T[1], T[1])
    assert not parked.park("a2", 1, T[1], T[1])  # full: planned row by row instead
    assert parked.park("a1", 1, T[2], T[2])  # one already parked is still kept up to date
    parked.release(["a1"])
    assert parked.park("a2", 1, T[1], T[1])


# --- through the planner ---------------------------------------------------------------------------


def _planner(engine: Engine) -> Planner:
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    return planner


async def _create(engine: Engine, overlap: str = "skip") -> str:
    automation = await engine.service.create(LOCAL, {
        "trigger": {"type": "cron", "expression": "0 * * * * ?", "timezone": "UTC"},
        "action": {"type": "simple.op", "config": {"op": "log", "message": "hi"}},
        "policy": {"overlap": overlap, "grace_s": 3600}})
    return automation.id


async def _announce(engine: Engine, clock: VirtualClock, automation_id: str, at: datetime) -> int:
    """The ticker's announcement of ``at``, arriving at ``at``."""
    clock.set(max(at, clock.now()))
    return await _planner(engine).on_due_items([DueItem(automation_id=automation_id, scheduled_for=at)])


async def _runs(engine: Engine, automation_id: str) -> list[Run]:
    async with engine.store.transaction() as tx:
        runs = await tx.runs.query(automation_id=automation_id, limit=1000)
    return sorted(runs, key=lambda r: r.scheduled_for or START)


def _rows(runs: list[Run]) -> list[tuple[str, str | None, int]]:
    return [(r.status.value, r.reason, instants_of(r.context)) for r in runs]


def _instants(runs: list[Run]) -> list[datetime]:
    """Every instant the rows record, a range expanded (every minute from its first to ``through``)."""
    instants = []
    for run in runs:
        assert run.scheduled_for is not None
        instants += [run.scheduled_for + timedelta(minutes=k) for k in range(instants_of(run.context))]
    return instants


async def _skipped_events(engine: Engine) -> list[dict[str, object]]:
    """The ``run.skipped`` entries in the outbox, as a subscriber decodes them."""
    async with engine.store.transaction() as tx:
        rows = [r for r in await tx.outbox.take_batch(1000) if r.routing_key == "run.skipped"]
    entries = [entry for r in rows for entry in RunsTransitioned.from_data(orjson.loads(r.body)["data"]).runs]
    return [{"run_id": e.run_id, "instants": e.instants,
             "scheduled_for": e.scheduled_for and e.scheduled_for.isoformat(),
             "skipped_through": e.skipped_through and e.skipped_through.isoformat()} for e in entries]


async def _end(engine: Engine, run: Run) -> None:
    async with engine.store.transaction() as tx:
        assert await tx.runs.cancel(run.id, "test: the run is over")


async def _cursor(engine: Engine, automation_id: str) -> datetime | None:
    return (await engine.service.get(LOCAL, automation_id)).next_run_at


async def test_busy_instants_are_parked_then_written_as_one_range_when_the_run_ends(
        engine: Engine, clock: VirtualClock) -> None:
    automation_id = await _create(engine)
    for at in T[1:5]:
        await _announce(engine, clock, automation_id, at)
    runs = await _runs(engine, automation_id)
    assert _rows(runs) == [("PENDING", None, 1)]  # T[2..4]: parked, nothing written
    assert automation_id in _planner(engine).parked
    assert await _cursor(engine, automation_id) == T[2]  # the cursor waits at the first parked instant

    assert await _planner(engine).release_parked() == 0  # still busy: stays parked
    assert automation_id in _planner(engine).parked
    await _end(engine, runs[0])
    clock.set(T[4] + timedelta(seconds=5))
    assert await _planner(engine).release_parked() == 0  # every parked instant was overlapped: none fires

    runs = await _runs(engine, automation_id)
    assert _rows(runs) == [("CANCELED", "test: the run is over", 1), ("SKIPPED", "overlap", 3)]
    assert runs[1].scheduled_for == T[2]
    assert runs[1].dedupe_key == f"schedule:{T[2].isoformat()}"
    assert runs[1].context[SKIPPED_KEY] == {"through": T[4].isoformat(), "instants": 3}
    assert _instants(runs) == T[1:5]  # every instant once
    assert engine.metrics.skipped.labels("overlap")._value.get() == 3  # the metric counts instants, too
    assert await _skipped_events(engine) == [{"run_id": runs[1].id, "instants": 3, "skipped_through": T[4].isoformat(),
                                              "scheduled_for": T[2].isoformat()}]
    assert await _cursor(engine, automation_id) == T[5]
    assert automation_id in _planner(engine).parked  # its run outlasted its instants: it stays parked


async def test_after_a_range_alone_the_next_instant_waits_for_the_check_then_the_automation_leaves_parking(
        engine: Engine, clock: VirtualClock) -> None:
    automation_id = await _create(engine)
    for at in T[1:4]:
        await _announce(engine, clock, automation_id, at)
    assert await _planner(engine).release_parked() == 0  # busy: seen busy after T[3]
    await _end(engine, (await _runs(engine, automation_id))[0])
    assert await _planner(engine).release_parked() == 0  # T[2..3] one range, nothing fires
    assert automation_id in _planner(engine).parked

    assert await _announce(engine, clock, automation_id, T[4]) == 0  # kept, no plan of its own
    assert await _planner(engine).release_parked(everything=False) == 1  # not busy: T[4] fires at the check
    runs = await _runs(engine, automation_id)
    assert _rows(runs)[2:] == [("PENDING", None, 1)]
    assert automation_id in _planner(engine).parked  # an instant with no run before it says nothing of keeping up

    await _end(engine, runs[2])
    await _announce(engine, clock, automation_id, T[5])
    assert await _planner(engine).release_parked(everything=False) == 1  # T[4]'s run ended before T[5]
    assert automation_id not in _planner(engine).parked  # it keeps up: its next instants fire when announced
    assert _instants(await _runs(engine, automation_id)) == T[1:6]


async def test_an_instant_after_the_last_busy_sighting_fires_on_release(engine: Engine, clock: VirtualClock) -> None:
    automation_id = await _create(engine)
    await _announce(engine, clock, automation_id, T[1])
    await _announce(engine, clock, automation_id, T[2])  # parked, seen busy at T[2]
    first = (await _runs(engine, automation_id))[0]
    await _end(engine, first)
    await _announce(engine, clock, automation_id, T[3])  # absorbed: it is judged at the next check
    assert await _planner(engine).release_parked(everything=False) == 1
    runs = await _runs(engine, automation_id)
    assert _rows(runs) == [("CANCELED", "test: the run is over", 1), ("SKIPPED", "overlap", 1), ("PENDING", None, 1)]
    assert [r.scheduled_for for r in runs] == T[1:4]
    assert SKIPPED_KEY not in runs[1].context  # one instant: an ordinary row
    assert automation_id in _planner(engine).parked  # overlapped, then fired: parked again at once

    await _announce(engine, clock, automation_id, T[4])  # T[3]'s run still going: kept, no plan
    assert len(await _runs(engine, automation_id)) == 3
    assert await _planner(engine).release_parked(everything=False) == 0  # the check: seen busy after T[4]
    await _end(engine, runs[2])
    await _announce(engine, clock, automation_id, T[5])
    assert await _planner(engine).release_parked(everything=False) == 1
    runs = await _runs(engine, automation_id)
    assert _rows(runs)[3:] == [("SKIPPED", "overlap", 1), ("PENDING", None, 1)]  # T[4] overlapped, T[5] fires
    assert _instants(runs) == T[1:6]

    await _end(engine, runs[4])
    await _announce(engine, clock, automation_id, T[6])
    assert await _planner(engine).release_parked(everything=False) == 1  # not busy at T[6]: it fires
    assert _rows(await _runs(engine, automation_id))[5:] == [("PENDING", None, 1)]
    assert automation_id not in _planner(engine).parked  # it kept up with its instant: it leaves parking
    await _end(engine, (await _runs(engine, automation_id))[5])
    assert await _announce(engine, clock, automation_id, T[7]) == 1  # planned at once, no check to wait for


async def test_a_lost_parking_leaves_every_instant_to_the_cursor(engine: Engine, clock: VirtualClock) -> None:
    automation_id = await _create(engine)
    for at in T[1:4]:
        await _announce(engine, clock, automation_id, at)
    await _end(engine, (await _runs(engine, automation_id))[0])
    _planner(engine).parked.clear()  # what a crash or a restart does to it
    await _announce(engine, clock, automation_id, T[4])
    runs = await _runs(engine, automation_id)
    assert _instants(runs) == T[1:5]  # planned from the cursor: nothing lost, nothing twice
    assert _rows(runs)[1:] == [("PENDING", None, 1), ("SKIPPED", "overlap", 1), ("SKIPPED", "overlap", 1)]


async def test_an_edit_while_parked_keeps_the_overlap_record_up_to_the_edit(
        engine: Engine, clock: VirtualClock) -> None:
    automation_id = await _create(engine)
    for at in T[1:4]:
        await _announce(engine, clock, automation_id, at)  # T[2], T[3] parked
    assert await _planner(engine).release_parked() == 0  # the check: busy after T[3]
    clock.set(T[3] + timedelta(seconds=5))
    await engine.service.update(LOCAL, automation_id, {"name": "renamed"}, 1)  # at T[3] + 5 s
    await _end(engine, (await _runs(engine, automation_id))[0])
    clock.set(T[4])
    assert await _announce(engine, clock, automation_id, T[4]) == 0  # absorbed
    assert await _planner(engine).release_parked() == 1
    runs = await _runs(engine, automation_id)
    assert _instants(runs) == T[1:5]
    assert _rows(runs)[1:] == [("SKIPPED", "overlap", 2), ("PENDING", None, 1)]  # busy up to the edit, then fires


async def test_an_edit_after_the_last_sighting_bounds_nothing_more(engine: Engine, clock: VirtualClock) -> None:
    """The bound is the earlier of the sighting and the edit: a sighting before the edit stays the bound."""
    automation_id = await _create(engine)
    await _announce(engine, clock, automation_id, T[1])
    await _announce(engine, clock, automation_id, T[2])  # parked, seen busy at T[2]
    clock.set(T[2] + timedelta(seconds=30))
    await engine.service.update(LOCAL, automation_id, {"policy": {"overlap": "allow", "grace_s": 3600}}, 1)
    await _end(engine, (await _runs(engine, automation_id))[0])
    await _planner(engine).release_parked()
    assert _rows(await _runs(engine, automation_id))[1:] == [("SKIPPED", "overlap", 1)]  # T[2]: skip at its time


async def test_a_disable_while_parked_records_the_parked_instants_and_fires_nothing(
        engine: Engine, clock: VirtualClock) -> None:
    automation_id = await _create(engine)
    for at in T[1:4]:
        await _announce(engine, clock, automation_id, at)
    clock.set(T[3] + timedelta(seconds=5))
    await engine.service.set_enabled(LOCAL, automation_id, False)  # cancels the PENDING run too
    await _planner(engine).release_parked()
    runs = await _runs(engine, automation_id)
    assert _rows(runs) == [("CANCELED", "automation_disabled", 1), ("SKIPPED", "overlap", 2)]
    assert _instants(runs) == T[1:4]  # announced while it was enabled: recorded, none lost
    assert len(_planner(engine).parked) == 0
    enabled, _ = await engine.service.set_enabled(LOCAL, automation_id, True)
    assert enabled.next_run_at is not None
    assert enabled.next_run_at > clock.now()  # enabling starts from now, as always


async def test_a_delete_while_parked_drops_its_record(engine: Engine, clock: VirtualClock) -> None:
    automation_id = await _create(engine)
    for at in T[1:3]:
        await _announce(engine, clock, automation_id, at)
    await engine.service.delete(LOCAL, automation_id)
    assert await _planner(engine).release_parked() == 0
    assert len(_planner(engine).parked) == 0


async def test_a_range_longer_than_the_cap_is_written_in_chunks_and_stays_parked_between(
        engine: Engine, clock: VirtualClock) -> None:
    automation = await engine.service.create(LOCAL, {
        "trigger": {"type": "cron", "expression": "* * * * * ?", "timezone": "UTC"},
        "action": {"type": "simple.op", "config": {"op": "log", "message": "hi"}},
        "policy": {"overlap": "skip", "grace_s": 3600}})
    second = [START + timedelta(seconds=k) for k in range(2600)]
    await _announce(engine, clock, automation.id, second[1])  # fires
    await _announce(engine, clock, automation.id, second[2])  # parked
    await _announce(engine, clock, automation.id, second[2500])  # absorbed
    assert await _planner(engine).release_parked() == 0  # still busy: seen busy after second[2500]
    await _end(engine, (await _runs(engine, automation.id))[0])
    for _ in range(3):
        await _planner(engine).release_parked()
    runs = await _runs(engine, automation.id)
    assert [(r.reason, instants_of(r.context)) for r in runs[1:]] == [
        ("overlap", MAX_INSTANTS), ("overlap", MAX_INSTANTS), ("overlap", 499)]
    recorded = [r.scheduled_for + timedelta(seconds=k) for r in runs  # type: ignore[operator]
                for k in range(instants_of(r.context))]
    assert recorded == second[1:2501]
    assert automation.id in _planner(engine).parked  # the last chunk fired nothing: parked until its next instant


async def test_a_release_that_fails_leaves_them_parked(engine: Engine, clock: VirtualClock,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    automation_id = await _create(engine)
    for at in T[1:3]:
        await _announce(engine, clock, automation_id, at)
    await _end(engine, (await _runs(engine, automation_id))[0])
    planner = _planner(engine)

    async def unavailable(*_args: object, **_kwargs: object) -> int:
        raise StorageUnavailable("database", "test: down")

    monkeypatch.setattr(planner, "plan", unavailable)
    with pytest.raises(StorageUnavailable):
        await planner.release_parked()
    assert automation_id in planner.parked
    monkeypatch.undo()
    await planner.release_parked()
    assert _instants(await _runs(engine, automation_id)) == T[1:3]


async def test_allow_and_buffer_one_are_never_parked(engine: Engine, clock: VirtualClock) -> None:
    allow, buffer_one = await _create(engine, "allow"), await _create(engine, "buffer_one")
    for at in T[1:4]:
        await _announce(engine, clock, allow, at)
        await _announce(engine, clock, buffer_one, at)
    assert len(_planner(engine).parked) == 0
    assert _rows(await _runs(engine, allow)) == [("PENDING", None, 1)] * 3
    assert _rows(await _runs(engine, buffer_one)) == [("PENDING", None, 1), ("PENDING", None, 1),
                                                      ("SKIPPED", "overlap", 1)]


async def _until(condition: Callable[[], bool], rounds: int = 400) -> None:
    """Poll ``condition`` while the loop (and SQLite's thread) works: 400 × 5 ms at most."""
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached")


@pytest.mark.parametrize("everything", [False, True])
async def test_the_planner_checks_parked_automations_on_its_own(engine: Engine, clock: VirtualClock,
                                                                 everything: bool) -> None:
    """The work loop: every PARK_CHECK_S the ones with an instant waiting; every PARK_FULL_CHECK_S all."""
    automation_id = await _create(engine)
    await _announce(engine, clock, automation_id, T[1])
    await _announce(engine, clock, automation_id, T[2])
    await _end(engine, (await _runs(engine, automation_id))[0])
    if not everything:
        await _announce(engine, clock, automation_id, T[3])  # an instant waiting: the short check sees it
    planner = _planner(engine)
    work = asyncio.create_task(planner.work())
    try:
        await _until(lambda: clock.sleepers >= 2)
        checks = round((PARK_FULL_CHECK_S if everything else PARK_CHECK_S) / PARK_CHECK_S)
        for _ in range(checks):
            assert automation_id in planner.parked  # not before its check
            sleeping = clock.sleepers
            clock.advance(PARK_CHECK_S)
            await _until(lambda n=sleeping: clock.sleepers >= n)  # the check ran, sleeps again
        for _ in range(400):  # the release's rows, written by the loop's check (parked again if it fired)
            if len(_instants(await _runs(engine, automation_id))) == (3 if not everything else 2):
                break
            await asyncio.sleep(0.005)
    finally:
        planner.stopping.set()
        await work
    assert _instants(await _runs(engine, automation_id)) == T[1:4 if not everything else 3]


async def test_a_busy_automation_is_parked_even_while_the_backlog_holds_announcements(
        tmp_path: Path, clock: VirtualClock) -> None:
    """Over the backlog bound, an announcement is held until the backlog drains; its busy automations
    are parked first (a read), so parking never waits for the hold and only what would fire waits."""
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'db'}", instance="t", auth=False,
                             plan_backlog=1), clock=clock)
    await engine.store.start()
    try:
        automation_id = await _create(engine)
        await _announce(engine, clock, automation_id, T[1])  # no count yet: its run makes the backlog 1
        planner = _planner(engine)
        await planner._count_backlog()  # what the background recount does after a plan
        assert planner._over_backlog()
        assert await asyncio.wait_for(_announce(engine, clock, automation_id, T[2]), timeout=5) == 0
        assert automation_id in planner.parked
        assert planner.held == 0  # parked, not held
    finally:
        await engine.store.stop()


async def test_this_instances_ticker_hands_a_parked_instant_to_its_planner_while_the_planner_is_ready(
        engine: Engine, clock: VirtualClock) -> None:
    automation_id = await _create(engine)
    planner, ticker = _planner(engine), engine.actors["ticker"]
    assert isinstance(ticker, WheelTicker)
    assert ticker.keep == planner.keep_announced  # the engine wires its own planner in
    await _announce(engine, clock, automation_id, T[1])  # fires
    await _announce(engine, clock, automation_id, T[2])  # parked
    assert not planner.keep_announced(automation_id, T[3])  # not started: the ticker announces it
    planner.mark_ready()
    assert planner.keep_announced(automation_id, T[3])  # kept with its parking: judged at the next check
    assert not planner.keep_announced("another", T[3])  # not parked here: announced
    assert planner.parked.to_check(everything=False) == {automation_id: T[3]}
    planner.request_stop()
    assert not planner.keep_announced(automation_id, T[4])  # a stopping planner checks no more: announced


# --- with fire-ahead -------------------------------------------------------------------------------


async def test_with_fire_ahead_a_busy_automation_is_handed_over_at_its_instant_and_parked_there(
        tmp_path: Path, clock: VirtualClock) -> None:
    """Fire-ahead keeps parking on: a parked automation gets its next instant at the instant (the ticker asks
    :meth:`Planner.at_instant`), where parking judges it; an instant still ahead is never kept by parking (it
    is planned ahead, its overlap judged at its claim); one merely busy when planned ahead keeps its lead."""
    lead = timedelta(seconds=2)
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'db'}", instance="t", auth=False,
                             fire_ahead_s=2.0), clock=clock)
    await engine.store.start()
    try:
        automation_id = await _create(engine)
        planner, ticker = _planner(engine), engine.actors["ticker"]
        assert isinstance(ticker, WheelTicker)
        assert ticker.at_instant == planner.at_instant  # the engine wires its own planner in
        planner.mark_ready()
        await _announce(engine, clock, automation_id, T[1])  # fires at its instant
        assert not planner.at_instant(automation_id)

        clock.set(T[2] - lead)  # T[2] announced its lead early while T[1]'s run is still going
        assert await planner.on_due_items([DueItem(automation_id=automation_id, scheduled_for=T[2])]) == 1
        runs = await _runs(engine, automation_id)
        assert [(r.status.value, r.not_before) for r in runs] == [("PENDING", None), ("PENDING", T[2])]
        assert not planner.at_instant(automation_id)  # busy, not parked: its next instant keeps the lead

        await _announce(engine, clock, automation_id, T[3])  # at T[3] (held, say), still busy: parked
        assert automation_id in planner.parked
        assert len(await _runs(engine, automation_id)) == 2  # nothing written for T[3]
        assert planner.at_instant(automation_id)

        clock.set(T[4] - lead)  # an instant still ahead: parking does not keep it, it is planned ahead
        assert not planner.keep_announced(automation_id, T[4])
        assert await planner.on_due_items([DueItem(automation_id=automation_id, scheduled_for=T[4])]) == 1
        runs = await _runs(engine, automation_id)
        assert _rows(runs)[2:] == [("SKIPPED", "overlap", 1), ("PENDING", None, 1)]
        assert (runs[2].scheduled_for, runs[3].scheduled_for, runs[3].not_before) == (T[3], T[4], T[4])

        assert await planner.release_parked() == 0  # T[4]'s run planned ahead counts as going: still parked
        assert automation_id in planner.parked
        for run in (runs[0], runs[1], runs[3]):
            await _end(engine, run)
        clock.set(T[4] + timedelta(seconds=1))
        assert await planner.release_parked() == 0  # its cursor is past what it kept: nothing more
        assert automation_id not in planner.parked
        assert _instants(await _runs(engine, automation_id)) == T[1:5]  # every instant once
    finally:
        await engine.store.stop()


async def test_with_fire_ahead_over_the_backlog_bound_an_instant_ahead_of_a_parked_automation_is_planned(
        tmp_path: Path, clock: VirtualClock) -> None:
    """Over the backlog bound, busy automations are parked before the announcement is held; an instant still
    ahead of one parked already is not kept by parking, so it must go on to be planned, not be dropped with
    the parked ones (it was: the automation's cursor then waited for its next announcement, and after its
    last instant for ever — a kill test timed out on it)."""
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'db'}", instance="t", auth=False,
                             fire_ahead_s=2.0, plan_backlog=1), clock=clock)
    await engine.store.start()
    try:
        automation_id = await _create(engine)
        planner = _planner(engine)
        await _announce(engine, clock, automation_id, T[1])  # fires: the backlog is 1
        await _announce(engine, clock, automation_id, T[2])  # busy: parked
        assert automation_id in planner.parked
        await planner._count_backlog()
        assert planner._over_backlog()
        clock.set(T[3] - timedelta(seconds=2))  # T[3] announced its lead early
        planning = asyncio.create_task(
            planner.on_due_items([DueItem(automation_id=automation_id, scheduled_for=T[3])]))
        for _ in range(200):  # until it is held or has returned (dropped)
            if planner.held or planning.done():
                break
            await asyncio.sleep(0.01)
        assert not planning.done()  # not dropped: held by the bound (a busy one does not pass as quiet)
        assert planner.held == 1
        planning.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await planning
    finally:
        await engine.store.stop()


async def test_without_fire_ahead_the_planner_never_asks_for_an_instant(engine: Engine, clock: VirtualClock) -> None:
    automation_id = await _create(engine)
    planner = _planner(engine)
    planner.mark_ready()
    await _announce(engine, clock, automation_id, T[1])
    await _announce(engine, clock, automation_id, T[2])  # parked
    assert automation_id in planner.parked
    assert not planner.at_instant(automation_id)
    assert planner.keep_announced(automation_id, T[3])  # without fire-ahead any announced instant is kept
