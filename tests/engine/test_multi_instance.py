"""Three ``actwheel run`` processes on RabbitMQ + PostgreSQL: every scheduled instant of every
automation ends as exactly one run or one recorded SKIPPED, although one instance is SIGKILLed and
restarted twice while 500 automations fire every second — with partition leases and without, and
with runs that outlast two instants (``overlap: skip``: parked overlaps, the kills landing while
instants wait in the planners' memory). The variant without partition leases runs with fire-ahead on
(``ACTWHEEL_FIRE_AHEAD_S=1``: the kills land while runs planned ahead wait in the routers for their
instant; both are off by default, so the default paths keep the other two variants to themselves), and
so does a second parked-overlaps variant (fire-ahead keeps parking on: a busy automation's instants are
handed over at the instant, and the kills land while some are planned ahead and others parked; a low
backlog bound makes planners hold announcements, which then come late and park what is busy).

The expected instants come from the trigger itself (:func:`actwheel.triggers.preview`), so a
missing instant is caught too (the unique key already makes a duplicate row impossible).

``ACTWHEEL_MULTI_INSTANCE_S`` (default 24; the kills land at its thirds) sets the firing window,
``ACTWHEEL_MULTI_INSTANCE_N`` (default 500) the number of automations.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
from procs import EngineProcess, engine_processes, eventually, fresh_vhost
from services import isolated_postgres_url, rabbitmq_url

from actwheel.actions.defaults import default_registry
from actwheel.bus.topology import DEFAULT_TOPOLOGY
from actwheel.clock import SystemClock
from actwheel.events import EventFactory
from actwheel.run_context import instants_of
from actwheel.service import AutomationService, Caller
from actwheel.storage import open_store
from actwheel.triggers import preview
from tests.instants import recorded_instants

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.rabbitmq]

WINDOW_S = int(os.environ.get("ACTWHEEL_MULTI_INSTANCE_S", "24"))
AUTOMATIONS = int(os.environ.get("ACTWHEEL_MULTI_INSTANCE_N", "500"))
ACTION = {"type": "simple.op", "config": {"op": "set_variable", "name": "x", "value": 1}}
#: A run that outlasts two instants: with the default ``overlap: skip`` every automation is parked most
#: of the time, so the kills land while instants wait in the planners' memory (and its tickers' hand-over).
SLOW_ACTION = {"type": "simple.op", "config": {"op": "delay", "seconds": 2.5}}
SETTLED = ("SUCCEEDED", "SKIPPED")


def _trigger(start: datetime, end: datetime) -> dict[str, Any]:
    return {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
            "start_date_time": start.isoformat(), "end_date_time": end.isoformat()}


def _expected(trigger: dict[str, Any], first: datetime) -> list[datetime]:
    return preview(trigger, after=first - timedelta(microseconds=1), count=WINDOW_S + 10)


async def _create_automations(database: str, start: datetime, end: datetime,
                              action: dict[str, Any]) -> dict[str, tuple[dict[str, Any], datetime]]:
    """Create the automations; returns each one's trigger and first instant (``next_run_at`` at creation:
    on a loaded machine the last ones may be created after ``start``, and then begin later)."""
    clock = SystemClock()
    store = open_store(database, clock=clock)
    await store.start()
    try:
        service = AutomationService.build(store=store, registry=default_registry(), clock=clock,
                                    events=EventFactory(topology=DEFAULT_TOPOLOGY, clock=clock, source="test"))
        triggers = {}
        for i in range(AUTOMATIONS):
            trigger = _trigger(start, end)
            automation = await service.create(Caller("load"), {"name": f"a{i}", "trigger": trigger, "action": action})
            assert automation.next_run_at is not None
            triggers[automation.id] = (trigger, automation.next_run_at)
        return triggers
    finally:
        await store.stop()


class Probe:
    """Plain SQL on the test's schema: what the engines did."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    async def fired_up_to(self, instant: datetime) -> bool:
        return bool(await self.conn.fetchval("SELECT count(*) FROM runs WHERE scheduled_for >= $1", instant))

    async def busiest_ticker(self) -> str | None:
        return await self.conn.fetchval(  # type: ignore[no-any-return]
            "SELECT owner FROM partition_leases WHERE expires_at > now() GROUP BY owner ORDER BY count(*) DESC LIMIT 1")

    async def settled(self) -> bool:
        open_automations = await self.conn.fetchval("SELECT count(*) FROM automations WHERE status <> 'COMPLETED'")
        unsettled = await self.conn.fetchval(
            "SELECT count(*) FROM runs WHERE status <> ALL($1::text[])", list(SETTLED))
        return open_automations == 0 and unsettled == 0

    async def unsettled(self) -> dict[str, list[tuple[Any, ...]]]:
        """What keeps :meth:`settled` false, grouped (a failure's report)."""
        automations = await self.conn.fetch(
            "SELECT status, enabled, next_run_at, count(*) FROM automations WHERE status <> 'COMPLETED'"
            " GROUP BY 1, 2, 3 ORDER BY 3 LIMIT 20")
        runs = await self.conn.fetch(
            "SELECT status, reason, not_before IS NOT NULL, min(scheduled_for), max(scheduled_for), count(*)"
            " FROM runs WHERE status <> ALL($1::text[]) GROUP BY 1, 2, 3 LIMIT 20", list(SETTLED))
        return {"automations": [tuple(r) for r in automations], "runs": [tuple(r) for r in runs]}

    async def runs(self) -> list[asyncpg.Record]:
        return await self.conn.fetch(  # type: ignore[no-any-return]
            "SELECT automation_id, scheduled_for, status, reason, dedupe_key, attempt, context,"
            " created_at < scheduled_for AS ahead,"  # planned ahead (a finish clears not_before)
            " started_at < scheduled_for AS early FROM runs")

    async def leases(self) -> list[asyncpg.Record]:
        return await self.conn.fetch("SELECT owner, count(*) AS n FROM partition_leases GROUP BY owner")  # type: ignore[no-any-return]


