"""The ops dashboard at scale (issue 13): p50/p95 of every API call and every /ui/ page over a loaded
PostgreSQL.

    .venv/bin/python bench/dashboard.py [--automations 100000] [--runs 1000000] [--owners 100] [--calls 30]
                                        [--order creation|random] [--keep] [--json]

A fresh schema is loaded with COPY (automations straight into automation_specs + automation_state, as
bench/scale.py does; runs into runs): ``--owners`` owners, runs spread over the last 30 days (newest
densest: a tenth of them in the last day), 85 % SUCCEEDED and the rest FAILED, SKIPPED (overlap,
misfire), CANCELED, DEAD, UNKNOWN and a few PENDING. ``--order creation`` (default) COPYs the runs
oldest first, as a live table receives them (its heap in creation order); ``--order random`` in the
order they are drawn (the heap uncorrelated with created_at: a time range reads ~5× the pages — the
worst case, and what this bench did before). Authentication is on, as in production: the bootstrap
admin's key for the API (cluster-wide stats and listings, the heavier ones), and two dashboard
sessions signed in through /ui/login with a cookie, as a browser would: the admin's (cluster-wide
pages) and owner0's (a user with run:write: its own runs, and the runs bulk cancel, which acts on the
caller's own runs only). Each route is called ``--calls`` times through the real Starlette app in
process (httpx ASGI transport); the tables list p50 / p95 / max in ms and the row counts (``--json``:
the same as one JSON object on the last line). The schema is dropped afterwards (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import re
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import httpx
import orjson

from actwheel.api.app import create_app
from actwheel.auth.bootstrap import ensure_admin
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


@dataclass(frozen=True, slots=True)
class DrawnRun:
    """One run of the data set, drawn before it is ordered: its number, age and outcome."""

    i: int
    age_s: float
    status: str
    reason: str | None
    fire_delay_s: float
    start_delay_s: float


def draw_runs(count: int, rng: random.Random) -> list[DrawnRun]:
    """``count`` runs' ages and outcomes, in drawing order (the same for either ``--order``)."""
    statuses, weights = [(s, r) for s, r, _ in OUTCOMES], [w for *_, w in OUTCOMES]
    drawn = []
    for i in range(count):
        age = rng.uniform(0, 86_400) if rng.random() < 0.1 else rng.uniform(0, 30 * 86_400)
        status, reason = rng.choices(statuses, weights)[0]
        if status == "PENDING":
            age = rng.uniform(0, 600)
        drawn.append(DrawnRun(i, age, status, reason, rng.expovariate(1 / 0.2), rng.expovariate(1 / 0.05)))
    return drawn


def run_row(run: DrawnRun, automation_ids: list[str], owners: int, now: datetime) -> tuple[Any, ...]:
    created = now - timedelta(seconds=run.age_s)
    scheduled = created - timedelta(seconds=run.fire_delay_s)
    started = None if run.status in ("SKIPPED", "CANCELED", "PENDING") else created + timedelta(
        seconds=run.start_delay_s)
    finished = None if run.status == "PENDING" else (started or created) + timedelta(seconds=0.1)
    automation = automation_ids[run.i % len(automation_ids)]
    return (f"r{run.i:08d}-{uuid.uuid4().hex[:8]}", automation, f"schedule:{run.i}", scheduled, "schedule",
            run.status, run.reason, 0 if started is None else 1, "simple.op", ACTION, "{}",
            f"owner{(run.i % len(automation_ids)) % owners}", "{}", created, finished or created, started, finished)


async def load(url: str, args: argparse.Namespace) -> list[str]:
    """COPY the data set into the schema of ``url``; the automations' ids."""
    connection = await asyncpg.connect(url)
    try:
        now = datetime.now(UTC)
        specs, states = automation_rows(args.automations, args.owners, now)
        async with connection.transaction():
            await connection.copy_records_to_table("automation_specs", records=specs, columns=SPEC_COLUMNS)
            await connection.copy_records_to_table("automation_state", records=states, columns=STATE_COLUMNS)
        ids = [s[0] for s in specs]
        drawn = draw_runs(args.runs, random.Random(13))
        if args.order == "creation":
            drawn.sort(key=lambda r: -r.age_s)
        batch = 100_000
        for start in range(0, args.runs, batch):
            rows = [run_row(r, ids, args.owners, now) for r in drawn[start:start + batch]]
            await connection.copy_records_to_table("runs", records=rows, columns=RUN_COLUMNS)
            print(f"  loaded {min(args.runs, start + batch):>9,} runs", flush=True)
        letters = [(uuid.uuid4().hex, "run", None, "compensation_failed", "{}") for _ in range(200)]
        await connection.copy_records_to_table("dead_letters", records=letters,
                                               columns=("id", "source", "ref_id", "reason", "payload"))
        await vacuum(connection)
        return ids
    finally:
        await connection.close()


