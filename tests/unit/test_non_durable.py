"""durable: false automations on a real SQLite store, actors not started: the service's in-memory path,
TransientTimers.fire (runs inserted directly, exactly once per instant, overlap and misfire), the API
routes, and the ticker's handling of a failed fire. End to end through the engine: tests/engine/test_transient.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from structlog.testing import capture_logs

from actwheel.actors.ticker import ScheduledAutomation, WheelTicker
from actwheel.actors.transient import TransientTimers
from actwheel.api.app import create_app
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import Conflict, InvalidInput, NotFound, StorageUnavailable, Unsupported
from actwheel.messages import AutomationCommandRequested, DueItem
from actwheel.run_context import OWNER_KEY, TRANSIENT_KEY
from actwheel.service import AutomationService, Caller
from actwheel.settings import Settings
from actwheel.storage.records import Automation, AutomationStatus, Origin, Run, RunStatus
from actwheel.transient import TransientRegistry

START = datetime(2030, 1, 1, tzinfo=UTC)  # VirtualClock's default start
ALICE = Caller("alice")
EVERY_MINUTE = {"type": "cron", "expression": "0 * * * * ?", "timezone": "UTC"}
LOG = {"type": "simple.op", "config": {"op": "log", "message": "hi"}}


def _payload(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"name": "watcher", "trigger": dict(EVERY_MINUTE), "action": dict(LOG),
                               "durable": False}
    payload.update(overrides)
    return payload


def _timers(engine: Engine) -> TransientTimers:
    assert engine.transients is not None
    return TransientTimers(registry=engine.transients, store=engine.store, events=engine.events,
                           metrics=engine.metrics)


async def _runs(engine: Engine, automation_id: str) -> list[Run]:
    async with engine.store.transaction() as tx:
        return sorted(await tx.runs.query(automation_id=automation_id, limit=1000), key=lambda r: r.dedupe_key)


async def _outbox_keys(engine: Engine) -> list[str]:
    async with engine.store.transaction() as tx:
        return [r.routing_key for r in await tx.outbox.take_batch(1000)]


async def _fire_at(engine: Engine, clock: VirtualClock, automation: Automation, at: datetime) -> int:
    clock.set(max(at, clock.now()))
    return await _timers(engine).fire([DueItem(automation_id=automation.id, scheduled_for=at)])


# --- the service ---------------------------------------------------------------------------------


async def test_create_keeps_it_in_memory_only(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload(labels={"session_id": "s1"}))
    assert automation.id.startswith("tr_")
    assert (automation.durable, automation.owner_id, automation.version) == (False, "alice", 1)
    assert automation.next_run_at == START + timedelta(minutes=1)
    assert await engine.service.get(ALICE, automation.id) == automation
    assert await engine.service.query(ALICE) == [automation]
    assert await engine.service.query(ALICE, session_id="s2") == []
    async with engine.store.transaction() as tx:
        assert await tx.automations.query() == []
        with pytest.raises(NotFound):
            await tx.automations.get(automation.id)
    assert await _outbox_keys(engine) == []  # no automation.* event: nothing outside this process acts on it


async def test_listing_merges_stored_and_transient_by_id(engine: Engine) -> None:
    stored = [await engine.service.create(ALICE, _payload(durable=True)) for _ in range(2)]
    transient = await engine.service.create(ALICE, _payload())
    listed = await engine.service.query(ALICE, limit=100)
    assert [a.id for a in listed] == sorted([a.id for a in stored] + [transient.id])
    assert [a.durable for a in listed] == [True, True, False]
    assert [a.id for a in await engine.service.query(ALICE, limit=2)] == sorted(a.id for a in stored)
    assert [a.id for a in await engine.service.query(ALICE, after_id=listed[1].id)] == [transient.id]


async def test_an_instance_without_a_ticker_refuses(tmp_path: Path, clock: VirtualClock) -> None:
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'db'}", instance="t",
                             roles=("planner", "router")), clock=clock)
    await engine.store.start()
    try:
        assert engine.transients is None
        with pytest.raises(InvalidInput) as caught:
            await engine.service.create(ALICE, _payload())
        assert (caught.value.field, caught.value.value) == ("durable", False)
        assert "ticker" in caught.value.expected
        assert await engine.service.query(ALICE) == []
    finally:
        await engine.store.stop()


async def test_a_full_registry_refuses_naming_durable(engine: Engine, clock: VirtualClock) -> None:
    service = AutomationService.build(store=engine.store, registry=engine.registry, events=engine.events, clock=clock,
                                transients=TransientRegistry(clock=clock, capacity=1))
    await service.create(ALICE, _payload())
    with pytest.raises(InvalidInput) as caught:
        await service.create(ALICE, _payload())
    assert caught.value.field == "durable"
    assert "at most 1" in caught.value.expected
    assert (await service.create(ALICE, _payload(durable=True))).durable  # stored ones are not limited


async def test_update_is_versioned_in_memory(engine: Engine, clock: VirtualClock) -> None:
    automation = await engine.service.create(ALICE, _payload())
    clock.advance(10)
    updated = await engine.service.update(ALICE, automation.id, {"name": "renamed", "trigger": {
        "type": "repeat", "repeat": "CUSTOM", "interval": 5, "time_unit": "SECONDS",
        "start_date_time": "2030-01-01T00:00:00Z"}}, 1)
    assert (updated.name, updated.version, updated.durable) == ("renamed", 2, False)
    assert updated.next_run_at == START + timedelta(seconds=15)  # recomputed from now
    with pytest.raises(Conflict):
        await engine.service.update(ALICE, automation.id, {"name": "stale"}, 1)
    with pytest.raises(Unsupported):
        await engine.service.update(ALICE, automation.id,
                                    {"trigger": {"type": "event", "routing_key": "orders.*.x"}}, 2)
    with pytest.raises(InvalidInput) as caught:
        await engine.service.update(ALICE, automation.id, {"durable": True}, 2)
    assert caught.value.field == "durable"
    with pytest.raises(InvalidInput) as caught:
        await engine.service.update(ALICE, automation.id,
                                    {"action": {"type": "simple.op", "config": {"op": "nope"}}}, 2)
    assert caught.value.field.startswith("action.config")
    assert (await engine.service.get(ALICE, automation.id)).name == "renamed"


async def test_a_stored_automation_cannot_become_transient(engine: Engine) -> None:
    stored = await engine.service.create(ALICE, _payload(durable=True))
    with pytest.raises(InvalidInput) as caught:
        await engine.service.update(ALICE, stored.id, {"durable": False}, stored.version)
    assert caught.value.field == "durable"


async def test_disable_cancels_its_pending_runs_and_enable_moves_a_past_cursor(
        engine: Engine, clock: VirtualClock) -> None:
    automation = await engine.service.create(ALICE, _payload())
    assert await _fire_at(engine, clock, automation, START + timedelta(minutes=1)) == 1
    [pending] = await _runs(engine, automation.id)
    disabled, canceled = await engine.service.set_enabled(ALICE, automation.id, False, 1)
    assert (disabled.enabled, disabled.version, canceled) == (False, 2, [pending.id])
    assert (await _runs(engine, automation.id))[0].status is RunStatus.CANCELED
    assert await _fire_at(engine, clock, disabled, START + timedelta(minutes=2)) == 0  # disabled: nothing fires
    with pytest.raises(Conflict):
        await engine.service.set_enabled(ALICE, automation.id, True, 1)
    clock.set(START + timedelta(minutes=5, seconds=30))
    enabled, _ = await engine.service.set_enabled(ALICE, automation.id, True)
    assert enabled.enabled
    assert enabled.next_run_at == START + timedelta(minutes=6)


async def test_delete_and_the_label_cascades_forget_it_and_cancel_its_runs(
        engine: Engine, clock: VirtualClock) -> None:
    one = await engine.service.create(ALICE, _payload())
    by_session = await engine.service.create(ALICE, _payload(labels={"session_id": "s1"}))
    by_agent = await engine.service.create(ALICE, _payload(labels={"agent_id": "a1"}))
    stored = await engine.service.create(ALICE, _payload(durable=True, labels={"session_id": "s1"}))
    await _fire_at(engine, clock, by_session, START + timedelta(minutes=1))
    deleted = await engine.service.delete(ALICE, one.id)
    assert deleted.automation_ids == (one.id,)
    with pytest.raises(NotFound):
        await engine.service.get(ALICE, one.id)
    deleted = await engine.service.delete_by(ALICE, session_id="s1")
    assert set(deleted.automation_ids) == {stored.id, by_session.id}
    assert deleted.canceled_run_ids == tuple(r.id for r in await _runs(engine, by_session.id))
    assert [r.status for r in await _runs(engine, by_session.id)] == [RunStatus.CANCELED]
    assert (await engine.service.delete_by(ALICE, agent_id="a1")).automation_ids == (by_agent.id,)
    assert await engine.service.query(ALICE) == []


async def test_an_update_that_waited_behind_a_fire_keeps_the_fired_cursor(
        engine: Engine, clock: VirtualClock) -> None:
    """The fire moves the cursor without a new version: the update must read it under the lock, not before."""
    automation = await engine.service.create(ALICE, _payload())
    registry = engine.transients
    assert registry is not None
    clock.set(START + timedelta(minutes=1))
    async with registry.lock:  # a fire is inserting this instant's run
        update = asyncio.create_task(engine.service.update(ALICE, automation.id, {"name": "renamed"}, 1))
        await _settle()
        assert not update.done()
        assert registry.advance(automation.id, 1, START + timedelta(minutes=1), START + timedelta(minutes=2))
    updated = await update
    assert (updated.name, updated.version) == ("renamed", 2)
    assert updated.next_run_at == START + timedelta(minutes=2)  # not the already fired 00:01
    assert (await engine.service.get(ALICE, automation.id)).next_run_at == START + timedelta(minutes=2)


async def test_a_cascade_skips_a_transient_that_ended_while_it_waited(engine: Engine, clock: VirtualClock) -> None:
    ending = await engine.service.create(ALICE, _payload(labels={"session_id": "s1"},
                                                         trigger={"type": "once", "at": "2030-01-01T00:00:05Z"}))
    staying = await engine.service.create(ALICE, _payload(labels={"session_id": "s1"}))
    stored = await engine.service.create(ALICE, _payload(durable=True, labels={"session_id": "s1"}))
    registry = engine.transients
    assert registry is not None
    async with registry.lock:  # the once is being fired
        cascade = asyncio.create_task(engine.service.delete_by(ALICE, session_id="s1"))
        await _stored_gone(engine, stored.id)  # the stored part committed; the transient part waits
        assert not cascade.done()
        assert registry.advance(ending.id, 1, ending.next_run_at, None)  # ... and its schedule ended
    deleted = await cascade
    assert set(deleted.automation_ids) == {stored.id, staying.id}
    assert await engine.service.query(ALICE) == []


async def _stored_gone(engine: Engine, automation_id: str) -> None:
    async with asyncio.timeout(5):
        while True:
            async with engine.store.transaction() as tx:
                if not await tx.automations.get_many([automation_id]):
                    return


async def _canceled_events(engine: Engine) -> list[tuple[str | None, str]]:
    async with engine.store.transaction() as tx:
        rows = [r for r in await tx.outbox.take_batch(1000) if r.routing_key == "run.canceled"]
    return [(t["run_id"], t["reason"]) for r in rows for t in orjson.loads(r.body)["data"]["runs"]]


@pytest.mark.parametrize("durable", [True, False])
async def test_canceled_runs_say_why_in_the_stores_words(engine: Engine, durable: bool) -> None:
    """Transient or stored, a run canceled by its automation's disable / delete has the same reason, on the
    row and in run.canceled (the store writes automation_disabled / automation_deleted on stored ones' rows)."""
    canceled = []
    for gone in ("disabled", "deleted"):
        automation = await engine.service.create(ALICE, _payload(durable=durable))
        run = await engine.service.run_now(ALICE, automation.id)
        if gone == "disabled":
            await engine.service.set_enabled(ALICE, automation.id, False)
        else:
            await engine.service.delete(ALICE, automation.id)
        [row] = await _runs(engine, automation.id)
        assert (row.id, row.status) == (run.id, RunStatus.CANCELED)
        canceled.append((row.id, row.reason))
    assert [reason for _, reason in canceled] == ["automation_disabled", "automation_deleted"]
    assert await _canceled_events(engine) == canceled


async def test_enabling_an_ended_once_completes_it_and_frees_its_place(engine: Engine, clock: VirtualClock) -> None:
    registry = TransientRegistry(clock=clock, capacity=1)
    service = AutomationService.build(store=engine.store, registry=engine.registry, events=engine.events, clock=clock,
                                transients=registry)
    once = await service.create(ALICE, _payload(trigger={"type": "once", "at": "2030-01-01T00:00:05Z"}))
    await service.set_enabled(ALICE, once.id, False)
    clock.set(START + timedelta(minutes=1))  # its instant passed while disabled
    enabled, _ = await service.set_enabled(ALICE, once.id, True)
    assert (enabled.status, enabled.next_run_at) == (AutomationStatus.COMPLETED, None)
    assert len(registry) == 0
    with pytest.raises(NotFound):
        await service.get(ALICE, once.id)
    assert (await service.create(ALICE, _payload())).durable is False  # the place it held is free


async def test_run_now_of_a_transient_one(engine: Engine) -> None:
    automation = await engine.service.create(ALICE, _payload())
    run = await engine.service.run_now(ALICE, automation.id)
    assert (run.automation_id, run.origin) == (automation.id, Origin.MANUAL)


async def test_create_command_on_the_bus_makes_one_too(engine: Engine) -> None:
    planner: Any = engine.actors["planner"]
    created = await planner.execute_command(AutomationCommandRequested(
        command="create", owner_id="bob", args={"automation": _payload()}))
    assert created.id.startswith("tr_")
    assert (await engine.service.get(ALICE, created.id)).owner_id == "bob"


# --- firing --------------------------------------------------------------------------------------


async def test_a_due_instant_becomes_one_run_with_its_snapshots(engine: Engine, clock: VirtualClock) -> None:
    automation = await engine.service.create(ALICE, _payload())
    at = START + timedelta(minutes=1)
    assert await _fire_at(engine, clock, automation, at) == 1
    [run] = await _runs(engine, automation.id)
    assert run.dedupe_key == f"transient:{automation.id}:2030-01-01T00:01:00+00:00"
    assert (run.origin, run.status, run.scheduled_for, run.owner_id) == (Origin.SCHEDULE, RunStatus.PENDING, at,
                                                                         "alice")
    assert (run.action_type, run.action_config, run.policy) == ("simple.op", LOG["config"], automation.policy)
    # a scheduled run carries no scopes: the router authorises it against its owner when dispatched
    assert run.context == {OWNER_KEY: {"id": "alice", "scopes": []}, TRANSIENT_KEY: automation.id}
    assert await _outbox_keys(engine) == ["run.ready.quiet"]
    assert (await engine.service.get(ALICE, automation.id)).next_run_at == at + timedelta(minutes=1)
    async with engine.store.transaction() as tx:
        assert await tx.automations.query() == []


async def test_an_instant_fired_twice_is_one_run(engine: Engine, clock: VirtualClock) -> None:
    """Exactly once per instant comes from the database: a cursor that did not move (say the process
    stopped after the commit) fires the same instant again, and the dedupe key holds."""
    automation = await engine.service.create(ALICE, _payload())
    at = START + timedelta(minutes=1)
    await _fire_at(engine, clock, automation, at)
    assert engine.transients is not None
    moved = await engine.service.get(ALICE, automation.id)
    assert engine.transients.advance(automation.id, 1, moved.next_run_at, at)  # put the cursor back
    assert await _fire_at(engine, clock, automation, at) == 0
    assert len(await _runs(engine, automation.id)) == 1
    assert await _outbox_keys(engine) == ["run.ready.quiet"]


async def test_overlap_skip_records_the_instant_while_the_previous_run_is_going(
        engine: Engine, clock: VirtualClock) -> None:
    automation = await engine.service.create(ALICE, _payload())
    await _fire_at(engine, clock, automation, START + timedelta(minutes=1))
    await _fire_at(engine, clock, automation, START + timedelta(minutes=2))
    statuses = [(r.status, r.reason) for r in await _runs(engine, automation.id)]
    assert statuses == [(RunStatus.PENDING, None), (RunStatus.SKIPPED, "overlap")]
    assert await _outbox_keys(engine) == ["run.ready.quiet", "run.skipped"]


async def test_misfire_fire_once_after_a_stall(engine: Engine, clock: VirtualClock) -> None:
    automation = await engine.service.create(ALICE, _payload(policy={"misfire": "fire_once", "grace_s": 60,
                                                                     "overlap": "allow"}))
    clock.set(START + timedelta(minutes=5, seconds=30))  # the ticker was stalled; the latest instant is 00:05
    assert await _fire_at(engine, clock, automation, START + timedelta(minutes=5)) == 2
    runs = await _runs(engine, automation.id)
    assert [(r.scheduled_for, r.status, r.reason) for r in runs] == [
        (START + timedelta(minutes=m), RunStatus.SKIPPED, "misfire") for m in (1, 2, 3)
    ] + [(START + timedelta(minutes=4), RunStatus.PENDING, None),  # the latest late one (fire_once)
         (START + timedelta(minutes=5), RunStatus.PENDING, None)]  # within grace: on time
    assert (await engine.service.get(ALICE, automation.id)).next_run_at == START + timedelta(minutes=6)


async def test_a_schedule_that_ends_leaves_the_registry(engine: Engine, clock: VirtualClock) -> None:
    automation = await engine.service.create(ALICE, _payload(trigger={"type": "once", "at": "2030-01-01T00:00:05Z"}))
    assert await _fire_at(engine, clock, automation, START + timedelta(seconds=5)) == 1
    with pytest.raises(NotFound):
        await engine.service.get(ALICE, automation.id)


async def test_a_failed_transaction_moves_no_cursor(engine: Engine, clock: VirtualClock) -> None:
    automation = await engine.service.create(ALICE, _payload())
    await engine.store.stop()  # the database is gone (the fixture's stop is idempotent)
    with pytest.raises(StorageUnavailable):
        await _fire_at(engine, clock, automation, START + timedelta(minutes=1))
    assert (await engine.service.get(ALICE, automation.id)).next_run_at == START + timedelta(minutes=1)


async def test_a_broken_automation_is_disabled_and_the_others_due_with_it_fire(
        engine: Engine, clock: VirtualClock) -> None:
    """A persistent error (not the database's) is tried once more alone, then its automation is disabled
    like a disable would (waiting runs canceled) and logged by id and error type, without the value."""
    registry = engine.transients
    assert registry is not None
    good = await engine.service.create(ALICE, _payload(policy={"overlap": "allow"}))
    bad = await engine.service.create(ALICE, _payload())
    registry.add(dataclasses.replace(bad, policy={"overlap": "sometimes"}))  # no longer parses
    manual = await engine.service.run_now(ALICE, bad.id)
    at = START + timedelta(minutes=1)
    clock.set(at)
    with capture_logs() as logs:
        queued = await _timers(engine).fire([DueItem(automation_id=a.id, scheduled_for=at) for a in (bad, good)])
    assert queued == 1
    assert [(r.scheduled_for, r.status) for r in await _runs(engine, good.id)] == [(at, RunStatus.PENDING)]
    assert [(r.id, r.status, r.reason) for r in await _runs(engine, bad.id)] == [
        (manual.id, RunStatus.CANCELED, "automation_disabled")]
    disabled = await engine.service.get(ALICE, bad.id)
    assert (disabled.enabled, disabled.version, disabled.next_run_at) == (False, 2, at)
    [line] = [e for e in logs if e["event"] == "transient_automation_disabled"]
    assert (line["automation_id"], line["error"], line["field"]) == (bad.id, "InvalidInput", "policy.overlap")
    assert "sometimes" not in repr(logs)
    assert [a.id for a in registry.due_before(at + timedelta(minutes=2))] == [good.id]  # not tried again
    clock.set(at + timedelta(minutes=1))
    assert await _timers(engine).fire([DueItem(automation_id=a.id, scheduled_for=clock.now())
                                       for a in (bad, good)]) == 1


async def test_a_storage_failure_disables_nothing(engine: Engine, clock: VirtualClock) -> None:
    automation = await engine.service.create(ALICE, _payload())
    await engine.store.stop()
    with pytest.raises(StorageUnavailable):
        await _fire_at(engine, clock, automation, START + timedelta(minutes=1))
    assert (await engine.service.get(ALICE, automation.id)).enabled


# --- the API -------------------------------------------------------------------------------------


@pytest.fixture
async def client(engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(engine.control))
    async with httpx.AsyncClient(transport=transport, base_url="http://actwheel.test") as http:
        yield http


async def test_api_routes_serve_transient_ones(client: httpx.AsyncClient, engine: Engine,
                                               clock: VirtualClock) -> None:
    response = await client.post("/v1/automations", json=_payload())
    assert response.status_code == 201, response.text
    created = response.json()
    assert (created["durable"], created["next_run_at"]) == (False, "2030-01-01T00:01:00+00:00")
    automation = await engine.service.get(ALICE, created["id"])
    await _fire_at(engine, clock, automation, START + timedelta(minutes=1))
    runs = (await client.get("/v1/runs", params={"automation_id": created["id"]})).json()["items"]
    assert [r["dedupe_key"] for r in runs] == [f"transient:{created['id']}:2030-01-01T00:01:00+00:00"]
    patched = await client.patch(f"/v1/automations/{created['id']}", json={"version": 1, "name": "n"})
    assert (patched.status_code, patched.json()["version"]) == (200, 2)
    stale = await client.patch(f"/v1/automations/{created['id']}", json={"version": 1, "name": "m"})
    assert stale.status_code == 409
    disabled = await client.post(f"/v1/automations/{created['id']}/disable")
    assert disabled.json()["canceled_run_ids"] == [runs[0]["id"]]
    assert (await client.delete(f"/v1/automations/{created['id']}")).status_code == 200
    assert (await client.get(f"/v1/automations/{created['id']}")).status_code == 404


async def test_api_durable_not_a_boolean_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/automations", json=_payload(durable="no"))
    assert response.status_code == 422
    error = orjson.loads(response.content)["error"]
    assert (error["field"], error["value"]) == ("durable", "no")


# --- the ticker ----------------------------------------------------------------------------------


class _Nothing:
    async def due_before(self, before: datetime, partitions: frozenset[int] | None) -> list[ScheduledAutomation]:
        return []

    async def get_scheduled(self, automation_id: str) -> ScheduledAutomation | None:
        return None


class _FlakyTransients:
    """One transient automation every minute whose fires number ``failing`` (1-based) fail: database down."""

    def __init__(self, failing: set[int]) -> None:
        self.row = ScheduledAutomation(id="tr_1", next_run_at=START + timedelta(minutes=1),
                                       trigger_spec=EVERY_MINUTE, partition=-1, transient=True)
        self.calls: list[tuple[datetime, list[tuple[str, datetime]]]] = []
        self._failing = failing
        self._watcher: Callable[[str], None] | None = None
        self.clock: VirtualClock | None = None

    def due_before(self, before: datetime) -> list[ScheduledAutomation]:
        return [self.row] if self.row.next_run_at < before else []

    def get_scheduled(self, automation_id: str) -> ScheduledAutomation | None:
        return self.row if automation_id == self.row.id else None

    def watch(self, on_change: Callable[[str], None]) -> Callable[[], None]:
        self._watcher = on_change
        return lambda: None

    async def fire(self, items: Sequence[DueItem]) -> int:
        assert self.clock is not None
        self.calls.append((self.clock.now(), [(i.automation_id, i.scheduled_for) for i in items]))
        if len(self.calls) in self._failing:
            raise StorageUnavailable("database down")
        self.row = ScheduledAutomation(id="tr_1", next_run_at=self.row.next_run_at + timedelta(minutes=1),
                                       trigger_spec=EVERY_MINUTE, partition=-1, transient=True)
        assert self._watcher is not None
        self._watcher(self.row.id)
        return 1


async def _settle(rounds: int = 50) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def test_ticker_fires_transients_itself_and_backs_off_while_the_database_is_down() -> None:
    clock = VirtualClock(START)
    published: list[Any] = []

    async def publish(message: Any) -> None:
        published.append(message)

    transients = _FlakyTransients(failing={1, 2, 3, 5})
    transients.clock = clock
    ticker = WheelTicker(source=_Nothing(), publish=publish, clock=clock, transients=transients)
    task = asyncio.create_task(ticker.run())
    first = START + timedelta(minutes=1)
    try:
        await asyncio.wait_for(ticker.ready.wait(), timeout=5)
        assert ticker.wheel_size == 1
        for seconds in (0, 0.999, 1, 2.999, 3, 6.999, 7):  # fails at 0, 1 and 3: retried after 1, 2, then 4 s
            clock.set(first + timedelta(seconds=seconds))
            await _settle()
        assert transients.calls == [(first + timedelta(seconds=s), [("tr_1", first)]) for s in (0, 1, 3, 7)]
        second = first + timedelta(minutes=1)
        for seconds in (0, 0.999, 1):  # after a success the backoff starts again from 1 s
            clock.set(second + timedelta(seconds=seconds))
            await _settle()
        assert transients.calls[4:] == [(second + timedelta(seconds=s), [("tr_1", second)]) for s in (0, 1)]
        assert published == []  # never announced to the planners
    finally:
        ticker.request_stop()
        await asyncio.wait_for(task, timeout=5)
