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
import logging
import math
import os
import sqlite3
import statistics
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
from actwheel.actors.queues import role_queues
from actwheel.actors.router import ExecutorRouter
from actwheel.auth.keys import new_key
from actwheel.bus import AmqpBus, MemoryBus, Topology
from actwheel.bus.base import Bus
from actwheel.clock import SystemClock
from actwheel.commands.run import loop_factory, tune_gc
from actwheel.engine import Engine
from actwheel.logs import configure_logging
from actwheel.service.caller import Caller
from actwheel.settings import Settings
from actwheel.storage import open_store
from actwheel.storage.base import Store
from actwheel.storage.records import NewApiKey, NewAutomation, NewPrincipal, PrincipalKind, Run, RunStatus
from bench.ablation import ablate

DATABASE_URL = os.environ.get("ACTWHEEL_BENCH_DATABASE_URL",
                              "postgresql://actwheel:actwheel@127.0.0.1:54329/actwheel")
BROKER_URL = os.environ.get("ACTWHEEL_BENCH_BROKER_URL", "amqp://actwheel:actwheel@127.0.0.1:56720/")
ACTION = {"op": "set_variable", "name": "x", "value": 1}
BENCH_OWNER = "bench"
TARGETS = {  # issue 15
    ("embedded", "idle", "p99_ms"): 5.0,
    ("embedded", "burst", "start_p99_ms"): 250.0,
    ("embedded", "burst", "all_succeeded_s"): 1.0,
    ("services", "burst", "all_succeeded_s"): 1.5,
    ("embedded", "sustained", "runs_per_s"): 5000.0,
    ("services", "sustained", "runs_per_s"): 3000.0,
    ("embedded", "sustained", "cpu_us_per_run"): 150.0,
    ("embedded", "changes", "create_per_s_100k"): 2000.0,
    ("services", "changes", "create_per_s_100k"): 2000.0,
    ("embedded", "changes", "batch_create_per_s"): 20000.0,
    ("services", "changes", "batch_create_per_s"): 20000.0,
    ("embedded", "overload", "leases_lost"): 0,
    ("services", "overload", "leases_lost"): 0,
    ("embedded", "overload", "vs_capacity"): 0.9,
    ("services", "overload", "vs_capacity"): 0.9,
}
AT_LEAST = {"runs_per_s", "create_per_s_100k", "vs_capacity", "batch_create_per_s"}


# --- stacks ---------------------------------------------------------------------------------

@dataclass
class StackRun:
    """One engine on a fresh database; ``sql`` reads what happened; ``commits`` what the planner committed."""

    kind: str
    engine: Engine
    database_url: str
    commits: list[tuple[float, float]] = field(default_factory=list)  # (scheduled_for, committed at), epoch s
    commits_by_id: list[tuple[str, float, float]] = field(default_factory=list)  # (run id, scheduled, committed)
    token: str = ""  # a bearer key of the bench owner (every scope)

    def watch_commits(self) -> None:
        planner = self.engine.actors.get("planner")
        if isinstance(planner, Planner):
            planner.on_commit(self._committed)

    def _committed(self, runs: Sequence[Run], at: datetime) -> None:
        committed = at.timestamp()
        pending = [r for r in runs if r.status is RunStatus.PENDING and r.scheduled_for is not None]
        self.commits.extend((r.scheduled_for.timestamp(), committed) for r in pending)  # type: ignore[union-attr]
        self.commits_by_id.extend((r.id, r.scheduled_for.timestamp(), committed) for r in pending)  # type: ignore[union-attr]

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


#: ``--fire-ahead S``: the engines' lead window (ACTWHEEL_FIRE_AHEAD_S; empty: off, the default).
FIRE_AHEAD_S: list[float] = []


def build_engine(kind: str, database_url: str, key_folder: Path) -> Engine:
    """The engine of one run. The bootstrap admin's key goes into ``key_folder`` (a temporary one): on
    PostgreSQL, :meth:`Settings.admin_key_path` would otherwise put it in the working directory."""
    clock = SystemClock()
    prefix = f"bench-{uuid.uuid4().hex[:8]}." if kind == "services" else ""
    topology = Topology.prefixed(prefix) if prefix else Topology()
    bus: Bus = (AmqpBus(BROKER_URL, topology=topology, clock=clock) if kind == "services"
                else MemoryBus(topology=topology, clock=clock))
    settings = Settings(database_url=database_url, broker_url=BROKER_URL if kind == "services" else "memory://",
                        instance="bench", grace_s=5.0, admin_key_file=str(key_folder / "actwheel-admin.key"),
                        fire_ahead_s=FIRE_AHEAD_S[0] if FIRE_AHEAD_S else 0.0)
    return Engine(settings, clock=clock, store=open_store(database_url, clock=clock), bus=bus,
                  topology=topology, queue_prefix=prefix)


