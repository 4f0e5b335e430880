"""The retention sweeper (issue 14) on an engine's SQLite store with a virtual clock: what it removes, in
bounded batches, what deleting a run means for dedupe (an ad hoc idempotency key frees, a scheduled instant
does not fire again: the cursor moved past it), the lease, a prompt stop; its place in the engine."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from actwheel.actors.planner import Planner
from actwheel.actors.retention import RetentionSweeper
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import NotFound
from actwheel.messages import ActionRequested, DueItem
from actwheel.service import Caller
from actwheel.settings import Settings
from actwheel.storage import Store
from actwheel.storage.records import NewAuditEntry, Run, RunOutcome, RunStatus

DAY_S = 86_400.0
RETENTION_S = 30 * DAY_S
LOCAL = Caller("local")


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    """An engine on a fresh SQLite file with a VirtualClock; store started, actors not."""
    built = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'db'}", instance="t", auth=False),
                   clock=VirtualClock())
    await built.store.start()
    try:
        yield built
    finally:
        await built.store.stop()


def sweeper(engine: Engine, *, batch: int = 1000, pause_s: float = 0.0, instance: str = "t") -> RetentionSweeper:
    return RetentionSweeper(store=engine.store, clock=engine.clock, instance=instance, retention_s=RETENTION_S,
                            batch=batch, pause_s=pause_s)


def advance(engine: Engine, seconds: float) -> None:
    clock = engine.clock
    assert isinstance(clock, VirtualClock)
    clock.advance(seconds)


async def finish(store: Store, run: Run, *, audit: int = 1) -> None:
    async with store.transaction() as tx:
        claimed = await tx.runs.claim(run.id, "w", 30.0)
        assert claimed is not None
        assert await tx.runs.finish(RunOutcome(run_id=run.id, owner="w", epoch=claimed.lease_epoch,
                                               status=RunStatus.SUCCEEDED))
        for i in range(audit):
            await tx.audit.append(NewAuditEntry(event_id=f"{run.id}:{i}", phase="EXECUTE", actor="w", run_id=run.id))


async def runs_of(engine: Engine, automation_id: str) -> list[Run]:
    async with engine.store.transaction() as tx:
        return await tx.runs.query(automation_id=automation_id, limit=1000)


async def every_minute(engine: Engine) -> str:
    automation = await engine.service.create(LOCAL, {
        "trigger": {"type": "cron", "expression": "0 * * * * ?", "timezone": "UTC"},
        "action": {"type": "simple.op", "config": {"op": "log", "message": "hi"}},
        "policy": {"overlap": "allow"}})
    return automation.id


async def fire_next(engine: Engine, automation_id: str) -> DueItem:
    """Announce the automation's next instant, as the ticker would, at that instant."""
    automation = await engine.service.get(LOCAL, automation_id)
    assert automation.next_run_at is not None
    clock = engine.clock
    assert isinstance(clock, VirtualClock)
    clock.set(automation.next_run_at)
    item = DueItem(automation_id=automation_id, scheduled_for=automation.next_run_at)
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    assert await planner.plan([item]) == 1
    return item


async def test_finished_runs_older_than_the_retention_go_in_bounded_batches_recent_and_open_ones_stay(
        engine: Engine) -> None:
    automation_id = await every_minute(engine)
    for _ in range(7):
        await fire_next(engine, automation_id)
    old = await runs_of(engine, automation_id)
    for run in old[:6]:
        await finish(engine.store, run)  # old[6] stays PENDING
    advance(engine, RETENTION_S + 60)
    newer_id = await every_minute(engine)
    await fire_next(engine, newer_id)  # a recent run
    [recent] = await runs_of(engine, newer_id)
    await finish(engine.store, recent)

    report = await sweeper(engine, batch=2).sweep()

    assert (report.leased, report.complete, report.runs, report.audit) == (True, True, 6, 6)
    assert report.largest_batch <= 2 + 2  # two runs and their audit rows per transaction
    assert report.batches >= 4 + 3  # 7 old runs read two at a time, then outbox, dead letters, keys
    assert [r.id for r in await runs_of(engine, automation_id)] == [old[6].id]
    assert [r.id for r in await runs_of(engine, newer_id)] == [recent.id]


