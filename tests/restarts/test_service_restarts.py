"""The broker and the database restart while automations fire: nothing is lost, the consumers come
back, and the runs complete afterwards (services stack, one engine in this process).

These disrupt the shared ``ops/dev-services`` instances, so they are marked ``restart`` (run after
every other test, see ``tests/conftest.py``) and always bring the service back in a ``finally``.
Each outage lasts ``OUTAGE_S`` seconds: that is the scenario, not a
synchronisation; everything after it waits on conditions.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from engine_harness import Stack, new_stack
from procs import eventually, postgres_restart, rabbitmq_stopped, rabbitmqctl, require_dev_postgres
from services import postgres_dsn, rabbitmq_url, with_search_path

from actwheel.engine import Engine
from actwheel.service import Caller
from actwheel.storage.records import AutomationStatus, Run, RunStatus
from actwheel.triggers import preview
from tests.instants import recorded_instants

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.slow, pytest.mark.restart]

AUTOMATIONS = 20
WINDOW_S = 14
OUTAGE_S = 3.0
ACTION = {"type": "simple.op", "config": {"op": "set_variable", "name": "x", "value": 1}}
SETTLED = (RunStatus.SUCCEEDED, RunStatus.SKIPPED)


@pytest.fixture
async def services_stack() -> AsyncIterator[Stack]:
    broker = rabbitmq_url()
    async with _restart_proof_schema() as database:
        yield new_stack("services", database, broker)


@asynccontextmanager
async def _restart_proof_schema() -> AsyncIterator[str]:
    """Like ``isolated_postgres_url``, but each statement on a new connection (a restart kills old ones)."""
    base = postgres_dsn()
    schema = f"r_{uuid.uuid4().hex[:16]}"
    await _execute(base, f'CREATE SCHEMA "{schema}"')
    try:
        yield with_search_path(base, schema)
    finally:
        await _execute(base, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _execute(url: str, statement: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _fire_through(stack: Stack, outage: Callable[[], AbstractAsyncContextManager[None]]) -> dict[str, Any]:
    """Fire AUTOMATIONS every second through ``outage`` (entered once firing is under way)."""
    engine = stack.engine(grace_s=2.0)
    async with engine:
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        end = start + timedelta(seconds=WINDOW_S - 1)
        trigger = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                   "start_date_time": start.isoformat(), "end_date_time": end.isoformat()}
        firsts = {}
        for i in range(AUTOMATIONS):
            automation = await engine.service.create(Caller("alice"), {"name": f"r{i}", "trigger": trigger,
                                                                         "action": ACTION})
            firsts[automation.id] = automation.next_run_at
        await eventually(lambda: _succeeded_since(engine, start), within=20, what="firing under way")
        async with outage():
            await asyncio.sleep(OUTAGE_S)  # the length of the outage (the scenario itself)
        resumed_at = datetime.now(UTC)
        await eventually(lambda: _all_settled(engine, list(firsts)), within=90, every=0.5,
                         what="every automation COMPLETED and every run settled after the outage")
        runs = await _runs_of(engine, list(firsts))
        return {"runs": runs, "firsts": firsts, "trigger": trigger, "resumed_at": resumed_at,
                "bus": engine.bus.stats, "restarts": dict(engine.supervisor.restarts), "ready": engine.ready,
                "queues": stack.prefix}


async def _succeeded_since(engine: Engine, since: datetime) -> bool:
    async with engine.store.transaction() as tx:
        runs = await tx.runs.query(statuses=[RunStatus.SUCCEEDED], created_after=since, limit=1)
    return bool(runs)


async def _runs_of(engine: Engine, automation_ids: list[str]) -> dict[str, list[Run]]:
    async with engine.store.transaction() as tx:
        return {a: await tx.runs.query(automation_id=a, limit=1000) for a in automation_ids}


async def _all_settled(engine: Engine, automation_ids: list[str]) -> bool:
    async with engine.store.transaction() as tx:
        for automation_id in automation_ids:
            if (await tx.automations.get(automation_id)).status is not AutomationStatus.COMPLETED:
                return False
    runs = await _runs_of(engine, automation_ids)
    return all(r.status in SETTLED for rs in runs.values() for r in rs)


def _assert_every_instant_once(outcome: dict[str, Any]) -> None:
    for automation_id, first in outcome["firsts"].items():
        expected = preview(outcome["trigger"], after=first - timedelta(microseconds=1), count=WINDOW_S + 5)
        seen = recorded_instants(((r.scheduled_for, r.context) for r in outcome["runs"][automation_id]), expected)
        assert sorted(seen.elements()) == sorted(expected), (automation_id, sum(seen.values()), len(expected))


def _assert_completed_after(outcome: dict[str, Any]) -> None:
    after = [r for rs in outcome["runs"].values() for r in rs
             if r.status is RunStatus.SUCCEEDED and r.finished_at and r.finished_at > outcome["resumed_at"]]
    assert after, "no run completed after the outage"


async def _consumers_of(prefix: str) -> dict[str, int]:
    """Consumers per queue of ``prefix``, as the broker sees them (``list_queues`` says 0 for quorum queues)."""
    listing = await rabbitmqctl("list_consumers", "-p", "/", "queue_name", "--no-table-headers")
    return dict(Counter(line.strip() for line in listing.splitlines() if line.startswith(prefix)))


async def test_broker_restart_during_firing_loses_nothing(services_stack: Stack) -> None:
    outcome = await _fire_through(services_stack, rabbitmq_stopped)
    _assert_every_instant_once(outcome)
    _assert_completed_after(outcome)
    assert outcome["bus"].reconnects >= 1, outcome["bus"]
    assert outcome["ready"]


async def test_consumers_are_back_on_the_broker_after_its_restart(services_stack: Stack) -> None:
    engine = services_stack.engine()
    async with engine:
        before = await _consumers_of(services_stack.prefix)
        async with rabbitmq_stopped():
            await asyncio.sleep(OUTAGE_S)
        await eventually(lambda: _same_consumers(services_stack.prefix, before), within=30,
                         what=f"consumers back on {sorted(before)}")
    assert {name for name, n in before.items() if n} >= {f"{services_stack.prefix}actwheel.router.ready",
                                                        f"{services_stack.prefix}actwheel.planner.due"}


async def _same_consumers(prefix: str, before: dict[str, int]) -> bool:
    now = await _consumers_of(prefix)
    return all(now.get(name, 0) >= count for name, count in before.items())


@asynccontextmanager
async def _postgres_restarted() -> AsyncIterator[None]:
    await postgres_restart()
    yield


async def test_postgres_restart_during_firing_loses_nothing(services_stack: Stack) -> None:
    require_dev_postgres()
    outcome = await _fire_through(services_stack, _postgres_restarted)
    _assert_every_instant_once(outcome)
    _assert_completed_after(outcome)
    assert outcome["ready"]


