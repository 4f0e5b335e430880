"""durable: false automations through the running engine: the ticker fires them from its own wheel, the runs go
through the router, pipeline and auditor like any other, and nothing reaches the automations table.

Embedded stack: memory bus + SQLite under a VirtualClock; services stack: RabbitMQ + PostgreSQL, system clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, timedelta
from typing import Any

import pytest
from engine_harness import EventLog, Stack

from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import InvalidInput, NotFound
from actwheel.service import Caller
from actwheel.storage.records import Run, RunStatus

ALICE = Caller("alice")
LOG_ACTION = {"type": "simple.op", "config": {"op": "log", "message": "watcher ${run.id}"}}
PHASES = ["DISPATCH", "PERMISSION", "VALIDATE", "EXECUTE", "EXECUTE"]


async def pass_time(stack: Stack, seconds: float) -> None:
    """Move virtual time on the embedded stack; real time passes by itself on the services stack."""
    if isinstance(stack.clock, VirtualClock):
        await stack.clock.advance_and_settle(seconds)


def _seconds_from_now(stack: Stack, seconds: int) -> str:
    return (stack.clock.now() + timedelta(seconds=seconds)).astimezone(UTC).replace(microsecond=0).isoformat()


def _every_second(stack: Stack, **overrides: Any) -> dict[str, Any]:
    return {"name": "watcher", "durable": False, "action": LOG_ACTION, "policy": {"overlap": "allow"},
            "trigger": {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                        "start_date_time": _seconds_from_now(stack, 1)}, **overrides}


async def _runs(engine: Engine, automation_id: str) -> list[Run]:
    async with engine.store.transaction() as tx:
        return sorted(await tx.runs.query(automation_id=automation_id, limit=1000), key=lambda r: r.dedupe_key)


async def _until(engine: Engine, log: EventLog, automation_id: str, holds: Callable[[list[Run]], bool],
                 within: float = 15.0) -> list[Run]:
    """The automation's runs once ``holds(runs)``: read again after every event the engine publishes."""
    async with asyncio.timeout(within):
        while True:
            seen = len(log.deliveries)
            runs = await _runs(engine, automation_id)
            if holds(runs):
                return runs
            await log.wait_for(lambda events, seen=seen: len(events.deliveries) > seen, within)


def _succeeded(count: int) -> Callable[[list[Run]], bool]:
    return lambda runs: sum(r.status is RunStatus.SUCCEEDED for r in runs) >= count


async def test_a_transient_automation_fires_each_instant_once_and_is_never_stored(stack: Stack) -> None:
    engine = stack.engine()
    async with engine, stack.watch(engine) as log:
        automation = await engine.service.create(ALICE, _every_second(stack))
        assert (automation.durable, automation.id[:3]) == (False, "tr_")
        await pass_time(stack, 1)
        await _until(engine, log, automation.id, _succeeded(1))
        await pass_time(stack, 1)
        runs = await _until(engine, log, automation.id, _succeeded(2))
        done = [r for r in runs if r.status is RunStatus.SUCCEEDED]
        instants = [r.scheduled_for for r in runs]
        assert len(instants) == len(set(instants))
        assert all(r.dedupe_key == f"transient:{automation.id}:{r.scheduled_for.isoformat()}" for r in runs)
        async with engine.store.transaction() as tx:
            trail = await tx.audit.trail(done[0].id)
            assert await tx.automations.query() == []
        assert [e.phase for e in trail][:5] == PHASES
        assert (trail[3].details["state"], trail[4].details["state"]) == ("started", "completed")
        listed = await engine.service.get(ALICE, automation.id)
        assert listed.next_run_at is not None
        assert listed.next_run_at > max(i for i in instants if i is not None)


async def test_a_transient_once_fires_then_leaves(embedded: Stack) -> None:
    engine = embedded.engine()
    async with engine, embedded.watch(engine) as log:
        automation = await engine.service.create(ALICE, {
            "durable": False, "action": LOG_ACTION, "trigger": {"type": "once", "at": _seconds_from_now(embedded, 2)}})
        await pass_time(embedded, 2)
        [run] = await _until(engine, log, automation.id, _succeeded(1))
        assert run.scheduled_for == automation.next_run_at
        with pytest.raises(NotFound):
            await engine.service.get(ALICE, automation.id)
        assert automation.id not in engine.actors["ticker"]._wheel  # type: ignore[attr-defined]


async def test_disable_and_delete_stop_it(embedded: Stack) -> None:
    """A witness fires on the same instants in the same batch: once its run is there, the others would be too."""
    engine = embedded.engine()
    async with engine, embedded.watch(engine) as log:
        witness = await engine.service.create(ALICE, _every_second(embedded))
        disabled = await engine.service.create(ALICE, _every_second(embedded))
        deleted = await engine.service.create(ALICE, _every_second(embedded))
        await pass_time(embedded, 1)
        for automation in (witness, disabled, deleted):
            await _until(engine, log, automation.id, _succeeded(1))
        await engine.service.set_enabled(ALICE, disabled.id, False)
        await engine.service.delete(ALICE, deleted.id)
        wheel = engine.actors["ticker"]._wheel  # type: ignore[attr-defined]
        assert (disabled.id in wheel, deleted.id in wheel, witness.id in wheel) == (False, False, True)
        for seconds in (2, 3):
            await pass_time(embedded, 1)
            await _until(engine, log, witness.id, _succeeded(seconds))
        assert len(await _runs(engine, disabled.id)) == len(await _runs(engine, deleted.id)) == 1
        enabled, _ = await engine.service.set_enabled(ALICE, disabled.id, True)
        assert enabled.next_run_at is not None
        assert enabled.next_run_at > embedded.clock.now()
        await pass_time(embedded, 1)
        await _until(engine, log, disabled.id, _succeeded(2))


async def test_an_instance_without_a_ticker_refuses(embedded: Stack) -> None:
    engine = embedded.engine(roles=("planner", "router"))
    async with engine:
        with pytest.raises(InvalidInput) as caught:
            await engine.service.create(ALICE, _every_second(embedded))
        assert (caught.value.field, caught.value.value) == ("durable", False)
        assert await engine.service.query(ALICE) == []