async def test_a_scheduled_instant_does_not_fire_again_after_its_run_is_deleted(engine: Engine) -> None:
    automation_id = await every_minute(engine)
    first = await fire_next(engine, automation_id)
    [run] = await runs_of(engine, automation_id)
    await finish(engine.store, run)
    advance(engine, RETENTION_S + 60)
    assert (await sweeper(engine).sweep()).runs == 1
    assert await runs_of(engine, automation_id) == []  # nothing holds schedule:<instant> any more

    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    assert await planner.plan([first]) == 0  # a stale announcement of the instant: the cursor moved past it
    assert await runs_of(engine, automation_id) == []
    cursor = (await engine.service.get(LOCAL, automation_id)).next_run_at
    assert cursor is not None
    assert cursor > first.scheduled_for  # what keeps the instant from firing again


async def test_an_ad_hoc_idempotency_key_is_honoured_for_the_retention_window_then_frees(engine: Engine) -> None:
    request = ActionRequested(type="simple.op", config={"op": "log", "message": "once"}, owner_id="local",
                              idempotency_key="invoice-42")
    first = await engine.control.actions.submit(LOCAL, request)
    await finish(engine.store, first.run)
    advance(engine, RETENTION_S - 60)
    assert (await sweeper(engine).sweep()).runs == 0
    again = await engine.control.actions.submit(LOCAL, request)
    assert (again.created, again.run.id) == (False, first.run.id)  # within the window: the same run

    advance(engine, 120)
    assert (await sweeper(engine).sweep()).runs == 1
    after = await engine.control.actions.submit(LOCAL, request)
    assert after.created  # past the window the key is free: a new run
    assert after.run.id != first.run.id


async def test_dead_letters_and_idempotency_keys_go_after_the_retention(engine: Engine) -> None:
    from actwheel.storage.records import NewDeadLetter

    async with engine.store.transaction() as tx:
        await tx.dead_letters.add(NewDeadLetter(source="bus", reason="malformed"))
        await tx.idempotency.put("webhook:abc", {"status": 200})
    advance(engine, RETENTION_S + 1)
    report = await sweeper(engine).sweep()
    assert (report.dead_letters, report.idempotency_keys) == (1, 1)
    async with engine.store.transaction() as tx:
        assert await tx.idempotency.get("webhook:abc") is None


async def test_confirmations_and_dashboard_sessions_go_a_day_after_they_expire(engine: Engine) -> None:
    """Whatever the retention window: an expired credential is useless, kept a day to answer "expired"."""
    from actwheel.storage.records import NewConfirmation, NewUiSession

    now = engine.clock.now()
    async with engine.store.transaction() as tx:
        for name, expires_at in (("old", now + timedelta(minutes=2)), ("new", now + timedelta(days=2))):
            await tx.confirmations.create(NewConfirmation(
                id=name, token_hash=f"hash-{name}", owner_id="local", key_id="k", automation_id="a",
                automation_version=1, created_at=now, expires_at=expires_at))
            await tx.ui_sessions.create(NewUiSession(
                id=name, session_hash=f"hash-{name}", key_id="k", owner_id="local", principal_id="local",
                created_at=now, expires_at=expires_at))
    advance(engine, DAY_S)
    assert (await sweeper(engine).sweep()).confirmations == 0  # expired less than a day ago: kept
    advance(engine, 300)
    report = await sweeper(engine).sweep()
    assert (report.confirmations, report.ui_sessions) == (1, 1)
    async with engine.store.transaction() as tx:
        assert await tx.confirmations.by_hash("hash-old") is None
        assert await tx.confirmations.by_hash("hash-new") is not None
        assert await tx.ui_sessions.by_hash("hash-old") is None
        assert await tx.ui_sessions.by_hash("hash-new") is not None


async def test_one_sweeper_at_a_time_holds_the_lease(engine: Engine) -> None:
    assert (await sweeper(engine, instance="a").sweep()).leased
    assert not (await sweeper(engine, instance="b").sweep()).leased
    advance(engine, 601)  # the holder stopped renewing: its lease (2 × 300 s) expired
    assert (await sweeper(engine, instance="b").sweep()).leased


