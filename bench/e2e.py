"""Benchmark: the whole engine end to end (ticker → planner → router → auditor / CDC), one process.

Three scenarios, each on a fresh database (and, on the services stack, fresh bus names):

- ``burst``: N automations (default 10,000) due at the same instant. Fire lateness = the time the
  planner's transaction that inserted the run had COMMITTED (its commit observer, wall clock)
  − ``scheduled_for``: p50 / p99 / max; also, as ``created_*``, the run row's ``created_at``
  (on PostgreSQL the transaction's *start*, which understates lateness by the transaction's
  length); and the time from the instant until every run is SUCCEEDED (its ``finished_at``).
- ``sustained``: R automations firing every second (overlap ``allow``) for D seconds: runs/s that
  went through every hop — fired, claimed, executed, finished, audited by the auditor (a LIFECYCLE
  audit row) and CDC-published (its outbox rows published) — measured after a warm-up; plus
  what was still in flight when the window closed.
- ``idle``: one automation every second: fire lateness (committed − ``scheduled_for``) p50 / p99 / max.

Baseline, measured first in the same process (``baseline``): how late a bare ``asyncio.sleep``
wakes (p50 / p99) and one ``SELECT 1`` round trip of the stack's driver (aiosqlite or asyncpg).
The shared VM this runs on varies several-fold from hour to hour, so each scenario also prints
its figure as a ratio to it (``p99_vs_bare_sleep_p99``, ``us_per_run_vs_select1``).

Stacks: ``embedded`` (SQLite file + in-process bus) and ``services`` (PostgreSQL + RabbitMQ,
``ACTWHEEL_BENCH_DATABASE_URL`` / ``ACTWHEEL_BENCH_BROKER_URL``, default the ops/dev-services ones).
Wall-clock time throughout (a SystemClock): these are real figures, not virtual ones.

    python bench/e2e.py [--stack embedded|services|both] [--only burst,sustained,idle]
                        [--burst 10000] [--rate 5000] [--seconds 25] [--idle-seconds 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiosqlite
import asyncpg

from actwheel.actors.planner import Planner
from actwheel.bus import AmqpBus, MemoryBus, Topology
from actwheel.bus.base import Bus
from actwheel.clock import SystemClock
from actwheel.engine import Engine
from actwheel.logs import configure_logging
from actwheel.settings import Settings
from actwheel.storage import open_store
from actwheel.storage.base import Store
from actwheel.storage.records import NewAutomation, Run, RunStatus

DATABASE_URL = os.environ.get("ACTWHEEL_BENCH_DATABASE_URL",
                              "postgresql://actwheel:actwheel@127.0.0.1:54329/actwheel")
BROKER_URL = os.environ.get("ACTWHEEL_BENCH_BROKER_URL", "amqp://actwheel:actwheel@127.0.0.1:56720/")
ACTION = {"op": "set_variable", "name": "x", "value": 1}
TARGETS = {
    ("embedded", "idle", "p99_ms"): 5.0,
    ("embedded", "burst", "p99_ms"): 100.0,
    ("services", "burst", "p99_ms"): 250.0,
    ("services", "burst", "all_succeeded_s"): 5.0,
    ("embedded", "sustained", "runs_per_s"): 5000.0,
    ("services", "sustained", "runs_per_s"): 2000.0,
}


# --- stacks ---------------------------------------------------------------------------------

@dataclass
class StackRun:
    """One engine on a fresh database; ``sql`` reads what happened; ``commits`` what the planner committed."""

    kind: str
    engine: Engine
    database_url: str
    commits: list[tuple[float, float]] = field(default_factory=list)  # (scheduled_for, committed at), epoch s

    def watch_commits(self) -> None:
        planner = self.engine.actors.get("planner")
        if isinstance(planner, Planner):
            planner.on_commit(self._committed)

    def _committed(self, runs: Sequence[Run], at: datetime) -> None:
        committed = at.timestamp()
        self.commits.extend((r.scheduled_for.timestamp(), committed) for r in runs
                            if r.status is RunStatus.PENDING and r.scheduled_for is not None)

    def fire_lateness(self) -> list[float]:
        return [committed - scheduled for scheduled, committed in self.commits]

    @property
    def store(self) -> Store:
        return self.engine.store


@contextlib.asynccontextmanager
async def fresh_database(kind: str) -> AsyncIterator[str]:
    if kind == "embedded":
        with tempfile.TemporaryDirectory(prefix="actwheel-bench-") as tmp:
            yield f"sqlite:///{tmp}/bench.db"
        return
    import asyncpg

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(DATABASE_URL)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        parts = urlsplit(DATABASE_URL)
        query = [*((k, v) for k, v in parse_qsl(parts.query) if k != "search_path"), ("search_path", schema)]
        yield urlunsplit(parts._replace(query=urlencode(query)))
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


def build_engine(kind: str, database_url: str) -> Engine:
    clock = SystemClock()
    prefix = f"bench-{uuid.uuid4().hex[:8]}." if kind == "services" else ""
    topology = Topology.prefixed(prefix) if prefix else Topology()
    bus: Bus = (AmqpBus(BROKER_URL, topology=topology, clock=clock) if kind == "services"
                else MemoryBus(topology=topology, clock=clock))
    settings = Settings(database_url=database_url, broker_url=BROKER_URL if kind == "services" else "memory://",
                        instance="bench", grace_s=5.0)
    return Engine(settings, clock=clock, store=open_store(database_url, clock=clock), bus=bus,
                  topology=topology, queue_prefix=prefix)


async def delete_bus_names(engine: Engine) -> None:
    """Remove the prefixed queues and exchanges a services-stack engine declared (RabbitMQ)."""
    if not isinstance(engine.bus, AmqpBus):
        return
    import aio_pika

    prefix = engine.bus.topology.events.removesuffix("actwheel.events")
    queues = [f"{prefix}actwheel.{q}" for q in ("planner.due", "planner.commands", "planner.changes",
                                                "planner.events", "router.ready", "router.requests", "auditor",
                                                "ticker.bench", "dead-letters")]
    connection = await aio_pika.connect(BROKER_URL)
    async with connection:
        for name in [*queues]:
            channel = await connection.channel()
            with contextlib.suppress(Exception):
                await channel.queue_delete(name)
        topology = engine.bus.topology
        for name in (*topology.exchanges, topology.dlx):
            channel = await connection.channel()
            with contextlib.suppress(Exception):
                await channel.exchange_delete(name)


@contextlib.asynccontextmanager
async def stack_run(kind: str) -> AsyncIterator[StackRun]:
    async with fresh_database(kind) as url:
        engine = build_engine(kind, url)
        try:
            run = StackRun(kind, engine, url)
            run.watch_commits()
            yield run
        finally:
            await engine.stop()
            await delete_bus_names(engine)


# --- reading the database -------------------------------------------------------------------

RUN_TIMES = {
    "sqlite": "SELECT scheduled_for / 1e6, created_at / 1e6, finished_at / 1e6, status FROM runs",
    "postgres": "SELECT extract(epoch FROM scheduled_for)::float8, extract(epoch FROM created_at)::float8, "
                "extract(epoch FROM finished_at)::float8, status FROM runs",
}
COUNTS = {
    "succeeded": "SELECT count(*) FROM runs WHERE status = 'SUCCEEDED'",
    "runs": "SELECT count(*) FROM runs",
    "audited": "SELECT count(DISTINCT run_id) FROM audit WHERE phase = 'LIFECYCLE'",
    "outbox_unpublished": "SELECT count(*) FROM outbox WHERE published_at IS NULL",
}


async def sql(run: StackRun, query: str) -> list[tuple[Any, ...]]:
    if run.kind == "embedded":
        path = urlsplit(run.database_url).path
        return await asyncio.to_thread(_sqlite_rows, path, query)
    import asyncpg

    conn = await asyncpg.connect(run.database_url)
    try:
        return [tuple(r) for r in await conn.fetch(query)]
    finally:
        await conn.close()


def _sqlite_rows(path: str, query: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path, timeout=30)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


async def count(run: StackRun, what: str) -> int:
    return int((await sql(run, COUNTS[what]))[0][0])


async def run_times(run: StackRun) -> list[tuple[float, float, float | None, str]]:
    return [tuple(r) for r in await sql(run, RUN_TIMES["sqlite" if run.kind == "embedded" else "postgres"])]  # type: ignore[misc]


async def wait_count(run: StackRun, what: str, target: int, *, within: float, every: float = 0.05) -> float:
    """Poll until ``count(what) >= target``; returns when (``time.time()``), or raises TimeoutError."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await count(run, what) >= target:
            return time.time()
        await asyncio.sleep(every)
    raise TimeoutError(f"{what} did not reach {target} within {within}s (now {await count(run, what)})")


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50 / p99 / max by nearest rank, in milliseconds."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] * 1000

    return {"n": len(ordered), "p50_ms": round(rank(50), 2), "p99_ms": round(rank(99), 2),
            "max_ms": round(ordered[-1] * 1000, 2)}