async def bench_owner(store: Store) -> str:
    """The owner of every automation here: a user principal with every scope, and a bearer key of it
    (without the principal each run would be SKIPPED(owner_inactive))."""
    issued = new_key()
    await store.start()
    async with store.transaction() as tx:
        await tx.principals.create_if_absent(NewPrincipal(id=BENCH_OWNER, kind=PrincipalKind.USER, scopes=("*",)))
        await tx.api_keys.create(NewApiKey(id=issued.key_id, owner_id=BENCH_OWNER, key_hash=issued.key_hash,
                                           scopes=("*",), name="bench"))
    return issued.token


async def delete_bus_names(engine: Engine) -> None:
    """Remove the prefixed queues and exchanges a services-stack engine declared (RabbitMQ)."""
    if not isinstance(engine.bus, AmqpBus):
        return
    import aio_pika

    topology = engine.bus.topology
    prefix = topology.events.removesuffix("actwheel.events")
    queues = [*(spec.name for spec in role_queues(topology, prefix)), f"{prefix}actwheel.ticker.bench",
              topology.dead_letters]
    connection = await aio_pika.connect(BROKER_URL)
    async with connection:
        for name in queues:
            channel = await connection.channel()
            with contextlib.suppress(Exception):
                await channel.queue_delete(name)
        for name in (*topology.exchanges, topology.dlx):
            channel = await connection.channel()
            with contextlib.suppress(Exception):
                await channel.exchange_delete(name)


@contextlib.asynccontextmanager
async def stack_run(kind: str) -> AsyncIterator[StackRun]:
    with tempfile.TemporaryDirectory(prefix="actwheel-bench-key-") as key_folder:
        async with fresh_database(kind) as url:
            engine = build_engine(kind, url, Path(key_folder))
            try:
                run = StackRun(kind, engine, url)
                run.watch_commits()
                run.token = await bench_owner(engine.store)
                yield run
            finally:
                await engine.stop()
                await delete_bus_names(engine)


GC_TUNE: list[int] = []  # [gen-0 threshold] when --gc-freeze: what actwheel run does after start-up


async def start_engine(run: StackRun) -> None:
    await run.engine.start()
    if GC_TUNE:
        tune_gc(GC_TUNE[0])


# --- reading the database -------------------------------------------------------------------

RUN_TIMES = {
    "sqlite": "SELECT scheduled_for / 1e6, created_at / 1e6, finished_at / 1e6, status FROM runs",
    "postgres": "SELECT extract(epoch FROM scheduled_for)::float8, extract(epoch FROM created_at)::float8, "
                "extract(epoch FROM finished_at)::float8, status FROM runs",
}
COUNTS = {
    "succeeded": "SELECT count(*) FROM runs WHERE status = 'SUCCEEDED'",
    "runs": "SELECT count(*) FROM runs",
    # a LIFECYCLE entry: a row of its own (the auditor's), or inside the finish's PIPELINE row (storage/trail.py)
    "audited": {
        "sqlite": "SELECT count(DISTINCT run_id) FROM audit WHERE phase = 'LIFECYCLE' OR (phase = 'PIPELINE' "
                  "AND EXISTS (SELECT 1 FROM json_each(details, '$.events') "
                  "WHERE json_extract(value, '$.phase') = 'LIFECYCLE'))",
        "postgres": "SELECT count(DISTINCT run_id) FROM audit WHERE phase = 'LIFECYCLE' OR (phase = 'PIPELINE' "
                    "AND jsonb_path_exists(details, '$.events[*] ? (@.phase == \"LIFECYCLE\")'))",
    },
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
    query = COUNTS[what]
    if isinstance(query, dict):  # one per backend
        query = query["sqlite" if run.kind == "embedded" else "postgres"]
    return int((await sql(run, query))[0][0])


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
                             policy: dict[str, Any] | None = None, chunk: int = 2_000, name: str = "b") -> None:
    """Insert automations straight into storage, in big transactions (setup, not what is measured)."""
    for start in range(0, len(triggers), chunk):
        async with store.transaction() as tx:
            for i, trigger in enumerate(triggers[start:start + chunk], start):
                await tx.automations.create(NewAutomation(
                    owner_id=BENCH_OWNER, name=name if len(triggers) == 1 else f"{name}{i}", trigger=trigger,
                    action_type="simple.op",
                    action_config=ACTION, policy=policy or {}, next_run_at=first))


