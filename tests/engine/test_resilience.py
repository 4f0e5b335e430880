"""Resilience on both stacks: poison messages are dead-lettered while traffic flows; a worker that
dies mid-run leaves a run that recovery retries (STRONG) or marks UNKNOWN (NONE), never both.

Embedded stack: memory bus + SQLite under a VirtualClock, several engines in this process sharing
the bus and the database (an engine "dies" by having its actors cancelled after a tiny grace).
Services stack: RabbitMQ + PostgreSQL; the crash test kills real ``actwheel run`` processes.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest
from engine_harness import Stack
from procs import EngineProcess, engine_processes, eventually, fresh_vhost
from services import isolated_postgres_url, rabbitmq_url
from structlog.testing import capture_logs

from actwheel.bus import Envelope
from actwheel.bus.base import Bus, DeadLetter
from actwheel.bus.topology import DEFAULT_TOPOLOGY
from actwheel.clock import SystemClock, VirtualClock
from actwheel.events import EventFactory
from actwheel.messages import ActionRequested, AutomationCommandRequested
from actwheel.service import ActionService, Caller
from actwheel.storage import open_store
from actwheel.storage.base import Store
from actwheel.storage.records import NewPrincipal, PrincipalKind, Run, RunStatus

ALICE = Caller("alice")
EVERY_SECOND = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS"}
SET_X = {"type": "simple.op", "config": {"op": "set_variable", "name": "x", "value": 1}}
ROUTER_ONLY = {"roles": ("router",)}
NOT_ROUTER = {"roles": ("ticker", "planner", "recovery", "cdc", "auditor")}


# --- helpers ------------------------------------------------------------------------------

@dataclass
class DeadLetters:
    """Everything that reaches the dead-letter queue, in arrival order."""

    letters: list[DeadLetter] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def record(self, letter: DeadLetter) -> None:
        async with self.changed:
            self.letters.append(letter)
            self.changed.notify_all()

    def from_queue(self, suffix: str, match: Callable[[DeadLetter], bool]) -> list[DeadLetter]:
        return [d for d in self.letters if d.queue.endswith(suffix) and match(d)]

    async def wait_one(self, suffix: str, match: Callable[[DeadLetter], bool], within: float = 15.0) -> DeadLetter:
        async with asyncio.timeout(within), self.changed:
            await self.changed.wait_for(lambda: bool(self.from_queue(suffix, match)))
        return self.from_queue(suffix, match)[0]


@pytest.fixture
async def dead_letters_of() -> AsyncIterator[Callable[[Bus], Any]]:
    subscriptions = []

    async def subscribe(bus: Bus) -> DeadLetters:
        letters = DeadLetters()
        subscriptions.append(await bus.consume_dead_letters(letters.record, prefetch=200))
        return letters

    yield subscribe
    for subscription in subscriptions:
        await subscription.cancel()


async def pass_time(stack: Stack, seconds: float) -> None:
    if isinstance(stack.clock, VirtualClock):
        await stack.clock.advance_and_settle(seconds)


def _starting_in(stack: Stack, seconds: int) -> str:
    return (stack.clock.now() + timedelta(seconds=seconds)).astimezone(UTC).replace(microsecond=0).isoformat()


async def _keeps_firing(stack: Stack, log: Any, automation_id: str, more: int) -> None:
    """``more`` further runs of ``automation_id`` succeed (moving virtual time one second at a time)."""
    def done() -> int:
        return sum(1 for e in log.of("run.succeeded") if e["automation_id"] == automation_id)

    target = done() + more
    for _ in range(more + 10):
        if done() >= target:
            return
        await pass_time(stack, 1.0)
        before = done()
        try:
            await log.wait_for(lambda _, before=before: done() >= min(target, before + 1), within=3.0)
        except TimeoutError:
            continue
    assert done() >= target, f"only {done()} runs succeeded, wanted {target}"


def _by_body(body: bytes) -> Callable[[DeadLetter], bool]:
    return lambda letter: letter.body == body


def _by_id(envelope: Envelope) -> Callable[[DeadLetter], bool]:
    return lambda letter: letter.envelope is not None and letter.envelope.id == envelope.id


def _assert_reasoned(letter: DeadLetter, *reasons: str) -> None:
    assert letter.reason in reasons, (letter.reason, letter.detail)
    assert letter.headers.get("x-actwheel-reason") == letter.reason
    assert letter.detail


# --- 1. poison and malformed messages -----------------------------------------------------

POISON_TARGETS = [
    # (exchange attribute, routing key, queue suffix, a well-formed envelope with bad data)
    ("events", "automation.due", "actwheel.planner.due", {"items": "not a list"}),
    ("events", "run.ready", "actwheel.router.ready", {"run_ids": [17]}),
    ("commands", "action.request", "actwheel.router.requests", {"type": "simple.op", "config": []}),
    ("commands", "command.create", "actwheel.planner.commands", {"command": "explode", "owner_id": "alice"}),
]


async def test_poison_messages_are_dead_lettered_while_an_automation_keeps_firing(
        stack: Stack, dead_letters_of: Callable[[Bus], Any]) -> None:
    engine = stack.engine()
    async with engine, stack.watch(engine) as log:
        letters: DeadLetters = await dead_letters_of(engine.bus)
        automation = await engine.service.create(ALICE, {
            "trigger": {**EVERY_SECOND, "start_date_time": _starting_in(stack, 1)}, "action": SET_X,
            "policy": {"overlap": "allow"}})
        await _keeps_firing(stack, log, automation.id, 1)
        for exchange_name, routing_key, queue, bad_data in POISON_TARGETS:
            exchange = getattr(engine.bus.topology, exchange_name)
            garbage = b"\x00\xffnot json at all " + uuid.uuid4().bytes
            unknown = Envelope.new(type="no.such.type", data={"x": 1}, source="poison")
            bad = Envelope.new(type=routing_key if exchange_name == "events" else _type_for(routing_key),
                               data=bad_data, source="poison")
            await engine.bus.publish_raw(exchange, routing_key, garbage)
            await engine.bus.publish(exchange, routing_key, unknown)
            await engine.bus.publish(exchange, routing_key, bad)
            _assert_reasoned(await letters.wait_one(queue, _by_body(garbage)), "malformed")
            unknown_letter = await letters.wait_one(queue, _by_id(unknown))
            _assert_reasoned(unknown_letter, "unknown_type")
            assert unknown_letter.detail.startswith("type='no.such.type': expected "), unknown_letter.detail
            bad_letter = await letters.wait_one(queue, _by_id(bad))
            _assert_reasoned(bad_letter, "invalid_message")
            assert bad_letter.detail.startswith("data."), bad_letter.detail  # the bare field, as documented
        await _keeps_firing(stack, log, automation.id, 2)
        assert all(count == 0 for count in engine.supervisor.restarts.values()), engine.supervisor.restarts
        assert engine.ready


def _type_for(routing_key: str) -> str:
    return ActionRequested.TYPE if routing_key == "action.request" else AutomationCommandRequested.TYPE


async def test_a_bad_command_is_dead_lettered_with_the_validation_error(
        stack: Stack, dead_letters_of: Callable[[Bus], Any]) -> None:
    engine = stack.engine()
    async with engine:
        async with engine.store.transaction() as tx:  # on RabbitMQ a command acts as its publisher's service
            await tx.principals.create_if_absent(NewPrincipal(
                id="actwheel", kind=PrincipalKind.SERVICE, scopes=("automation:*",), on_behalf_of=("alice",)))
        letters: DeadLetters = await dead_letters_of(engine.bus)
        good = AutomationCommandRequested(command="create", owner_id="alice", args={"automation": {
            "name": "fine", "trigger": {"type": "once", "at": "2031-01-01T09:00:00+08:00"}, "action": SET_X}})
        bad = AutomationCommandRequested(command="create", owner_id="alice", args={"automation": {
            "name": "broken", "trigger": {"type": "cron", "expression": "61 * * * * ?"}, "action": SET_X}})
        envelopes = [Envelope.new(type=c.TYPE, data=c.to_data(), source="test") for c in (bad, good)]
        for envelope in envelopes:
            await engine.bus.publish(engine.bus.topology.commands, "command.create", envelope)
        letter = await letters.wait_one("actwheel.planner.commands", _by_id(envelopes[0]))
        _assert_reasoned(letter, "invalid_message")  # docs/messages.md: data that does not fit its type
        assert letter.detail.startswith("trigger."), letter.detail  # the bare field, no class name
        assert "61" in letter.detail, letter.detail

        async def created() -> list[Any]:
            return [a for a in await engine.service.query(ALICE, owner_id="alice") if a.name == "fine"]

        await eventually(created, within=10, what="the good command's automation")
        assert not [a for a in await engine.service.query(ALICE, owner_id="alice") if a.name == "broken"]
        assert not letters.from_queue("actwheel.planner.commands", _by_id(envelopes[1]))


# --- 2. crash mid-run -----------------------------------------------------------------------

SLOW_S = 30
#: STRONG: simple.op has no outside effect, so running it again is safe.
SLOW_STRONG = {"type": "simple.op", "config": {"op": "delay", "seconds": SLOW_S}}
#: NONE: a composite is as idempotent as its weakest step, and a notification sends again when retried.
SLOW_NONE = {"type": "composite", "config": {"steps": [
    {"name": "wait", "type": "simple.op", "config": {"op": "delay", "seconds": SLOW_S}},
    {"name": "tell", "type": "notification.send", "config": {"channel": "log", "body": "sent once"}}]}}


def _request(action: dict[str, Any], key: str) -> ActionRequested:
    return ActionRequested(type=action["type"], config=action["config"], owner_id=ALICE.owner_id,
                           idempotency_key=key)


async def _runs(store: Store, *run_ids: str) -> list[Run]:
    async with store.transaction() as tx:
        return [await tx.runs.get(run_id) for run_id in run_ids]


async def _wait_runs(store: Store, run_ids: list[str], predicate: Callable[[Run], bool], *,
                     within: float, what: str, advance: Callable[[], Any] | None = None) -> list[Run]:
    async def probe() -> list[Run] | None:
        if advance is not None:
            await advance()
        runs = await _runs(store, *run_ids)
        return runs if all(predicate(r) for r in runs) else None

    return await eventually(probe, within=within, every=0.05, what=what)


async def _phases(store: Store, run_id: str) -> list[str]:
    async with store.transaction() as tx:
        return [entry.phase for entry in await tx.audit.trail(run_id)]


async def _assert_recovered(store: Store, strong_id: str, none_id: str) -> None:
    strong, none_ = await _runs(store, strong_id, none_id)
    assert (strong.status, strong.attempt) == (RunStatus.SUCCEEDED, 2)
    assert "RECOVERY" in await _phases(store, strong_id)
    assert (none_.status, none_.attempt) == (RunStatus.UNKNOWN, 1)
    assert none_.reason == "lease_expired"
    assert "RECOVERY" in await _phases(store, none_id)


async def test_worker_dies_mid_run_strong_is_retried_none_becomes_unknown(embedded: Stack) -> None:
    stack = embedded
    clock = stack.clock
    assert isinstance(clock, VirtualClock)
    rest = stack.engine("rest", **NOT_ROUTER)
    doomed = stack.engine("doomed", grace_s=0.01, **ROUTER_ONLY)
    async with rest:
        await doomed.start()
        strong = await rest.control.actions.submit(ALICE, _request(SLOW_STRONG, "strong"))
        none_ = await rest.control.actions.submit(ALICE, _request(SLOW_NONE, "none"))
        ids = [strong.run.id, none_.run.id]
        await _wait_runs(rest.store, ids, lambda r: r.status is RunStatus.RUNNING and r.lease_owner == "doomed",
                         within=10, what="both runs RUNNING on the doomed worker")
        with capture_logs() as stopping:
            await doomed.supervisor.stop()  # grace 10 ms: the delays are abandoned mid-action
        assert [e["runs"] for e in stopping if e["event"] == "runs_abandoned_at_stop"] == [2]
        runs = await _runs(rest.store, *ids)
        assert [r.status for r in runs] == [RunStatus.RUNNING] * 2
        assert {r.lease_owner for r in runs} == {"doomed"}
        replacement = stack.engine("replacement", **ROUTER_ONLY)
        with capture_logs() as after:
            async with replacement:
                await clock.advance_and_settle(7.0)  # past the 5 s lease and a 1 s sweep
                await _wait_runs(rest.store, ids[:1], lambda r: r.status is RunStatus.RUNNING and r.attempt == 2,
                                 within=10, what="the STRONG run retried", advance=lambda: clock.advance_and_settle(1))
                await _wait_runs(rest.store, ids, lambda r: r.status in (RunStatus.SUCCEEDED, RunStatus.UNKNOWN),
                                 within=15, what="both runs settled", advance=lambda: clock.advance_and_settle(5))
                await clock.advance_and_settle(120.0)  # UNKNOWN is never retried, whatever time passes
                await _assert_recovered(rest.store, *ids)
        # the abandoned executions were cancelled: none of them woke on the shared clock to finish or fail
        assert not [e["event"] for e in after if e["event"] in ("run_fenced_out", "run_execution_failed")]
        await doomed.stop()


@pytest.mark.postgres
@pytest.mark.rabbitmq
async def test_killed_worker_process_strong_is_retried_none_becomes_unknown(tmp_path: Path) -> None:
    async with isolated_postgres_url() as database, fresh_vhost(rabbitmq_url()) as broker:
        env = {"ACTWHEEL_LEASE_S": "2"}
        rest = EngineProcess("rest", database=database, broker=broker, log_dir=tmp_path,
                             actors=NOT_ROUTER["roles"], env=env)
        worker = EngineProcess("worker", database=database, broker=broker, log_dir=tmp_path,
                               actors=ROUTER_ONLY["roles"], env=env)
        store = open_store(database, clock=SystemClock())
        await store.start()
        try:
            async with engine_processes([rest, worker]):
                service = ActionService(store=store, registry=_registry(),
                                        events=EventFactory(topology=DEFAULT_TOPOLOGY, clock=SystemClock(),
                                                            source="test"))
                slow_strong = {**SLOW_STRONG, "config": {**SLOW_STRONG["config"], "seconds": 3}}
                strong = await service.submit(ALICE, _request(slow_strong, "strong"))
                none_ = await service.submit(ALICE, _request(SLOW_NONE, "none"))
                ids = [strong.run.id, none_.run.id]
                await _wait_runs(store, ids, lambda r: r.status is RunStatus.RUNNING, within=20,
                                 what="both runs RUNNING on the worker")
                worker.kill()
                runs = await _runs(store, *ids)
                assert [r.status for r in runs] == [RunStatus.RUNNING] * 2
                worker.start()  # the same instance comes back (a restarted pod)
                await worker.wait_ready()
                await _wait_runs(store, ids, lambda r: r.status in (RunStatus.SUCCEEDED, RunStatus.UNKNOWN),
                                 within=30, what="both runs settled after the kill")
                await _assert_recovered(store, *ids)
        finally:
            await store.stop()


def _registry() -> Any:
    from actwheel.actions.defaults import default_registry

    return default_registry()


# --- 3. a router under more ready runs than it has slots ----------------------------------------

async def test_router_with_few_slots_drains_many_concurrent_ready_messages(embedded: Stack) -> None:
    """10 ``run.ready`` messages of 10 runs each at a router with 4 execution slots: every run ends
    SUCCEEDED (handlers that each hold some slots while waiting for more would deadlock)."""
    from actwheel.messages import RunsReady

    engine = embedded.engine("tight", router_concurrency=4, **ROUTER_ONLY)  # no relay: we announce ourselves
    async with engine:
        ids = [(await engine.control.actions.submit(ALICE, _request(SET_X, f"k{i}"))).run.id for i in range(100)]
        for start in range(0, 100, 10):
            message = RunsReady(run_ids=tuple(ids[start:start + 10]))
            await engine.bus.publish(engine.bus.topology.events, RunsReady.TYPE,
                                     Envelope.new(type=message.TYPE, data=message.to_data(), source="test"))
        await _wait_runs(engine.store, ids, lambda r: r.status is RunStatus.SUCCEEDED, within=20,
                         what="all 100 runs SUCCEEDED through 4 slots")