async def _kill_and_restart(procs: Sequence[EngineProcess], probe: Probe, leases: bool) -> str:
    victim_name = (await probe.busiest_ticker() if leases else None) or procs[0].instance
    victim = next(p for p in procs if p.instance == victim_name)
    victim.kill()
    victim.start()
    await victim.wait_ready()
    return victim_name


def _check(triggers: dict[str, tuple[dict[str, Any], datetime]], rows: list[asyncpg.Record]) -> dict[str, Any]:
    by_automation: dict[str, list[asyncpg.Record]] = defaultdict(list)
    for row in rows:
        by_automation[row["automation_id"]].append(row)
    missing, extra, duplicates = 0, 0, 0
    examples: list[str] = []
    expected_total = 0
    for automation_id, (trigger, first) in triggers.items():
        expected = {at.astimezone(UTC) for at in _expected(trigger, first)}
        expected_total += len(expected)
        seen = recorded_instants(((r["scheduled_for"], r["context"]) for r in by_automation[automation_id]),
                                 sorted(expected))
        missing += len(expected - seen.keys())
        examples += [f"{automation_id}@{at.isoformat()}" for at in sorted(expected - seen.keys())][:3]
        extra += len(seen.keys() - expected)
        duplicates += sum(n - 1 for n in seen.values())
    statuses: Counter[tuple[str, str | None]] = Counter()
    for r in rows:  # instants, not rows: a SKIPPED(overlap) range stands for several
        statuses[(r["status"], r["reason"])] += instants_of(orjson.loads(r["context"]))
    ranges = sum(1 for r in rows if instants_of(orjson.loads(r["context"])) > 1)
    return {"expected": expected_total, "missing": missing, "extra": extra, "duplicates": duplicates,
            "statuses": statuses, "retried": sum(1 for r in rows if r["attempt"] > 1), "ranges": ranges,
            "planned_ahead": sum(1 for r in rows if r["ahead"]), "started_early": sum(1 for r in rows if r["early"]),
            "missing_examples": examples[:10]}


@pytest.mark.parametrize(("leases", "action", "fire_ahead_s"),
                         [(True, ACTION, 0), (False, ACTION, 1), (True, SLOW_ACTION, 0), (True, SLOW_ACTION, 1)],
                         ids=["partition-leases", "no-partition-leases-fire-ahead", "parked-overlaps",
                              "parked-overlaps-fire-ahead"])
async def test_three_instances_fire_every_instant_exactly_once_through_kills(
        tmp_path: Path, leases: bool, action: dict[str, Any], fire_ahead_s: int) -> None:
    async with isolated_postgres_url() as database, fresh_vhost(rabbitmq_url()) as broker:
        env = {"ACTWHEEL_LEASE_S": "5", "ACTWHEEL_FIRE_AHEAD_S": str(fire_ahead_s)}
        if action is SLOW_ACTION and fire_ahead_s:  # announcements held by the bound come late: they park
            env["ACTWHEEL_PLAN_BACKLOG"] = "200"
        procs = [EngineProcess(f"node-{i}", database=database, broker=broker, log_dir=tmp_path,
                               partition_leases=leases, env=env) for i in range(3)]
        async with engine_processes(procs):
            start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=5 + AUTOMATIONS // 100)
            end = start + timedelta(seconds=WINDOW_S - 1)
            triggers = await _create_automations(database, start, end, action)
            conn = await asyncpg.connect(database)
            try:
                probe = Probe(conn)
                killed = []
                for third in (1, 2):
                    mark = start + timedelta(seconds=WINDOW_S * third // 3)
                    await eventually(lambda m=mark: probe.fired_up_to(m), within=WINDOW_S + 30, every=0.25,
                                     what=f"firing to reach {mark}")
                    killed.append(await _kill_and_restart(procs, probe, leases))
                try:
                    await eventually(probe.settled, within=WINDOW_S + 150, every=0.5,
                                     what="every automation COMPLETED and every run settled")
                except AssertionError:  # say what is left: which automations, which runs
                    print(f"\nunsettled at {datetime.now(UTC)} (window end {end}): {await probe.unsettled()}")
                    raise
                report = _check(triggers, await probe.runs())
                print(f"\nleases={leases} killed={killed} {report} partition leases={await probe.leases()}")
            finally:
                await conn.close()
        assert report["missing"] == 0, report
        assert report["extra"] == 0, report
        assert report["duplicates"] == 0, report
        assert sum(report["statuses"].values()) == report["expected"] >= AUTOMATIONS * (WINDOW_S - 5)
        assert {status for status, _ in report["statuses"]} <= set(SETTLED), report["statuses"]
        if action is SLOW_ACTION:  # the kills did land on parked automations: their instants became ranges
            assert report["ranges"] > 0, report
        if fire_ahead_s:  # the kills did land inside lead windows: runs were planned ahead, and none started early
            assert report["planned_ahead"] > 0, report
            assert report["started_early"] == 0, report