def at_second(seconds_from_now: float) -> datetime:
    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).replace(microsecond=0)


def every_second(start: datetime, end: datetime) -> dict[str, Any]:
    return {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
            "start_date_time": start.isoformat(), "end_date_time": end.isoformat()}


# --- scenarios ----------------------------------------------------------------------------------

START_TIMES = {  # instant → execution start (the claim, which the pipeline follows at once)
    "sqlite": "SELECT automation_id, scheduled_for / 1e6, started_at / 1e6, finished_at / 1e6, status FROM runs",
    "postgres": "SELECT automation_id, extract(epoch FROM scheduled_for)::float8, "
                "extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8, status FROM runs",
}


async def start_times(run: StackRun) -> list[tuple[str, float, float | None, float | None, str]]:
    return [tuple(r) for r in await sql(run, START_TIMES["sqlite" if run.kind == "embedded" else "postgres"])]  # type: ignore[misc]


async def burst(kind: str, n: int, lead_s: float) -> dict[str, Any]:
    """``n`` automations due at one instant, and a quiet *sentinel* firing every second around it: its fire
    lateness while the burst executes is returned as ``sentinel``."""
    async with stack_run(kind) as run:
        await run.store.start()
        due = at_second(lead_s)
        t0 = time.monotonic()
        hourly = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "HOURS",
                  "start_date_time": due.isoformat()}  # like N cron jobs at 09:00: nothing completes
        await create_automations(run.store, [hourly] * n, due)
        sentinel_start = due - timedelta(seconds=2)
        await create_automations(run.store, [every_second(sentinel_start, due + timedelta(seconds=60))],
                                 sentinel_start, name="sentinel")
        sentinel_id = (await sql(run, "SELECT id FROM automations WHERE name = 'sentinel'"))[0][0]
        setup_s = time.monotonic() - t0
        await start_engine(run)
        slack = (due - datetime.now(UTC)).total_seconds()
        if slack < 2.5:
            raise RuntimeError(f"setup took too long ({setup_s:.1f}s, {slack:.1f}s left): raise --lead")
        done_at = await wait_count(run, "succeeded", n, within=slack + 120, every=0.25)  # polling costs the engine CPU
        times = await start_times(run)
        burst_rows = [t for t in times if t[0] != sentinel_id]
        created = percentiles([c - s for s, c, _, _ in await run_times(run)])
        started = percentiles([st - sch for _, sch, st, _, _ in burst_rows if st is not None])
        finished = [f for *_, f, _ in burst_rows if f is not None]
        all_done = max(finished)
        sentinel_ids = {r.id for r in await _runs_of(run, sentinel_id)}
        in_burst = [committed - scheduled for r_id, scheduled, committed in run.commits_by_id
                    if r_id in sentinel_ids and due.timestamp() <= scheduled <= all_done]
        sentinel_started = [st - sch for a, sch, st, _, _ in times
                            if a == sentinel_id and st is not None and due.timestamp() <= sch <= all_done]
        burst_commits = [c - s for r_id, s, c in run.commits_by_id if r_id not in sentinel_ids]
        result = {"automations": n, **percentiles(burst_commits),
                  **{f"start_{k}": v for k, v in started.items() if k != "n"},
                  **{f"created_{k}": v for k, v in created.items() if k != "n"},
                  "all_succeeded_s": round(all_done - due.timestamp(), 3),
                  "seen_succeeded_s": round(done_at - due.timestamp(), 3), "setup_s": round(setup_s, 1)}
        sentinel = {**percentiles(in_burst), **{f"start_{k}": v for k, v in percentiles(sentinel_started).items()
                                                if k != "n"}, "window_s": round(all_done - due.timestamp(), 3)}
        return {"burst": result, "sentinel": sentinel}


async def _runs_of(run: StackRun, automation_id: str) -> list[Run]:
    async with run.store.transaction() as tx:
        return await tx.runs.query(automation_id=automation_id, limit=1000)