# --- setup ------------------------------------------------------------------------------------

async def create_automations(store: Store, triggers: Sequence[dict[str, Any]], first: datetime, *,
                             policy: dict[str, Any] | None = None, chunk: int = 2_000) -> None:
    """Insert automations straight into storage, in big transactions (setup, not what is measured)."""
    for start in range(0, len(triggers), chunk):
        async with store.transaction() as tx:
            for i, trigger in enumerate(triggers[start:start + chunk], start):
                await tx.automations.create(NewAutomation(
                    owner_id="bench", name=f"b{i}", trigger=trigger, action_type="simple.op",
                    action_config=ACTION, policy=policy or {}, next_run_at=first))


def at_second(seconds_from_now: float) -> datetime:
    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).replace(microsecond=0)


def every_second(start: datetime, end: datetime) -> dict[str, Any]:
    return {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
            "start_date_time": start.isoformat(), "end_date_time": end.isoformat()}


# --- scenarios ----------------------------------------------------------------------------------

async def burst(kind: str, n: int, lead_s: float) -> dict[str, Any]:
    async with stack_run(kind) as run:
        await run.store.start()
        due = at_second(lead_s)
        t0 = time.monotonic()
        hourly = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "HOURS",
                  "start_date_time": due.isoformat()}  # like N cron jobs at 09:00: nothing completes
        await create_automations(run.store, [hourly] * n, due)
        setup_s = time.monotonic() - t0
        await run.engine.start()
        slack = (due - datetime.now(UTC)).total_seconds()
        if slack < 0.5:
            raise RuntimeError(f"setup took too long ({setup_s:.1f}s, {slack:.1f}s left): raise --lead")
        done_at = await wait_count(run, "succeeded", n, within=slack + 120, every=0.25)  # polling costs the engine CPU
        times = await run_times(run)
        created = percentiles([created - scheduled for scheduled, created, _, _ in times])
        finished = [f for *_, f, status in times if f is not None]
        return {"automations": n, **percentiles(run.fire_lateness()),
                **{f"created_{k}": v for k, v in created.items() if k != "n"},
                "all_succeeded_s": round(max(finished) - due.timestamp(), 3),
                "seen_succeeded_s": round(done_at - due.timestamp(), 3), "setup_s": round(setup_s, 1)}


