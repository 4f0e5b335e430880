"""Benchmark: runs created → claimed → finished per second, on SQLite and PostgreSQL.

For each backend, side by side and in the same process:

- ``raw single``        the raw driver: one single-row INSERT transaction after another (tx/s)
- ``raw batched``       the raw driver: one multi-row INSERT (UNNEST / executemany) per batch (rows/s)
- ``create single``     one transaction per run: cursor CAS + run insert + outbox message (runs/s)
- ``create batched``    one transaction per --batch runs: advance_cursors + insert_many + append_many of
                        the ``run.ready`` messages the planner writes (the engine's EventFactory:
                        up to 500 run ids per message)
- ``create batched, message per run``   the same with one outbox message per run (a worst case:
                        no caller of the engine's writes one per run)
- ``claim+finish single``   claim in one transaction, finish in another, per run
- ``claim+finish batched``  claim_many then finish_many, --batch runs per transaction

With ``--concurrency N`` (N > 1) the batched scenarios also run as N concurrent workers, each
on its own automations and its own transactions (``… xN`` rows): what several planner or
router deliveries in flight get out of the store (one writer at a time on SQLite).

The ``ontology`` section (``--section ontology``): objects created per second through
``tx.ontology``:

- ``raw objects batched``   the raw driver: one multi-row INSERT per batch into a table shaped like
                            ``objects`` (UNNEST on PostgreSQL, executemany on SQLite; rows/s)
- ``objects single``        one transaction per ``create_object``
- ``objects batched``       one transaction per --batch objects: ``create_objects``

The ``sweeps`` section (``--section sweeps``): what the recovery actor's queries cost (sweeps/s:
one query each, 500 rows at most) with --open runs in flight (PENDING) and as many finished:
``expired_leases``, ``stale_pending``, ``promote_due_retries`` and the planner's overlap check
``active_automation_ids`` over the --batch automations. The sweeps find nothing to do here (the
usual case, and the one that reads the most: every open run); each figure is the best of 5.

Targets: create batched ≥ 30k runs/s on PostgreSQL and ≥ 20k/s on SQLite; claim+finish
batched ≥ 20k runs/s on PostgreSQL; objects batched ≥ 20k/s on PostgreSQL. Each figure is
the best of --repeat rounds.

    python bench/storage.py [--backend sqlite|postgres|both] [--section runs|ontology|sweeps|all]
                            [--open 60000] [--runs 20000] [--batch 1000] [--singles 500] [--repeat 2]
                            [--concurrency 1] [--postgres URL] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiosqlite
import asyncpg
import orjson

from actwheel.bus.topology import Topology
from actwheel.clock import SystemClock
from actwheel.events import EventFactory
from actwheel.storage import Store, Transaction, open_store
from actwheel.storage.records import (
    Automation,
    CursorAdvance,
    NewAutomation,
    NewOntologyObject,
    NewOutboxMessage,
    NewRun,
    Run,
    RunOutcome,
    RunStatus,
)

DEFAULT_POSTGRES = "postgresql://actwheel:actwheel@127.0.0.1:54329/actwheel"
T0 = datetime(2030, 1, 1, tzinfo=UTC)
STEP = timedelta(minutes=1)
LEASE_S = 60.0


@dataclass(frozen=True)
class Figure:
    backend: str
    scenario: str
    per_second: float
    unit: str
    count: int


# --- timing ---------------------------------------------------------------------------


async def best_rate(rounds: int, count: int, work: Callable[[], Awaitable[None]]) -> float:
    """``count`` items per the fastest of ``rounds`` runs of ``work``."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        await work()
        best = min(best, time.perf_counter() - start)
    return count / best


# --- fixtures -------------------------------------------------------------------------


def new_automation(i: int) -> NewAutomation:
    return NewAutomation(
        owner_id="bench",
        name=f"bench-{i}",
        trigger={"type": "cron", "expression": "0 * * ? * *", "timezone": "UTC"},
        action_type="webhook",
        action_config={"url": "https://example.test/hook", "method": "POST"},
        policy={"retry": {"max_attempts": 3}},
        labels={"session_id": f"s{i % 10}"},
        next_run_at=T0,
    )