def _cpu() -> float:
    return time.process_time()


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def sustained(kind: str, rate: int, seconds: int, warmup_s: int = 5) -> dict[str, Any]:
    async with stack_run(kind) as run:
        await run.store.start()
        start = at_second(6 + rate / 1000)
        end = start + timedelta(seconds=seconds - 1)
        await create_automations(run.store, [every_second(start, end)] * rate, start, policy={"overlap": "allow"})
        await start_engine(run)
        await asyncio.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()) + warmup_s)
        first = await _progress(run)
        window_start, cpu_start = time.monotonic(), _cpu()
        await asyncio.sleep(max(0.0, (end - datetime.now(UTC)).total_seconds()) + 1)
        cpu_s = _cpu() - cpu_start
        last = await _progress(run)
        elapsed = time.monotonic() - window_start
        rates = {k: round((last[k] - first[k]) / elapsed, 1) for k in ("succeeded", "audited", "runs")}
        done = last["succeeded"] - first["succeeded"]
        return {"offered_runs_per_s": rate, "runs_per_s": min(rates["succeeded"], rates["audited"]),
                "cpu_us_per_run": round(cpu_s / done * 1e6, 1) if done else None,
                "cpu_share": round(cpu_s / elapsed, 2),
                "fired_per_s": rates["runs"], "succeeded_per_s": rates["succeeded"],
                "audited_per_s": rates["audited"], "window_s": round(elapsed, 1),
                "in_flight_at_start": first["runs"] - first["succeeded"],
                "in_flight_at_end": last["runs"] - last["succeeded"],
                "outbox_unpublished_at_end": last["outbox_unpublished"]}


#: Instants per outcome: a parked overlap's SKIPPED range is one row standing for ``$skipped.instants``.
OUTCOMES = {
    "sqlite": "SELECT status, coalesce(reason, ''), "
              "sum(coalesce(json_extract(context, '$.\"$skipped\".instants'), 1)), count(*) FROM runs GROUP BY 1, 2",
    "postgres": "SELECT status, coalesce(reason, ''), sum(coalesce((context->'$skipped'->>'instants')::int, 1))::int, "
                "count(*) FROM runs GROUP BY 1, 2",
}


async def overload(kind: str, capacity: float, factor: float, seconds: int, warmup_s: int = 5) -> dict[str, Any]:
    """Offer ``factor`` × ``capacity`` runs/s (automations firing every second, the default overlap policy
    ``skip``) for ``seconds``: what completes, leases lost, memory growth, and where the instants went."""
    offered = int(capacity * factor)
    async with stack_run(kind) as run:
        await run.store.start()
        start = at_second(6 + offered / 1000)
        end = start + timedelta(seconds=seconds - 1)
        await create_automations(run.store, [every_second(start, end)] * offered, start)
        await start_engine(run)
        await asyncio.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()) + warmup_s)
        first, rss_start = await _progress(run), _rss_mb()
        window_start = time.monotonic()
        await asyncio.sleep(max(0.0, (end - datetime.now(UTC)).total_seconds()) + 1)
        last, rss_end = await _progress(run), _rss_mb()
        elapsed = time.monotonic() - window_start
        router, planner = run.engine.actors.get("router"), run.engine.actors.get("planner")
        rows = await sql(run, OUTCOMES["sqlite" if run.kind == "embedded" else "postgres"])
        outcomes = {f"{status}({reason})" if reason else status: n for status, reason, n, _ in rows}
        row_counts = {f"{status}({reason})" if reason else status: n for status, reason, _, n in rows}
        done = min(last["succeeded"] - first["succeeded"], last["audited"] - first["audited"])
        return {"capacity_runs_per_s": round(capacity, 1), "offered_runs_per_s": offered,
                "runs_per_s": round(done / elapsed, 1), "vs_capacity": round(done / elapsed / capacity, 2),
                "leases_lost": router.leases_lost if isinstance(router, ExecutorRouter) else None,
                "rss_growth_mb": round(rss_end - rss_start, 1), "rss_end_mb": round(rss_end, 1),
                "window_s": round(elapsed, 1), "outcomes_at_end": outcomes, "rows_at_end": row_counts,
                "parked_at_end": len(planner.parked) if isinstance(planner, Planner) else None}


async def _progress(run: StackRun) -> dict[str, int]:
    return {what: await count(run, what) for what in COUNTS}


async def idle(kind: str, seconds: int) -> dict[str, Any]:
    async with stack_run(kind) as run:
        await run.store.start()
        start = at_second(3)
        end = start + timedelta(seconds=seconds - 1)
        await create_automations(run.store, [every_second(start, end)], start)
        await start_engine(run)
        await wait_count(run, "succeeded", seconds, within=seconds + 30, every=0.5)
        times = await run_times(run)
        created = percentiles([created - scheduled for scheduled, created, _, _ in times])
        return {"seconds": seconds, **percentiles(run.fire_lateness()),
                **{f"created_{k}": v for k, v in created.items() if k != "n"}}