async def vacuum(connection: asyncpg.Connection) -> None:
    """What autovacuum does to a live table soon after (0011: at 1 % of inserted rows): statistics, the
    visibility map (index-only scans) and hint bits, for every table the load wrote."""
    for table in ("automation_specs", "automation_state", "runs", "runs_attention", "dead_letters"):
        if await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", table):  # runs_attention: 0012
            await connection.execute(f"VACUUM ANALYZE {table}")  # fixed table names


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


@dataclass(frozen=True, slots=True)
class Clients:
    """The API client (the admin's key) and two signed-in dashboard sessions, with their CSRF tokens."""

    api: httpx.AsyncClient
    admin_ui: httpx.AsyncClient
    admin_csrf: str
    owner_ui: httpx.AsyncClient
    owner_csrf: str


OWNER_SCOPES = ["action:request", "automation:*", "run:read", "run:write"]


def csrf_in(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    if found is None:
        raise SystemExit("no CSRF field on the page")
    return found.group(1)


async def signed_in(app: Any, token: str) -> tuple[httpx.AsyncClient, str]:
    """A client with a dashboard session cookie for ``token`` (the login form, as a browser), and its CSRF."""
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench")
    form = await http.get("/ui/login")
    answer = await http.post("/ui/login", data={"csrf": csrf_in(form.text), "api_key": token})
    if (answer.status_code, answer.headers.get("location")) != (303, "/ui/"):
        raise SystemExit(f"sign-in refused: {answer.status_code} {answer.text[:300]}")
    page = await http.get("/ui/")
    return http, csrf_in(page.text)


async def clients(engine: Engine, settings: Settings) -> Clients:
    """The bootstrap admin (its key file), owner0 as a user with its own key, and their sessions."""
    await ensure_admin(engine.store, settings)
    admin_token = settings.admin_key_path().read_text().strip()
    admin = await engine.control.authenticator.authenticate(admin_token)
    await engine.control.principals.create(admin, {"id": "owner0", "kind": "user", "scopes": OWNER_SCOPES})
    owner_token = (await engine.control.keys.create(
        admin, {"name": "bench", "principal_id": "owner0", "scopes": OWNER_SCOPES})).token
    app = create_app(engine.control)
    api = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench",
                            headers={"Authorization": f"Bearer {admin_token}"})
    admin_ui, admin_csrf = await signed_in(app, admin_token)
    owner_ui, owner_csrf = await signed_in(app, owner_token)
    return Clients(api, admin_ui, admin_csrf, owner_ui, owner_csrf)


async def bench(url: str, args: argparse.Namespace) -> dict[str, Any]:
    store = open_store(url)
    await store.start()
    try:
        print(f"loading {args.automations:,} automations and {args.runs:,} runs (COPY, {args.order} order)…",
              flush=True)
        started = time.perf_counter()
        ids = await load(url, args)
        print(f"  loaded in {time.perf_counter() - started:.0f} s", flush=True)
        with tempfile.TemporaryDirectory() as folder:
            settings = Settings(database_url=url, instance="bench", admin_key_file=str(Path(folder) / "admin.key"))
            engine = Engine(settings, store=store, bus=MemoryBus())
            c = await clients(engine, settings)
            try:
                await engine.control.stats.beat()
                api = await routes(c.api, ids, args)
                ui = await pages(c, ids, args)
            finally:
                for http in (c.api, c.admin_ui, c.owner_ui):
                    await http.aclose()
        rows = await counts(url)
        print_table("API", api, args, rows)
        print_table("/ui/ pages (signed-in sessions)", ui, args, rows)
        return {"rows": rows, "owners": args.owners, "order": args.order, "calls": args.calls, "api": api, "ui": ui}
    finally:
        await store.stop()