def new_run(a: Automation, at: datetime) -> NewRun:
    key = f"schedule:{at.isoformat()}"
    return NewRun(
        automation_id=a.id, dedupe_key=key, owner_id=a.owner_id, action_type=a.action_type,
        action_config=a.action_config, policy=a.policy, context={"scheduled_for": key}, scheduled_for=at,
    )


_message_ids = itertools.count()
_EVENTS = EventFactory(topology=Topology(), clock=SystemClock(), source="bench")
Messages = Callable[[list[str]], list[NewOutboxMessage]]


def ready_messages(run_ids: list[str]) -> list[NewOutboxMessage]:
    """What the planner appends for its committed runs: ``run.ready`` with up to 500 ids each."""
    return _EVENTS.runs_ready(run_ids)


def message_per_run(run_ids: list[str]) -> list[NewOutboxMessage]:
    return [ready_message(run_id) for run_id in run_ids]


def ready_message(run_id: str) -> NewOutboxMessage:
    # orjson, as the engine's codec: the fixture should not cost more than the storage it measures.
    body = orjson.dumps({"id": f"m-{next(_message_ids)}", "type": "run.ready", "data": {"run_id": run_id}})
    return NewOutboxMessage(exchange="actwheel.events", routing_key="run.ready", body=body)


async def create_automations(store: Store, count: int) -> list[Automation]:
    async with store.transaction() as tx:
        return [await tx.automations.create(new_automation(i)) for i in range(count)]


class Cursors:
    """Where each benchmark automation's cursor is, so every fire is a fresh CAS."""

    def __init__(self, automations: list[Automation]) -> None:
        self.automations = automations
        self.at = {a.id: a.next_run_at or T0 for a in automations}

    def advance(self, a: Automation) -> tuple[datetime, datetime]:
        old = self.at[a.id]
        self.at[a.id] = old + STEP
        return old, old + STEP


# --- scenarios ------------------------------------------------------------------------


async def create_single(store: Store, cursors: Cursors, count: int) -> list[str]:
    ids: list[str] = []
    for i in range(count):
        a = cursors.automations[i % len(cursors.automations)]
        old, new = cursors.advance(a)
        async with store.transaction() as tx:
            if await tx.automations.advance_cursor(a.id, a.version, old, new):
                run = (await tx.runs.insert(new_run(a, old))).run
                await tx.outbox.append(ready_message(run.id))
                ids.append(run.id)
    return ids


async def create_batched(store: Store, cursors: Cursors, count: int, batch: int,
                         messages: Messages = ready_messages) -> list[str]:
    ids: list[str] = []
    for start in range(0, count, batch):
        chunk = [cursors.automations[i % len(cursors.automations)] for i in range(start, min(count, start + batch))]
        moves = {a.id: cursors.advance(a) for a in chunk}
        async with store.transaction() as tx:
            won = await tx.automations.advance_cursors(
                [CursorAdvance(automation_id=a.id, version=a.version, expected_next_run_at=moves[a.id][0],
                               new_next_run_at=moves[a.id][1]) for a in chunk]
            )
            inserted = await tx.runs.insert_many([new_run(a, moves[a.id][0]) for a in chunk if a.id in won])
            await tx.outbox.append_many(messages([r.run.id for r in inserted]))
        ids.extend(r.run.id for r in inserted)
    return ids


async def claim_finish_single(store: Store, run_ids: list[str]) -> None:
    for run_id in run_ids:
        async with store.transaction() as tx:
            run = await tx.runs.claim(run_id, "bench-worker", LEASE_S)
        assert run is not None, "a freshly created run must be claimable"
        async with store.transaction() as tx:
            await tx.runs.finish(_succeeded(run))