async def transient_burst(kind: str, n: int, lead_s: float) -> dict[str, Any]:
    """``n`` ``durable: false`` automations (``once``) due at one instant: start lateness p99 and all
    SUCCEEDED; then, when APScheduler 3.11 is installed, its in-memory AsyncIOScheduler firing ``n``
    no-op one-shot jobs due at one instant, in this process (``apscheduler``)."""
    async with stack_run(kind) as run:
        await start_engine(run)
        due = at_second(lead_s)
        caller = Caller(BENCH_OWNER)
        payload = {"trigger": {"type": "once", "at": due.isoformat()}, "durable": False,
                   "action": {"type": "simple.op", "config": ACTION}}
        for i in range(n):
            await run.engine.control.automations.create(caller, {**payload, "name": f"t{i}"})
            if i % 200 == 0:
                await asyncio.sleep(0)
        slack = (due - datetime.now(UTC)).total_seconds()
        if slack < 1:
            raise RuntimeError(f"setup took too long ({slack:.1f}s left): raise --lead")
        await wait_count(run, "succeeded", n, within=slack + 120, every=0.25)
        times = await start_times(run)
        started = percentiles([st - sch for _, sch, st, _, _ in times if st is not None])
        finished = [f for *_, f, _ in times if f is not None]
        result: dict[str, Any] = {"automations": n, **{f"start_{k}": v for k, v in started.items() if k != "n"},
                                  "all_succeeded_s": round(max(finished) - due.timestamp(), 3)}
    result["apscheduler"] = await apscheduler_burst(n, lead_s=3.0)
    peer = result["apscheduler"].get("start_p99_ms")
    if peer:
        result["start_p99_vs_apscheduler"] = round(result["start_p99_ms"] / peer, 2)
    return result


async def apscheduler_burst(n: int, lead_s: float) -> dict[str, Any]:
    """The peer: APScheduler 3.11's AsyncIOScheduler (memory job store, not durable), ``n`` no-op
    coroutine jobs with a DateTrigger at one instant; lateness = the job's start − the instant."""
    try:
        import apscheduler
        from apscheduler.schedulers.asyncio import AsyncIOScheduler
        from apscheduler.triggers.date import DateTrigger
    except ImportError:
        return {"skipped": "apscheduler>=3.11,<4 is not installed (pip install '.[bench]')"}
    due = datetime.now(UTC) + timedelta(seconds=lead_s)
    started: list[float] = []
    all_done = asyncio.Event()

    async def job() -> None:
        started.append(time.time())
        if len(started) >= n:
            all_done.set()

    scheduler = AsyncIOScheduler(timezone=UTC, job_defaults={"misfire_grace_time": 60, "coalesce": False})
    for i in range(n):
        scheduler.add_job(job, DateTrigger(run_date=due), id=f"j{i}", max_instances=1)
    scheduler.start()
    try:
        await asyncio.wait_for(all_done.wait(), timeout=lead_s + 120)
    finally:
        scheduler.shutdown(wait=False)
    at = due.timestamp()
    return {"version": apscheduler.__version__, "jobs": n,
            **{f"start_{k}": v for k, v in percentiles([s - at for s in started]).items() if k != "n"},
            "all_executed_s": round(max(started) - at, 3)}


# --- changes: the cost of a change with few and with many automations stored ---------------------

CHANGE_OPS = ("create", "update", "enable", "disable", "delete")
FAR = {"type": "cron", "expression": "0 0 3 * * ?"}
#: The body of every automation the change rows create: far from due, so nothing it sets off is a run.
FAR_BODY: dict[str, Any] = {"trigger": FAR, "action": {"type": "simple.op", "config": ACTION}}