async def routes(http: httpx.AsyncClient, ids: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
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


async def pages(c: Clients, ids: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every /ui/ page a GET shows (and the dry runs of the two bulk forms), as a signed-in browser."""
    a, o = c.admin_ui, c.owner_ui
    listing = (await a.get("/ui/runs?owner=*")).text
    older = re.search(r'before=([^"&]+)" rel="next"', listing)
    run_ids = re.findall(r'href="/ui/runs/([^"?]+)"><code>', listing)
    if older is None or not run_ids:
        raise SystemExit("the runs page shows no run (or no 'older' link): nothing to time")
    owned = [i for n, i in enumerate(ids) if n % args.owners == 0]  # owner0's automations
    table: list[tuple[str, Callable[[int], Awaitable[httpx.Response]]]] = [
        ("GET /ui/ (overview, admin: cluster)", lambda i: a.get("/ui/")),
        ("GET /ui/ (overview, owner0)", lambda i: o.get("/ui/")),
        ("GET /ui/automations", lambda i: a.get("/ui/automations")),
        ("GET /ui/automations?label=team=…&name=nightly",
         lambda i: o.get(f"/ui/automations?label=team%3Dteam{i % 20}&name=nightly")),
        ("GET /ui/automations?enabled=no", lambda i: o.get("/ui/automations?enabled=no")),
        ("GET /ui/automations/{id}", lambda i: o.get(f"/ui/automations/{owned[i % len(owned)]}")),
        ("GET /ui/automations/{id}/run (confirm)", lambda i: o.get(f"/ui/automations/{owned[i % len(owned)]}/run")),
        ("GET /ui/automations/{id}/delete (confirm)",
         lambda i: o.get(f"/ui/automations/{owned[i % len(owned)]}/delete")),
        ("GET /ui/runs?owner=*", lambda i: a.get("/ui/runs?owner=*")),
        ("GET /ui/runs (owner0)", lambda i: o.get("/ui/runs")),
        ("GET /ui/runs?owner=*&before=<cursor>", lambda i: a.get(f"/ui/runs?owner=*&before={older.group(1)}")),
        ("GET /ui/runs?owner=*&status=FAILED&status=DEAD",
         lambda i: a.get("/ui/runs?owner=*&status=FAILED&status=DEAD")),
        ("GET /ui/runs/rows?owner=* (live rows)", lambda i: a.get("/ui/runs/rows?owner=*")),
        ("GET /ui/runs/{id}", lambda i: a.get(f"/ui/runs/{run_ids[i % len(run_ids)]}")),
        ("GET /ui/attention (admin)", lambda i: a.get("/ui/attention")),
        ("GET /ui/attention (owner0)", lambda i: o.get("/ui/attention")),
        ("GET /ui/system", lambda i: a.get("/ui/system")),
        ("POST /ui/automations/bulk (dry run, filter)", lambda i: o.post("/ui/automations/bulk", data={
            "csrf": c.owner_csrf, "op": "disable", "scope": "filter", "label": f"team=team{i % 20}",
            "name": "nightly"})),
        ("POST /ui/runs/cancel (dry run, owner0's waiting runs)", lambda i: o.post("/ui/runs/cancel", data={
            "csrf": c.owner_csrf})),
    ]
    return [await time_calls(name, args.calls, call) for name, call in table]


async def counts(url: str) -> dict[str, int]:
    connection = await asyncpg.connect(url)
    try:
        return {table: int(await connection.fetchval(f"SELECT count(*) FROM {table}"))  # fixed table names
                for table in ("automation_specs", "runs", "runs_attention", "automation_history", "dead_letters")
                if await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", table)}
    finally:
        await connection.close()


def print_table(title: str, results: list[dict[str, Any]], args: argparse.Namespace, rows: dict[str, int]) -> None:
    print()
    print(f"{title} — rows: " + ", ".join(f"{name} {n:,}" for name, n in rows.items())
          + f"; owners {args.owners}; runs COPYed in {args.order} order")
    print(f"{'route':<62} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for r in results:
        flag = "" if r["p95"] <= 200 else "  > 200 ms"
        print(f"{r['route']:<62} {r['p50']:8.1f} {r['p95']:8.1f} {r['max']:8.1f}{flag}")
    print(f"({args.calls} calls each, in-process ASGI, PostgreSQL on {urlsplit(DATABASE_URL).hostname})")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--automations", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--owners", type=int, default=100)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--order", choices=("creation", "random"), default="creation",
                        help="the order the runs are COPYed in (creation: as a live table receives them)")
    parser.add_argument("--keep", action="store_true", help="keep the schema")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON object")
    args = parser.parse_args()
    configure_logging("WARNING")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    schema = f"bench_dashboard_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(DATABASE_URL)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        result = await bench(with_schema(DATABASE_URL, schema), args)
        if args.json:
            print(orjson.dumps({"schema": schema, **result}).decode())
    finally:
        if args.keep:
            print(f"kept schema {schema}")
        else:
            await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