async def claim_finish_batched(store: Store, run_ids: list[str], batch: int) -> None:
    for start in range(0, len(run_ids), batch):
        async with store.transaction() as tx:
            runs = await tx.runs.claim_many(run_ids[start : start + batch], "bench-worker", LEASE_S)
        async with store.transaction() as tx:
            await tx.runs.finish_many([_succeeded(r) for r in runs])


def _succeeded(run: Run) -> RunOutcome:
    return RunOutcome(run_id=run.id, owner=run.lease_owner or "", epoch=run.lease_epoch,
                      status=RunStatus.SUCCEEDED, result={"status_code": 200})


async def storage_figures(backend: str, store: Store, args: argparse.Namespace) -> list[Figure]:
    figures = []
    cursors = Cursors(await create_automations(store, args.batch))
    created: list[list[str]] = []

    async def make_single() -> None:
        created.append(await create_single(store, cursors, args.singles))

    async def make_batched() -> None:
        created.append(await create_batched(store, cursors, args.runs, args.batch))

    async def make_batched_per_run() -> None:
        created.append(await create_batched(store, cursors, args.runs, args.batch, message_per_run))

    rate = await best_rate(args.repeat, args.singles, make_single)
    figures.append(Figure(backend, "create single", rate, "runs/s", args.singles))
    singles = [run_id for ids in created for run_id in ids]
    created.clear()
    rate = await best_rate(args.repeat, args.runs, make_batched)
    figures.append(Figure(backend, "create batched", rate, "runs/s", args.runs))
    batched = iter(list(created))

    async def finish_single() -> None:
        await claim_finish_single(store, singles[: args.singles])
        del singles[: args.singles]

    async def finish_batched() -> None:
        await claim_finish_batched(store, next(batched), args.batch)

    figures.append(Figure(backend, "claim+finish single", await best_rate(args.repeat, args.singles, finish_single),
                          "runs/s", args.singles))
    figures.append(Figure(backend, "claim+finish batched", await best_rate(args.repeat, args.runs, finish_batched),
                          "runs/s", args.runs))
    if args.concurrency > 1:
        figures += await concurrent_figures(backend, store, args)
    # Last, so that every other figure meets the same history as before this scenario existed.
    rate = await best_rate(args.repeat, args.runs, make_batched_per_run)
    figures.append(Figure(backend, "create batched, message per run", rate, "runs/s", args.runs))
    return figures


async def concurrent_figures(backend: str, store: Store, args: argparse.Namespace) -> list[Figure]:
    """The batched scenarios as ``--concurrency`` workers at once, each on its own automations."""
    n = args.concurrency
    groups = [Cursors(await create_automations(store, args.batch)) for _ in range(n)]
    share = args.runs // n
    rounds: list[list[list[str]]] = []

    async def make() -> None:
        rounds.append(list(await asyncio.gather(*(create_batched(store, g, share, args.batch) for g in groups))))

    created = await best_rate(args.repeat, share * n, make)
    pending = iter(rounds)

    async def finish() -> None:
        await asyncio.gather(*(claim_finish_batched(store, ids, args.batch) for ids in next(pending)))

    finished = await best_rate(args.repeat, share * n, finish)
    return [Figure(backend, f"create batched x{n}", created, "runs/s", share * n),
            Figure(backend, f"claim+finish batched x{n}", finished, "runs/s", share * n)]


# --- sweeps ---------------------------------------------------------------------------