async def sustained(kind: str, rate: int, seconds: int, warmup_s: int = 5) -> dict[str, Any]:
    async with stack_run(kind) as run:
        await run.store.start()
        start = at_second(6 + rate / 1000)
        end = start + timedelta(seconds=seconds - 1)
        await create_automations(run.store, [every_second(start, end)] * rate, start, policy={"overlap": "allow"})
        await run.engine.start()
        await asyncio.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()) + warmup_s)
        first = await _progress(run)
        window_start = time.monotonic()
        await asyncio.sleep(max(0.0, (end - datetime.now(UTC)).total_seconds()) + 1)
        last = await _progress(run)
        elapsed = time.monotonic() - window_start
        rates = {k: round((last[k] - first[k]) / elapsed, 1) for k in ("succeeded", "audited", "runs")}
        return {"offered_runs_per_s": rate, "runs_per_s": min(rates["succeeded"], rates["audited"]),
                "fired_per_s": rates["runs"], "succeeded_per_s": rates["succeeded"],
                "audited_per_s": rates["audited"], "window_s": round(elapsed, 1),
                "in_flight_at_end": last["runs"] - last["succeeded"],
                "outbox_unpublished_at_end": last["outbox_unpublished"]}


async def _progress(run: StackRun) -> dict[str, int]:
    return {what: await count(run, what) for what in COUNTS}


async def idle(kind: str, seconds: int) -> dict[str, Any]:
    async with stack_run(kind) as run:
        await run.store.start()
        start = at_second(3)
        end = start + timedelta(seconds=seconds - 1)
        await create_automations(run.store, [every_second(start, end)], start)
        await run.engine.start()
        await wait_count(run, "succeeded", seconds, within=seconds + 30, every=0.5)
        times = await run_times(run)
        created = percentiles([created - scheduled for scheduled, created, _, _ in times])
        return {"seconds": seconds, **percentiles(run.fire_lateness()),
                **{f"created_{k}": v for k, v in created.items() if k != "n"}}


