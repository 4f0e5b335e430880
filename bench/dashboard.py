"""The ops dashboard's API at scale (issue 13): p50/p95 of each route over a loaded PostgreSQL.

    .venv/bin/python bench/dashboard.py [--automations 100000] [--runs 1000000] [--owners 100] [--calls 30]

A fresh schema is loaded with COPY (automations straight into automation_specs + automation_state, as
bench/scale.py does; runs into runs): ``--owners`` owners, runs spread over the last 30 days (newest
densest: a tenth of them in the last day), 85 % SUCCEEDED and the rest FAILED, SKIPPED (overlap,
misfire), CANCELED, DEAD, UNKNOWN and a few PENDING. Each route is called ``--calls`` times through the
real Starlette app in process (httpx ASGI transport; ``--insecure-no-auth``: the caller is the local
owner holding every scope, so stats and listings are the cluster-wide, heavier ones); the table lists
p50 / p95 / max in ms and the row counts. The schema is dropped afterwards (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import httpx
import orjson

from actwheel.api.app import create_app
from actwheel.bus.memory import MemoryBus
from actwheel.engine import Engine
from actwheel.logs import configure_logging
from actwheel.settings import Settings
from actwheel.storage import open_store

DATABASE_URL = os.environ.get("ACTWHEEL_BENCH_DATABASE_URL", "postgresql://actwheel:actwheel@127.0.0.1:54329/actwheel")
SPEC_COLUMNS = ("id", "owner_id", "name", "labels", "agent_id", "trigger", "action_type", "action_config", "policy",
                "durable", "created_at", "updated_at")
STATE_COLUMNS = ("automation_id", "partition", "enabled", "status", "next_run_at", "version")
RUN_COLUMNS = ("id", "automation_id", "dedupe_key", "scheduled_for", "origin", "status", "reason", "attempt",
               "action_type", "action_config", "policy", "owner_id", "context", "created_at", "updated_at",
               "started_at", "finished_at")
ACTION = orjson.dumps({"op": "log", "message": "dashboard"}).decode()
TRIGGER = orjson.dumps({"type": "cron", "expression": "0 0 * * * ?", "timezone": "UTC"}).decode()
#: status, reason, weight
OUTCOMES = [("SUCCEEDED", None, 850), ("FAILED", "error", 50), ("SKIPPED", "overlap", 30),
            ("SKIPPED", "misfire", 20), ("CANCELED", "automation_disabled", 20), ("DEAD", "compensation_failed", 10),
            ("UNKNOWN", "lease_expired", 10), ("PENDING", None, 10)]


def with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["search_path"] = schema
    return urlunsplit(parts._replace(query=urlencode(query)))


def automation_rows(count: int, owners: int, now: datetime) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    specs, states = [], []
    for i in range(count):
        automation_id = f"a{i:07d}-{uuid.uuid4().hex[:8]}"
        labels = orjson.dumps({"team": f"team{i % 20}", "env": "prod" if i % 3 else "dev"}).decode()
        specs.append((automation_id, f"owner{i % owners}", f"nightly report {i}" if i % 10 == 0 else f"job {i}",
                      labels, None, TRIGGER, "simple.op", ACTION, "{}", True, now, now))
        states.append((automation_id, i % 64, i % 7 != 0, "ACTIVE", now + timedelta(minutes=i % 60), 1))
    return specs, states


def run_rows(start: int, stop: int, automation_ids: list[str], owners: int, now: datetime,
             rng: random.Random) -> list[tuple[Any, ...]]:
    statuses, weights = [(s, r) for s, r, _ in OUTCOMES], [w for *_, w in OUTCOMES]
    rows = []
    for i in range(start, stop):
        age = rng.uniform(0, 86_400) if rng.random() < 0.1 else rng.uniform(0, 30 * 86_400)
        created = now - timedelta(seconds=age)
        status, reason = rng.choices(statuses, weights)[0]
        if status == "PENDING":
            created = now - timedelta(seconds=rng.uniform(0, 600))
        scheduled = created - timedelta(seconds=rng.expovariate(1 / 0.2))
        started = None if status in ("SKIPPED", "CANCELED", "PENDING") else created + timedelta(
            seconds=rng.expovariate(1 / 0.05))
        finished = None if status == "PENDING" else (started or created) + timedelta(seconds=0.1)
        automation = automation_ids[i % len(automation_ids)]
        rows.append((f"r{i:08d}-{uuid.uuid4().hex[:8]}", automation, f"schedule:{i}", scheduled, "schedule", status,
                     reason, 0 if started is None else 1, "simple.op", ACTION, "{}",
                     f"owner{(i % len(automation_ids)) % owners}", "{}", created, finished or created, started,
                     finished))
    return rows


async def load(url: str, automations: int, runs: int, owners: int) -> list[str]:
    connection = await asyncpg.connect(url)
    try:
        now = datetime.now(UTC)
        specs, states = automation_rows(automations, owners, now)
        async with connection.transaction():
            await connection.copy_records_to_table("automation_specs", records=specs, columns=SPEC_COLUMNS)
            await connection.copy_records_to_table("automation_state", records=states, columns=STATE_COLUMNS)
        ids = [s[0] for s in specs]
        rng = random.Random(13)
        batch = 100_000
        for start in range(0, runs, batch):
            rows = run_rows(start, min(runs, start + batch), ids, owners, now, rng)
            await connection.copy_records_to_table("runs", records=rows, columns=RUN_COLUMNS)
            print(f"  loaded {min(runs, start + batch):>9,} runs", flush=True)
        letters = [(uuid.uuid4().hex, "run", None, "compensation_failed", "{}") for _ in range(200)]
        await connection.copy_records_to_table("dead_letters", records=letters,
                                               columns=("id", "source", "ref_id", "reason", "payload"))
        await connection.execute("ANALYZE automation_specs, automation_state, runs, dead_letters")
        return ids
    finally:
        await connection.close()


async def time_calls(name: str, calls: int, call: Callable[[int], Awaitable[httpx.Response]]) -> dict[str, Any]:
    took = []
    status = 0
    for i in range(calls):
        started = time.perf_counter()
        answer = await call(i)
        took.append((time.perf_counter() - started) * 1000)
        status = answer.status_code
        if status >= 400:
            raise SystemExit(f"{name}: {status} {answer.text[:300]}")
    took.sort()
    p95 = took[min(len(took) - 1, round(0.95 * len(took)) - 1)]
    return {"route": name, "p50": statistics.median(took), "p95": p95, "max": took[-1], "status": status}


async def bench(url: str, args: argparse.Namespace) -> None:
    store = open_store(url)
    await store.start()
    try:
        print(f"loading {args.automations:,} automations and {args.runs:,} runs (COPY)…", flush=True)
        started = time.perf_counter()
        ids = await load(url, args.automations, args.runs, args.owners)
        print(f"  loaded in {time.perf_counter() - started:.0f} s", flush=True)
        engine = Engine(Settings(database_url=url, instance="bench", auth=False), store=store, bus=MemoryBus())
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(engine.control)),
                                     base_url="http://bench") as http:
            await engine.control.stats.beat()
            results = await routes(http, engine, ids, args)
        print_table(results, args, await counts(url))
    finally:
        await store.stop()


async def routes(http: httpx.AsyncClient, engine: Engine, ids: list[str],
                 args: argparse.Namespace) -> list[dict[str, Any]]:
    n = args.calls
    first = (await http.get("/v1/runs?owner_id=*&limit=100")).json()["next"]
    unknown = [r["id"] for r in (await http.get(f"/v1/runs?owner_id=*&status=UNKNOWN&limit={n}")).json()["items"]]
    dead = [r["id"] for r in (await http.get(f"/v1/runs?owner_id=*&status=DEAD&limit={n}")).json()["items"]]
    pending = [r["id"] for r in (await http.get(f"/v1/runs?owner_id=*&status=PENDING&limit={n}")).json()["items"]]
    for automation_id in ids[:n]:  # a history to read: one edit each
        await http.post(f"/v1/automations/{automation_id}/disable")
    table: list[tuple[str, Callable[[int], Awaitable[httpx.Response]]]] = [
        ("GET /v1/stats?window=15m", lambda i: http.get("/v1/stats?window=15m")),
        ("GET /v1/stats?window=1h", lambda i: http.get("/v1/stats?window=1h")),
        ("GET /v1/stats?window=15m&attention=24h", lambda i: http.get("/v1/stats?window=15m&attention=24h")),
        ("GET /v1/stats?window=24h", lambda i: http.get("/v1/stats?window=24h")),
        ("GET /v1/system", lambda i: http.get("/v1/system")),
        ("GET /v1/runs?owner_id=* (newest 100)", lambda i: http.get("/v1/runs?owner_id=*&limit=100")),
        ("GET /v1/runs?owner_id=*&before=<cursor>",
         lambda i: http.get(f"/v1/runs?owner_id=*&limit=100&before={first}")),
        ("GET /v1/runs?owner_id=o&status=FAILED,DEAD",
         lambda i: http.get(f"/v1/runs?owner_id=owner{i % args.owners}&status=FAILED,DEAD&limit=50")),
        ("GET /v1/runs?owner_id=*&status=UNKNOWN&created_after=-1d",
         lambda i: http.get("/v1/runs", params={"owner_id": "*", "status": "UNKNOWN", "limit": "100",
                                                "created_after": (datetime.now(UTC) - timedelta(days=1)).isoformat()})),
        ("GET /v1/runs?automation_id=…&origin=schedule",
         lambda i: http.get(f"/v1/runs?owner_id=*&automation_id={ids[i]}&origin=schedule&limit=50")),
        ("GET /v1/automations?owner_id=o&q=nightly&label.team=…",
         lambda i: http.get(f"/v1/automations?owner_id=owner{i % args.owners}&q=nightly&label.team=team{i % 20}")),
        ("GET /v1/automations?owner_id=o&enabled=false", lambda i: http.get(
            f"/v1/automations?owner_id=owner{i % args.owners}&enabled=false&action_type=simple.op")),
        ("GET /v1/automations/{id}/history", lambda i: http.get(f"/v1/automations/{ids[i]}/history")),
        ("GET /v1/dead-letters", lambda i: http.get("/v1/dead-letters?limit=100")),
        ("POST /v1/automations/bulk (dry run, filter)", lambda i: http.post("/v1/automations/bulk", json={
            "op": "disable", "dry_run": True, "filter": {"q": "nightly", "labels": {"team": f"team{i % 20}"},
                                                          "owner_id": f"owner{i % args.owners}"}})),
        ("POST /v1/runs/bulk-cancel (dry run, filter)", lambda i: http.post("/v1/runs/bulk-cancel", json={
            "dry_run": True, "filter": {"owner_id": f"owner{i % args.owners}"}})),
        ("POST /v1/runs/{id}/resolve", lambda i: http.post(f"/v1/runs/{unknown[i]}/resolve",
                                                           json={"outcome": "happened", "note": "bench"})),
        ("POST /v1/runs/{id}/retry", lambda i: http.post(f"/v1/runs/{dead[i]}/retry")),
        ("POST /v1/runs/{id}/cancel", lambda i: http.post(f"/v1/runs/{pending[i]}/cancel")),
    ]
    results = []
    for name, call in table:
        if ("resolve" in name and len(unknown) < n) or ("retry" in name and len(dead) < n) or (
                "cancel" in name and "bulk" not in name and len(pending) < n):
            continue
        results.append(await time_calls(name, n, call))
    return results


async def counts(url: str) -> dict[str, int]:
    connection = await asyncpg.connect(url)
    try:
        return {table: int(await connection.fetchval(f"SELECT count(*) FROM {table}"))  # fixed table names
                for table in ("automation_specs", "runs", "automation_history", "dead_letters")}
    finally:
        await connection.close()


def print_table(results: list[dict[str, Any]], args: argparse.Namespace, rows: dict[str, int]) -> None:
    print()
    print("rows: " + ", ".join(f"{name} {n:,}" for name, n in rows.items()) + f"; owners {args.owners}")
    print(f"{'route':<58} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for r in results:
        flag = "" if r["p95"] <= 200 else "  > 200 ms"
        print(f"{r['route']:<58} {r['p50']:8.1f} {r['p95']:8.1f} {r['max']:8.1f}{flag}")
    print(f"({args.calls} calls each, in-process ASGI, PostgreSQL on {urlsplit(DATABASE_URL).hostname})")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--automations", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--owners", type=int, default=100)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--keep", action="store_true", help="keep the schema")
    args = parser.parse_args()
    configure_logging("WARNING")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    schema = f"bench_dashboard_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(DATABASE_URL)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        await bench(with_schema(DATABASE_URL, schema), args)
    finally:
        if not args.keep:
            await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