async def sweep_figures(backend: str, store: Store, args: argparse.Namespace) -> list[Figure]:
    """The recovery sweeps and the overlap check with ``--open`` runs in flight and as many finished."""
    cursors = Cursors(await create_automations(store, args.batch))
    await create_batched(store, cursors, args.open, args.batch)
    await claim_finish_batched(store, await create_batched(store, cursors, args.open, args.batch), args.batch)
    automation_ids = [a.id for a in cursors.automations]
    sweeps: dict[str, Callable[[Transaction], Awaitable[object]]] = {
        "sweep expired_leases": lambda tx: tx.runs.expired_leases(500),
        "sweep stale_pending": lambda tx: tx.runs.stale_pending(3600.0, 500),  # none that old: a full look
        "sweep promote_due_retries": lambda tx: tx.runs.promote_due_retries(500),
        "active_automation_ids": lambda tx: tx.runs.active_automation_ids(automation_ids),
    }
    figures = []
    for scenario, sweep in sweeps.items():
        async def once(sweep: Callable[[Transaction], Awaitable[object]] = sweep) -> None:
            async with store.transaction() as tx:
                await sweep(tx)
        figures.append(Figure(backend, scenario, await best_rate(5, 1, once), "sweeps/s", 1))
    return figures


# --- ontology -------------------------------------------------------------------------


def new_object(i: int) -> NewOntologyObject:
    return NewOntologyObject(object_type="Order", properties={"sku": f"SKU-{i}", "qty": i % 7, "note": "bench"})


async def ontology_figures(backend: str, store: Store, args: argparse.Namespace) -> list[Figure]:
    async with store.transaction() as tx:
        await tx.ontology.put_type("Order", {"sku": {"type": "string"}, "qty": {"type": "integer"}}, ["sku"])

    async def single() -> None:
        for i in range(args.singles):
            async with store.transaction() as tx:
                await tx.ontology.create_object("Order", new_object(i).properties)

    async def batched() -> None:
        for start in range(0, args.runs, args.batch):
            chunk = [new_object(i) for i in range(start, min(args.runs, start + args.batch))]
            async with store.transaction() as tx:
                await tx.ontology.create_objects(chunk)

    singles = await best_rate(args.repeat, args.singles, single)
    batches = await best_rate(args.repeat, args.runs, batched)
    return [Figure(backend, "objects single", singles, "objects/s", args.singles),
            Figure(backend, "objects batched", batches, "objects/s", args.runs)]


# --- raw-driver baselines -------------------------------------------------------------


async def raw_postgres(url: str, args: argparse.Namespace) -> list[Figure]:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TABLE raw_bench (id text PRIMARY KEY, payload jsonb NOT NULL)")
        payload = json.dumps({"url": "https://example.test/hook", "method": "POST"})

        async def single() -> None:
            for _ in range(args.singles):
                async with conn.transaction():
                    await conn.execute("INSERT INTO raw_bench VALUES ($1, $2::jsonb)", str(uuid.uuid4()), payload)

        async def batched() -> None:
            for _ in range(0, args.runs, args.batch):
                ids = [str(uuid.uuid4()) for _ in range(args.batch)]
                await conn.execute(
                    "INSERT INTO raw_bench SELECT i, p::jsonb FROM unnest($1::text[], $2::text[]) AS t(i, p)",
                    ids, [payload] * args.batch,
                )

        return [
            Figure("postgres", "raw single", await best_rate(args.repeat, args.singles, single), "tx/s", args.singles),
            Figure("postgres", "raw batched", await best_rate(args.repeat, args.runs, batched), "rows/s", args.runs),
        ]
    finally:
        await conn.close()


RAW_OBJECTS = """CREATE TABLE raw_objects (id text PRIMARY KEY, object_type text NOT NULL, properties {json} NOT NULL,
    version bigint NOT NULL DEFAULT 1, created_at {time} NOT NULL, updated_at {time} NOT NULL)"""


def raw_object_rows(start: int, count: int) -> list[tuple[str, str, str]]:
    return [(str(uuid.uuid4()), "Order", orjson.dumps(new_object(i).properties).decode())
            for i in range(start, start + count)]


