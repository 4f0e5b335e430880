"""Benchmark: a ticker over a large PostgreSQL — time until ready and memory held.

Loads ``--automations`` (default 1,000,000) enabled automations into a fresh
schema with COPY, ``--due`` (default 100,000) of them due within the ticker's
one-hour horizon and the rest later. Half have a Quartz cron trigger, half a
DAILY repeat, each consistent with its ``next_run_at``. Then it starts an engine
with only the ``ticker`` role on the in-process bus and measures:

- ``ready_s``: from ``engine.start()`` until every actor is ready (the ticker has
  loaded its horizon into the wheel);
- ``wheel``: timers in the wheel (must equal ``--due``);
- ``rss_mb``: the process's resident memory once ready, and the growth over the
  RSS measured just before the start.

Baseline in the same process: raw asyncpg reading the same due rows
(``baseline_fetch_s``), so ``ready_s`` can be quoted as a ratio.
Targets (issue 4): ready in ≤ 10 s and RSS ≤ 300 MB for 1M automations / 100k due.

``--create-rate``: instead, the create rate with 100 and with 20,000 automations stored
(``--stored``): an engine with the ``planner`` and ``cdc`` roles creates ``--creates`` event
automations one by one through the service and counts until the planner's event index holds them
all (each create's ``automation.created`` relayed and applied). Issue 10 item 6: the index used to
be rebuilt from every stored automation on each change (≈ 65/s at 1,500 stored, 37/s at 3,000);
the ratio of the two rates should stay near 1.

    .venv/bin/python bench/scale.py [--automations N] [--due N] [--json]
    .venv/bin/python bench/scale.py --create-rate [--stored 100,20000] [--creates N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import orjson

from actwheel.clock import SystemClock
from actwheel.engine import Engine
from actwheel.logs import configure_logging
from actwheel.service import Caller
from actwheel.settings import Settings
from actwheel.storage import open_store

DATABASE_URL = os.environ.get("ACTWHEEL_BENCH_DATABASE_URL",
                              "postgresql://actwheel:actwheel@127.0.0.1:54329/actwheel")
# `automations` is a view over automation_specs + automation_state (migration 0003): COPY into it
# runs its INSTEAD OF trigger once per row; the two tables are loaded directly instead.
SPEC_COLUMNS = ("id", "owner_id", "name", "labels", "trigger", "action_type", "action_config", "policy", "durable",
                "created_at", "updated_at")
STATE_COLUMNS = ("automation_id", "partition", "enabled", "status", "next_run_at", "version")
ACTION = orjson.dumps({"op": "log", "message": "scale"}).decode()


def with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["search_path"] = schema
    return urlunsplit(parts._replace(query=urlencode(query)))


def engine_settings(url: str, folder: str, roles: tuple[str, ...]) -> Settings:
    """The bench engine's settings: the bootstrap admin's key goes into ``folder`` (a temporary one),
    not into the working directory (on PostgreSQL, :meth:`Settings.admin_key_path` falls back to it)."""
    return Settings(database_url=url, broker_url="memory://", instance="scale", roles=roles,
                    admin_key_file=str(Path(folder) / "actwheel-admin.key"))


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def rows(i: int, now: datetime, due: bool, rng: random.Random) -> tuple[tuple[object, ...], tuple[object, ...]]:
    ahead = rng.uniform(1, 3500) if due else rng.uniform(7200, 86_000)
    at = (now + timedelta(seconds=ahead)).replace(microsecond=0)
    if i % 2:
        trigger = {"type": "cron", "expression": f"{at.second} {at.minute} {at.hour} * * ?", "timezone": "UTC"}
    else:
        trigger = {"type": "repeat", "repeat": "DAILY", "execute_time": at.strftime("%H:%M:%S"), "timezone": "UTC"}
    automation_id = uuid.uuid4().hex
    return ((automation_id, "bench", f"a{i}", "{}", orjson.dumps(trigger).decode(), "simple.op", ACTION, "{}", True,
             now, now),
            (automation_id, i % 64, True, "ACTIVE", at, 1))


async def load(url: str, count: int, due: int) -> None:
    connection = await asyncpg.connect(url)
    try:
        now = datetime.now(UTC)
        rng = random.Random(2024)
        batch = 50_000
        for start in range(0, count, batch):
            specs, states = zip(*(rows(i, now, i < due, rng) for i in range(start, min(count, start + batch))),
                                strict=True)
            async with connection.transaction():
                await connection.copy_records_to_table("automation_specs", records=specs, columns=SPEC_COLUMNS)
                await connection.copy_records_to_table("automation_state", records=states, columns=STATE_COLUMNS)
        # ANALYZE of the view only warns: the planner's statistics are the tables'.
        await connection.execute("ANALYZE automation_specs, automation_state")
    finally:
        await connection.close()


async def baseline_fetch(url: str) -> float:
    connection = await asyncpg.connect(url)
    try:
        started = time.perf_counter()
        rows = await connection.fetch(
            "SELECT * FROM automations WHERE enabled AND status = 'ACTIVE' AND next_run_at < now() + interval '1 hour'")
        elapsed = time.perf_counter() - started
        assert rows
        return elapsed
    finally:
        await connection.close()


async def measure(count: int, due: int) -> dict[str, object]:
    schema = f"scale_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(DATABASE_URL)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    url = with_schema(DATABASE_URL, schema)
    try:
        store = open_store(url)
        await store.start()  # migrations
        await store.stop()
        started = time.perf_counter()
        await load(url, count, due)
        load_s = time.perf_counter() - started
        baseline_s = await baseline_fetch(url)
        with tempfile.TemporaryDirectory(prefix="actwheel-scale-") as folder:
            engine = Engine(engine_settings(url, folder, ("ticker",)), clock=SystemClock())
            before = rss_mb()
            started = time.perf_counter()
            await engine.start()
            ready_s = time.perf_counter() - started
            after = rss_mb()
            wheel = engine.actors["ticker"].wheel_size  # type: ignore[attr-defined]
            await engine.stop()
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()
    return {"automations": count, "due_within_horizon": due, "load_s": round(load_s, 1),
            "baseline_fetch_s": round(baseline_s, 2), "ready_s": round(ready_s, 2),
            "ready_vs_baseline": round(ready_s / baseline_s, 1), "wheel": wheel,
            "rss_mb": round(after, 1), "rss_growth_mb": round(after - before, 1),
            "targets": {"ready_s": {"target": 10.0, "met": ready_s <= 10.0},
                        "rss_mb": {"target": 300.0, "met": after <= 300.0}}}


async def create_rate(stored: int, creates: int) -> float:
    """Creates per second with ``stored`` automations already there, until the planner indexed them all."""
    schema = f"scale_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(DATABASE_URL)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    url = with_schema(DATABASE_URL, schema)
    try:
        store = open_store(url)
        await store.start()  # migrations
        await store.stop()
        await load(url, stored, stored // 10)
        with tempfile.TemporaryDirectory(prefix="actwheel-scale-") as folder:
            engine = Engine(engine_settings(url, folder, ("planner", "cdc")), clock=SystemClock())
            await engine.start()
            try:
                return await _timed_creates(engine, creates)
            finally:
                await engine.stop()
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


async def _timed_creates(engine: Engine, creates: int) -> float:
    caller, index = Caller("bench"), engine.actors["planner"]._event_index  # type: ignore[attr-defined]
    started = time.perf_counter()
    for i in range(creates):
        await engine.service.create(caller, {"name": f"c{i}", "trigger": {"type": "event",
                                                                          "routing_key": f"bench.k{i}.created"},
                                             "action": {"type": "simple.op", "config": {"op": "log", "message": "m"}}})
    while len(index.patterns) < creates:  # noqa: ASYNC110 - polling the planner's state is the measurement
        await asyncio.sleep(0.005)
    return creates / (time.perf_counter() - started)


async def measure_create_rate(stored: list[int], creates: int) -> dict[str, object]:
    rates = {n: await create_rate(n, creates) for n in stored}
    low, high = min(stored), max(stored)
    return {"creates": creates, **{f"create_per_s_{n}_stored": round(r, 1) for n, r in rates.items()},
            f"ratio_{low}_vs_{high}": round(rates[low] / rates[high], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--automations", type=int, default=1_000_000)
    parser.add_argument("--due", type=int, default=100_000)
    parser.add_argument("--create-rate", action="store_true")
    parser.add_argument("--stored", default="100,20000")
    parser.add_argument("--creates", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configure_logging("WARNING")
    if args.create_rate:
        result = asyncio.run(measure_create_rate([int(n) for n in args.stored.split(",")], args.creates))
    else:
        result = asyncio.run(measure(args.automations, args.due))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>20}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