async def changes(kind: str, small: int, large: int, ops: int, creates: int, concurrency: int) -> dict[str, Any]:
    """Through the HTTP app (ASGI, in this process, the engines' every actor running): CPU µs of this
    process per create / update / enable / disable / delete — measured over ``ops`` sequential requests
    each and until the engines are idle again (what the change sets off counts) — on two engines side by
    side, one with ``small`` automations stored and one with ``large``, in alternating blocks
    (:func:`_change_costs`); then, the small one stopped, creates/s of ``creates`` concurrent single
    creates (``concurrency`` in flight) with ``large`` stored, through the in-process client and then over
    a real socket from another process (:func:`_socket_creates`); then the batch route's creates/s."""
    async with stack_run(kind) as run:
        await start_engine(run)
        async with _api_client(run) as client:
            async with stack_run(kind) as small_run:
                await start_engine(small_run)
                async with _api_client(small_run) as small_client:
                    await _fill(small_run, small)
                    await _fill(run, large)
                    costs = await _change_costs({"small": small_client, "large": client}, ops)
            at_small, at_large = costs["small"], costs["large"]
            rate = await _concurrent_creates(client, creates, concurrency)
            batch = await _batch_creates(client, creates)
        over_socket = await _socket_creates(run, creates, concurrency)
    ratios = {op: round(at_large[op]["cpu_us"] / at_small[op]["cpu_us"], 2) for op in CHANGE_OPS}
    return {f"cost_{small}": at_small, f"cost_{large}": at_large, "cost_ratio_100k_vs_100": ratios,
            "create_per_s_100k": rate["per_s"], "concurrent_creates": rate, "stored_large": large, "batch": batch,
            "batch_create_per_s": batch.get("per_s"), "socket_creates": over_socket,
            "create_per_s_100k_over_socket": over_socket["per_s"]}


def _api_client(run: StackRun) -> Any:
    """An HTTP client of ``run``'s API, in this process (ASGI), as its bench owner."""
    import httpx

    from actwheel.api.app import create_app

    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(run.engine.control)),
                             base_url="http://bench", headers={"authorization": f"Bearer {run.token}"}, timeout=60)


async def _socket_creates(run: StackRun, total: int, concurrency: int) -> dict[str, Any]:
    """Creates/s of ``total`` single creates over a real local socket: the API served by uvicorn in this
    process (as ``actwheel run`` serves it), the client another process (``bench/create_client.py``), so
    that this process's CPU per create is the server's own, without an in-process client's."""
    import socket

    import uvicorn

    from actwheel.api.app import create_app

    await _settle()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)  # the client's connections wait in the backlog until uvicorn accepts them
    server = uvicorn.Server(uvicorn.Config(create_app(run.engine.control), log_level="warning", lifespan="off",
                                           access_log=False))
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    client = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).with_name("create_client.py")),
        "--url", f"http://127.0.0.1:{listener.getsockname()[1]}", "--creates", str(total),
        "--concurrency", str(concurrency), env={**os.environ, "ACTWHEEL_BENCH_TOKEN": run.token},
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        assert client.stdin is not None
        assert client.stdout is not None
        if (await client.stdout.readline()).strip() != b"ready":  # imported, connected: not timed
            raise RuntimeError("bench/create_client.py did not start")
        cpu_start = _cpu()
        client.stdin.write(b"go\n")
        await client.stdin.drain()
        line = await client.stdout.readline()
        cpu = _cpu() - cpu_start
        if await client.wait() != 0 or not line:
            raise RuntimeError(f"bench/create_client.py failed (exit {client.returncode})")
    finally:
        if client.returncode is None:
            client.kill()
        server.should_exit = True
        await serving
    report = json.loads(line)
    return {"per_s": round(report["creates"] / report["wall_s"], 1), "creates": report["creates"],
            "concurrency": concurrency, "server_cpu_us_per_create": round(cpu / report["creates"] * 1e6, 1),
            "client_cpu_us_per_create": round(report["client_cpu_s"] / report["creates"] * 1e6, 1)}


async def _batch_creates(client: Any, total: int, size: int = 1000) -> dict[str, Any]:
    """``POST /v1/automations/batch`` of ``size`` items, one call after another, ``total`` in all (a 404
    or 405 where the route does not exist: skipped)."""
    await _settle()
    started, cpu_start, done = time.perf_counter(), _cpu(), 0
    while done < total:
        items = [{**FAR_BODY, "name": f"m{done + i}"} for i in range(min(size, total - done))]
        answer = await client.post("/v1/automations/batch", json={"items": items})
        if answer.status_code in (404, 405):
            return {"skipped": f"POST /v1/automations/batch answered {answer.status_code}"}
        done += len(_ok(answer, 201)["items"])
    elapsed = time.perf_counter() - started
    return {"per_s": round(done / elapsed, 1), "creates": done, "batch_size": size,
            "cpu_us_per_create": round((_cpu() - cpu_start) / done * 1e6, 1)}