async def raw_objects_postgres(url: str, args: argparse.Namespace) -> Figure:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(RAW_OBJECTS.format(json="jsonb", time="timestamptz"))

        async def batched() -> None:
            for start in range(0, args.runs, args.batch):
                ids, types, props = zip(*raw_object_rows(start, args.batch), strict=True)
                async with conn.transaction():
                    await conn.execute(
                        "INSERT INTO raw_objects (id, object_type, properties, created_at, updated_at) "
                        "SELECT i, t, p::jsonb, now(), now() "
                        "FROM unnest($1::text[], $2::text[], $3::text[]) AS r(i, t, p)",
                        list(ids), list(types), list(props))

        return Figure("postgres", "raw objects batched", await best_rate(args.repeat, args.runs, batched), "rows/s",
                      args.runs)
    finally:
        await conn.close()


async def raw_objects_sqlite(path: str, args: argparse.Namespace) -> Figure:
    conn = await aiosqlite.connect(path, isolation_level=None)
    try:
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute(RAW_OBJECTS.format(json="text", time="integer"))

        async def batched() -> None:
            for start in range(0, args.runs, args.batch):
                now = time.time_ns() // 1000
                await conn.execute("BEGIN IMMEDIATE")
                await conn.executemany("INSERT INTO raw_objects (id, object_type, properties, created_at, updated_at) "
                                       "VALUES (?, ?, ?, ?, ?)",
                                       [(*row, now, now) for row in raw_object_rows(start, args.batch)])
                await conn.execute("COMMIT")

        return Figure("sqlite", "raw objects batched", await best_rate(args.repeat, args.runs, batched), "rows/s",
                      args.runs)
    finally:
        await conn.close()


async def raw_sqlite(path: str, args: argparse.Namespace) -> list[Figure]:
    conn = await aiosqlite.connect(path, isolation_level=None)
    try:
        for pragma in ("PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL"):
            await conn.execute(pragma)
        await conn.execute("CREATE TABLE raw_bench (id text PRIMARY KEY, payload text NOT NULL)")
        payload = json.dumps({"url": "https://example.test/hook", "method": "POST"})

        async def single() -> None:
            for _ in range(args.singles):
                await conn.execute("BEGIN IMMEDIATE")
                await conn.execute("INSERT INTO raw_bench VALUES (?, ?)", (str(uuid.uuid4()), payload))
                await conn.execute("COMMIT")

        async def batched() -> None:
            for _ in range(0, args.runs, args.batch):
                await conn.execute("BEGIN IMMEDIATE")
                await conn.executemany("INSERT INTO raw_bench VALUES (?, ?)",
                                       [(str(uuid.uuid4()), payload) for _ in range(args.batch)])
                await conn.execute("COMMIT")

        return [
            Figure("sqlite", "raw single", await best_rate(args.repeat, args.singles, single), "tx/s", args.singles),
            Figure("sqlite", "raw batched", await best_rate(args.repeat, args.runs, batched), "rows/s", args.runs),
        ]
    finally:
        await conn.close()


# --- backends -------------------------------------------------------------------------


@asynccontextmanager
async def postgres_schema(base_url: str) -> AsyncIterator[str]:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(base_url)
    try:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in base_url else "?"
        yield f"{base_url}{sep}search_path={schema}"
    finally:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()


async def bench_backend(backend: str, args: argparse.Namespace) -> list[Figure]:
    figures: list[Figure] = []
    if backend == "postgres":
        async with postgres_schema(args.postgres) as url:
            if args.section in ("runs", "all"):
                figures += await raw_postgres(url, args)
                figures += await bench_store(backend, url, args, storage_figures)
            if args.section in ("ontology", "all"):
                figures.append(await raw_objects_postgres(url, args))
                figures += await bench_store(backend, url, args, ontology_figures)
        if args.section in ("sweeps", "all"):
            async with postgres_schema(args.postgres) as url:
                figures += await bench_store(backend, url, args, sweep_figures)
        return figures
    with tempfile.TemporaryDirectory() as folder:
        if args.section in ("runs", "all"):
            figures += await raw_sqlite(f"{folder}/raw.db", args)
            figures += await bench_store(backend, f"sqlite:///{folder}/runs.db", args, storage_figures)
        if args.section in ("ontology", "all"):
            figures.append(await raw_objects_sqlite(f"{folder}/raw-objects.db", args))
            figures += await bench_store(backend, f"sqlite:///{folder}/objects.db", args, ontology_figures)
        if args.section in ("sweeps", "all"):
            figures += await bench_store(backend, f"sqlite:///{folder}/sweeps.db", args, sweep_figures)
    return figures