# --- main -------------------------------------------------------------------------------------

# --- the machine's own floor, measured in this process -----------------------------------------

async def machine_baseline(kind: str) -> dict[str, Any]:
    """What this process gets from the machine right now, for ratios: how late a bare ``asyncio.sleep``
    wakes (the floor of any timer on this event loop) and one database round trip (``SELECT 1``) of
    the stack's driver. Shared VMs vary by several times from hour to hour; compare figures by ratio."""
    lateness = []
    for _ in range(40):
        target = math.ceil(time.time() / 0.025) * 0.025 + 0.025
        await asyncio.sleep(target - time.time())
        lateness.append(time.time() - target)
    sleep = percentiles(lateness)
    return {"sleep_p50_ms": sleep["p50_ms"], "sleep_p99_ms": sleep["p99_ms"],
            "select1_us": round(await _select1_us(kind), 1)}


async def _select1_us(kind: str, count: int = 2000) -> float:
    if kind == "embedded":
        with tempfile.TemporaryDirectory() as tmp:
            async with aiosqlite.connect(os.path.join(tmp, "baseline.db")) as db:
                started = time.perf_counter()
                for _ in range(count):
                    await db.execute_fetchall("SELECT 1")
                return (time.perf_counter() - started) / count * 1e6
    connection = await asyncpg.connect(DATABASE_URL)
    try:
        started = time.perf_counter()
        for _ in range(count):
            await connection.fetchval("SELECT 1")
        return (time.perf_counter() - started) / count * 1e6
    finally:
        await connection.close()


def _with_ratios(scenario: str, result: dict[str, Any], baseline: dict[str, Any]) -> None:
    if scenario == "idle" and "p99_ms" in result and baseline["sleep_p99_ms"]:
        result["p99_vs_bare_sleep_p99"] = round(result["p99_ms"] / baseline["sleep_p99_ms"], 1)
    if result.get("runs_per_s"):
        result["us_per_run_vs_select1"] = round(1e6 / result["runs_per_s"] / baseline["select1_us"], 1)


async def bench_stack(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    baseline = await machine_baseline(kind)
    results: dict[str, Any] = {"baseline": baseline}
    if not args.json:
        print(f"{kind:9} {'baseline':10} {json.dumps(baseline)}", flush=True)
    rate = args.rate or (5000 if kind == "embedded" else 2000)
    scenarios = {
        "idle": lambda: idle(kind, args.idle_seconds),
        "burst": lambda: burst(kind, args.burst, args.lead),
        "sustained": lambda: sustained(kind, rate, args.seconds),
    }
    for name in args.only:
        try:
            results[name] = await scenarios[name]()
        except Exception as exc:  # a scenario that fails is reported, the others still run
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        _mark_targets(kind, name, results[name])
        _with_ratios(name, results[name], baseline)
        if not args.json:
            print(f"{kind:9} {name:10} {json.dumps(results[name])}", flush=True)
    return results


def _mark_targets(kind: str, scenario: str, result: dict[str, Any]) -> None:
    for (stack, name, metric), target in TARGETS.items():
        if (stack, name) != (kind, scenario) or metric not in result:
            continue
        value = result[metric]
        met = value >= target if metric == "runs_per_s" else value <= target
        result.setdefault("targets", {})[metric] = {"target": target, "met": met}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", choices=["embedded", "services", "both"], default="both")
    parser.add_argument("--only", default="idle,burst,sustained",
                        type=lambda s: [x.strip() for x in s.split(",") if x.strip()])
    parser.add_argument("--burst", type=int, default=10_000, help="automations due at one instant")
    parser.add_argument("--lead", type=float, default=15.0, help="seconds from setup to the burst instant")
    parser.add_argument("--rate", type=int, default=0, help="automations firing every second "
                                                            "(default: the target, 5000 embedded / 2000 services)")
    parser.add_argument("--seconds", type=int, default=25, help="sustained window")
    parser.add_argument("--idle-seconds", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configure_logging("WARNING")
    stacks = ["embedded", "services"] if args.stack == "both" else [args.stack]
    report = {kind: asyncio.run(bench_stack(kind, args)) for kind in stacks}
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