async def _fill(run: StackRun, target: int) -> None:
    stored = int((await sql(run, "SELECT count(*) FROM automations"))[0][0])
    if target > stored:
        await create_automations(run.store, [FAR] * (target - stored), at_second(3600 * 24 * 30), chunk=5_000)


async def _settle(quiet_share: float = 0.05, step: float = 0.05, limit: float = 10.0) -> None:
    """Wait until this process uses less than ``quiet_share`` of a core over ``step`` (the engine is idle)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = _cpu()
        await asyncio.sleep(step)
        if _cpu() - before < quiet_share * step:
            return


class _ChangeSteps:
    """One request of each kind of change against one engine's API, the ``i``-th automation it created."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._automations: list[dict[str, Any]] = []

    async def create(self, i: int) -> None:
        answer = await self._client.post("/v1/automations", json={**FAR_BODY, "name": f"c{i}"})
        self._automations.append(_ok(answer, 201))

    async def update(self, i: int) -> None:
        a = self._automations[i]
        self._automations[i] = _ok(await self._client.patch(f"/v1/automations/{a['id']}",
                                                            json={"name": f"u{i}", "version": a["version"]}), 200)

    async def disable(self, i: int) -> None:
        _ok(await self._client.post(f"/v1/automations/{self._automations[i]['id']}/disable"), 200)

    async def enable(self, i: int) -> None:
        _ok(await self._client.post(f"/v1/automations/{self._automations[i]['id']}/enable"), 200)

    async def delete(self, i: int) -> None:
        _ok(await self._client.delete(f"/v1/automations/{self._automations[i]['id']}"), 200)