async def test_the_sweeper_stops_promptly_between_batches_and_while_waiting(engine: Engine) -> None:
    automation_id = await every_minute(engine)
    for _ in range(6):
        await fire_next(engine, automation_id)
    for run in await runs_of(engine, automation_id):
        await finish(engine.store, run)
    advance(engine, RETENTION_S + 60)

    actor = sweeper(engine, batch=2, pause_s=30.0)  # the virtual clock never moves: it waits for the stop
    task = asyncio.create_task(actor.run())
    await asyncio.wait_for(actor.ready.wait(), 5)
    for _ in range(200):  # until it sits in the pause after its first batch
        if len(await runs_of(engine, automation_id)) == 4:
            break
        await asyncio.sleep(0.01)
    actor.request_stop()
    await asyncio.wait_for(task, 1.0)
    assert len(await runs_of(engine, automation_id)) == 4  # one batch of two, then stopped
    async with engine.store.transaction() as tx:  # and it gave its lease up
        assert await tx.retention.acquire_lease("retention", "someone-else", 60.0)

    idle = sweeper(engine)
    task = asyncio.create_task(idle.run())
    await asyncio.wait_for(idle.ready.wait(), 5)
    await asyncio.sleep(0.05)  # parked in the 300 s interval
    idle.request_stop()
    await asyncio.wait_for(task, 1.0)


def test_the_engine_runs_the_sweeper_in_the_recovery_role(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db'}"
    every = Engine(Settings(database_url=url, instance="t", auth=False, retention_s=3600.0), clock=VirtualClock())
    router_only = Engine(Settings(database_url=url, instance="t", auth=False, roles=("router",)),
                         clock=VirtualClock())
    assert isinstance(every.actors["retention"], RetentionSweeper)
    assert every.actors["retention"]._retention == timedelta(hours=1)
    assert "retention" not in router_only.actors


def test_retention_settings_come_from_the_environment_and_are_checked() -> None:
    assert Settings.from_env({}).retention_s == 30 * DAY_S
    assert Settings.from_env({"ACTWHEEL_RETENTION_S": "120"}).retention_s == 120.0
    with pytest.raises(Exception, match="retention_s"):
        Settings.from_env({"ACTWHEEL_RETENTION_S": "0"})


async def test_a_deleted_run_is_gone_for_good(engine: Engine) -> None:
    automation_id = await every_minute(engine)
    await fire_next(engine, automation_id)
    [run] = await runs_of(engine, automation_id)
    await finish(engine.store, run)
    advance(engine, RETENTION_S + 1)
    await sweeper(engine).sweep()
    async with engine.store.transaction() as tx:
        with pytest.raises(NotFound):
            await tx.runs.get(run.id)
        assert await tx.audit.trail(run.id) == []


# --- the relay's outbox purge (cdc.py): bounded batches, a few per relay round -------------------------------


async def test_the_relays_hourly_outbox_purge_goes_in_bounded_batches_between_relay_rounds(
        engine: Engine, tmp_path: Path) -> None:
    from actwheel.actors.cdc import CdcEmitter
    from actwheel.bus.memory import MemoryBus
    from actwheel.storage.records import NewOutboxMessage

    def outbox_ids() -> list[int]:
        with sqlite3.connect(tmp_path / "db") as conn:
            return [row[0] for row in conn.execute("SELECT id FROM outbox ORDER BY id")]

    async with engine.store.transaction() as tx:
        await tx.outbox.append_many([NewOutboxMessage(exchange="actwheel.events", routing_key="run.ready",
                                                      body=f"m{i}".encode()) for i in range(9)])
        taken = await tx.outbox.take_batch(100)
        await tx.outbox.mark_published([m.id for m in taken[:8]])  # the last one is still owed to the bus
    advance(engine, DAY_S + 60)
    relay = CdcEmitter(store=engine.store, bus=MemoryBus(), clock=engine.clock, retention_s=DAY_S,
                       purge_batch=2, purge_batches=2)
    ids = [m.id for m in taken]

    await relay._housekeeping()  # the purge starts: two batches of two rows, then it is the relay's turn
    assert outbox_ids() == ids[4:]
    assert relay._purging is not None
    assert await relay.purge_some() is False  # rows 5 to 8
    assert outbox_ids() == ids[8:]
    assert await relay.purge_some() is True  # the unpublished row is kept; the purge is done
    assert outbox_ids() == ids[8:]
    assert relay._purging is None
    await relay._housekeeping()  # the next purge is an hour away
    assert relay._purging is None