async def bench_store(
    backend: str, url: str, args: argparse.Namespace,
    figures: Callable[[str, Store, argparse.Namespace], Awaitable[list[Figure]]],
) -> list[Figure]:
    store = open_store(url)
    await store.start()
    try:
        return await figures(backend, store, args)
    finally:
        await store.stop()


# --- report ---------------------------------------------------------------------------


def _baseline(scenario: str) -> str:
    """The raw scenario a storage scenario is compared with (none for the sweeps)."""
    if scenario.startswith(("sweep", "active")):
        return "none"
    if scenario.startswith("objects"):
        return "raw objects batched"
    return "raw single" if " single" in scenario else "raw batched"


def ratios(figures: list[Figure]) -> dict[tuple[str, str], float]:
    """Each storage figure over its backend's raw baseline (single over raw single, batched over
    raw batched, objects over raw objects batched)."""
    raw = {(f.backend, f.scenario): f.per_second for f in figures if f.scenario.startswith("raw")}
    return {(f.backend, f.scenario): f.per_second / raw[(f.backend, _baseline(f.scenario))]
            for f in figures if not f.scenario.startswith("raw") and (f.backend, _baseline(f.scenario)) in raw}


def _cell(f: Figure) -> str:
    if f.unit == "sweeps/s":
        return f"{1000 / f.per_second:>10,.1f} ms per sweep"
    return f"{f.per_second:>10,.0f} {f.unit}"


def print_table(figures: list[Figure]) -> None:
    rel = ratios(figures)
    backends = sorted({f.backend for f in figures}, key=["sqlite", "postgres"].index)
    scenarios = list(dict.fromkeys(f.scenario for f in figures))
    by_key = {(f.backend, f.scenario): f for f in figures}
    print(f"{'scenario':<34}" + "".join(f"{b:>32}" for b in backends))
    for scenario in scenarios:
        cells = []
        for b in backends:
            f = by_key.get((b, scenario))
            ratio = rel.get((b, scenario))
            text = "" if f is None else _cell(f) + (f" ({ratio:.2f}x raw)" if ratio else "")
            cells.append(f"{text:>32}")
        print(f"{scenario:<34}" + "".join(cells))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--section", choices=["runs", "ontology", "sweeps", "all"], default="all")
    parser.add_argument("--open", type=int, default=60_000, help="runs in flight for the sweeps section")
    parser.add_argument("--concurrency", type=int, default=1, help="also run the batched scenarios as N workers")
    parser.add_argument("--runs", type=int, default=20_000, help="runs per batched round")
    parser.add_argument("--batch", type=int, default=1_000, help="runs per batched transaction")
    parser.add_argument("--singles", type=int, default=500, help="runs per single-row round")
    parser.add_argument("--repeat", type=int, default=2, help="rounds per figure (the best is kept)")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="PostgreSQL URL (a throw-away schema is used)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser.parse_args(argv)


async def main_async(args: argparse.Namespace) -> list[Figure]:
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    figures: list[Figure] = []
    for backend in backends:
        figures += await bench_backend(backend, args)
    return figures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    figures = asyncio.run(main_async(args))
    if args.json:
        rel = ratios(figures)
        print(json.dumps({
            "figures": [asdict(f) | {"vs_raw": rel.get((f.backend, f.scenario))} for f in figures],
            "params": {"runs": args.runs, "batch": args.batch, "singles": args.singles, "repeat": args.repeat,
                       "open": args.open,
                       "concurrency": args.concurrency, "section": args.section},
        }, indent=2))
    else:
        print_table(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