async def _change_costs(clients: dict[str, Any], ops: int, blocks: int = 8) -> dict[str, dict[str, dict[str, float]]]:
    """CPU µs per change for each engine (by name), over ``ops`` requests of each kind split into ``blocks``
    blocks that alternate between the engines (the first engine first, then the last first, ...), each
    block timed until the process is idle again. Side by side in the same minutes, the engines see the
    same box, garbage and caches, so their ratio does not move with the minute the way two phases one
    after the other did (docs/benchmarks.md, round 17)."""
    steps = {name: _ChangeSteps(client) for name, client in clients.items()}
    per_block = max(1, ops // blocks)  # ``ops`` rounded down to whole blocks; each entry says how many ran
    cpu = {name: dict.fromkeys(CHANGE_OPS, 0.0) for name in clients}
    walls: dict[str, dict[str, list[float]]] = {name: {op: [] for op in CHANGE_OPS} for name in clients}
    await _settle()
    for op in ("create", "update", "disable", "enable", "delete"):  # each needs the automations the first made
        for block in range(blocks):
            for name in (list(clients) if block % 2 == 0 else list(reversed(clients))):
                step = getattr(steps[name], op)
                cpu_start = _cpu()
                for i in range(block * per_block, (block + 1) * per_block):
                    t = time.perf_counter()
                    await step(i)
                    walls[name][op].append(time.perf_counter() - t)
                await _settle()
                cpu[name][op] += _cpu() - cpu_start
    done = blocks * per_block
    return {name: {op: {"cpu_us": round(cpu[name][op] / done * 1e6, 1), "requests": done,
                        "wall_p50_ms": round(statistics.median(walls[name][op]) * 1000, 2)} for op in CHANGE_OPS}
            for name in clients}


def _ok(answer: Any, status: int) -> dict[str, Any]:
    if answer.status_code != status:
        raise RuntimeError(f"{answer.request.method} {answer.request.url.path} answered {answer.status_code}: "
                           f"{answer.text[:300]}")
    data: dict[str, Any] = answer.json()
    return data.get("automation", data)


async def _concurrent_creates(client: Any, total: int, concurrency: int) -> dict[str, Any]:
    await _settle()
    queue = iter(range(total))

    async def worker() -> None:
        for i in queue:
            _ok(await client.post("/v1/automations", json={**FAR_BODY, "name": f"k{i}"}), 201)

    started, cpu_start = time.perf_counter(), _cpu()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {"per_s": round(total / elapsed, 1), "creates": total, "concurrency": concurrency,
            "cpu_us_per_create": round((_cpu() - cpu_start) / total * 1e6, 1)}


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
    rate = args.rate or (5000 if kind == "embedded" else 3600)  # above the target: see sustained

    def capacity() -> float:  # the sustainable rate measured in this run, else --capacity
        measured = results.get("sustained", {}).get("runs_per_s")
        return float(args.capacity or measured or 1000)

    scenarios = {
        "idle": lambda: idle(kind, args.idle_seconds),
        "burst": lambda: burst(kind, args.burst, args.lead),
        "transient_burst": lambda: transient_burst(kind, min(args.burst, 10_000), args.lead),
        "sustained": lambda: sustained(kind, rate, args.seconds),
        "overload": lambda: overload(kind, capacity(), args.overload_factor, args.overload_seconds),
        "changes": lambda: changes(kind, 100, args.stored, args.change_ops, args.creates, args.concurrency),
    }
    for name in args.only:
        try:
            outcome = await scenarios[name]()
        except Exception as exc:  # a scenario that fails is reported, the others still run
            outcome = {"error": f"{type(exc).__name__}: {exc}"}
        # burst also measures the sentinel: one scenario, two rows
        parts = outcome if name == "burst" and "burst" in outcome else {name: outcome}
        for part, result in parts.items():
            results[part] = result
            _mark_targets(kind, part, result)
            _with_ratios(part, result, baseline)
            if not args.json:
                print(f"{kind:9} {part:10} {json.dumps(result)}", flush=True)
    return results


def _mark_targets(kind: str, scenario: str, result: dict[str, Any]) -> None:
    for (stack, name, metric), target in TARGETS.items():
        if (stack, name) != (kind, scenario) or metric not in result:
            continue
        value = result[metric]
        met = value >= target if metric in AT_LEAST else value <= target
        result.setdefault("targets", {})[metric] = {"target": target, "met": met}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", choices=["embedded", "services", "both"], default="both")
    parser.add_argument("--only", default="idle,burst,transient_burst,sustained,overload,changes",
                        type=lambda s: [x.strip() for x in s.split(",") if x.strip()])
    parser.add_argument("--burst", type=int, default=10_000, help="automations due at one instant")
    parser.add_argument("--lead", type=float, default=20.0, help="seconds from setup to the burst instant")
    parser.add_argument("--rate", type=int, default=0,
                        help="automations firing every second (default: 5000 embedded, the target; 3600 services, "
                             "1.2 × its target)")
    parser.add_argument("--capacity", type=float, default=0.0,
                        help="overload: the sustainable runs/s (default: sustained's figure in this run, else 1000)")
    parser.add_argument("--overload-factor", type=float, default=5.0)
    parser.add_argument("--overload-seconds", type=int, default=60)
    parser.add_argument("--stored", type=int, default=100_000, help="changes: automations stored for the large case")
    parser.add_argument("--change-ops", type=int, default=200, help="changes: requests per operation and size")
    parser.add_argument("--creates", type=int, default=4000, help="changes: concurrent single creates")
    parser.add_argument("--concurrency", type=int, default=64, help="changes: creates in flight")
    parser.add_argument("--seconds", type=int, default=25, help="sustained window")
    parser.add_argument("--idle-seconds", type=int, default=20)
    parser.add_argument("--loop", default="asyncio", choices=["auto", "asyncio", "uvloop"],
                        help="the event loop (actwheel run's ACTWHEEL_LOOP; default here: the stdlib's)")
    parser.add_argument("--gc-freeze", type=int, default=-1, metavar="GEN0",
                        help="after each engine start, gc.freeze() and (GEN0 > 0) that generation-0 threshold, as "
                             "actwheel run does (default: off)")
    parser.add_argument("--fire-ahead", type=float, default=0.0, metavar="S",
                        help="the engines' fire-ahead lead window in seconds (ACTWHEEL_FIRE_AHEAD_S; default 0: off)")
    parser.add_argument("--ablate", default="", type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                        metavar="HOPS", help="diagnostic: take these hops out (auditor, lifecycle, pipeline, trail: "
                                             "bench/ablation.py) "
                                             "to measure what each costs; never the engine's figures")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ablated = ablate(args.ablate)
    if ablated and not args.json:
        print(f"ABLATED (diagnostic, not the engine's figures): {', '.join(ablated)}", flush=True)
    if args.gc_freeze >= 0:
        GC_TUNE.append(args.gc_freeze)
    if args.fire_ahead:
        FIRE_AHEAD_S.append(args.fire_ahead)
    configure_logging("WARNING")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise
    stacks = ["embedded", "services"] if args.stack == "both" else [args.stack]
    report = {}
    for kind in stacks:
        with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
            report[kind] = runner.run(bench_stack(kind, args))
            report[kind]["runtime"] = {"loop": type(runner.get_loop()).__module__, "gc": GC_TUNE[:1] or None,
                                       "fire_ahead_s": args.fire_ahead, "ablated": ablated}
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
