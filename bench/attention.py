"""Benchmark: what the dashboard's indexes and the "needs attention" bookkeeping (issue 13, migrations
0008 and 0012) cost the hot path on PostgreSQL — create, claim and finish, and whether claims stay HOT.

Four schemas side by side in one process, each its own store:

- ``0011``           the schema before 0012 (nothing counts UNKNOWN / DEAD runs);
- ``0012``           runs_attention kept by the triggers of migration 0012 (what ships);
- ``partial index``  0011 plus ``CREATE INDEX … ON runs (status) WHERE status IN ('UNKNOWN', 'DEAD')``, the
                     design 0012 did not take;
- ``no 0008 index``  0011 without the two indexes the dashboard added to runs in 0008 (``runs_created``,
                     ``runs_owner_created``): what those two cost the same paths.

Each round, in every schema (the order rotates round by round, so none always runs first or on the
largest table): --runs runs inserted (``insert_many``, --batch per transaction), claimed
(``claim_many``) and finished (``finish_many``) with the outcome mix --unknown / --dead / --failed
(the rest SUCCEEDED). Printed per schema: the median over rounds of µs per run of each phase and the
share of the claims' and finishes' row updates that were HOT (``pg_stat_user_tables.n_tup_hot_upd``).

``--section triggers``: the server's side alone, in one 0012 schema — the same three statements over
--runs rows each (an INSERT … SELECT, a claim-shaped and a finish-shaped UPDATE; 1 in --fail-every
finishes FAILED) with 0012's triggers enabled, then disabled (``ALTER TABLE runs DISABLE TRIGGER
USER``), alternating round by round: µs per row and the median of the paired differences. One
statement per phase, so the client's round trips are not in the figure.

    .venv/bin/python bench/attention.py [--section store|triggers] [--runs 20000] [--batch 500] [--rounds 5]
                                        [--unknown 0.01] [--dead 0.01] [--failed 0.05] [--fail-every 14]
                                        [--postgres URL] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest.mock import patch

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actwheel.storage import Store, open_store
from actwheel.storage import postgres as postgres_adapter
from actwheel.storage._sql import Migration, load_migrations
from actwheel.storage.records import NewRun, Origin, Run, RunOutcome, RunStatus

DEFAULT_POSTGRES = "postgresql://actwheel:actwheel@127.0.0.1:54329/actwheel"
LEASE_S = 60.0
#: What a variant changes in its schema after the migrations (0011, except for "0012").
VARIANT_SQL = {
    "partial index": "CREATE INDEX runs_status_attention ON runs (status) WHERE status IN ('UNKNOWN', 'DEAD')",
    "no 0008 index": "DROP INDEX runs_created; DROP INDEX runs_owner_created",
}
VARIANTS = ("0011", "0012", "partial index", "no 0008 index")
PHASES = ("create", "claim", "finish")


@dataclass
class Variant:
    """One schema under test and what each round measured in it."""

    name: str
    schema: str
    store: Store
    us_per_run: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    hot: dict[str, list[float]] = field(default_factory=lambda: {"claim": [], "finish": []})
    updates: int = 0


def _migrations_up_to(version: int) -> Callable[[str], tuple[Migration, ...]]:
    every = load_migrations

    def upto(dialect: str) -> tuple[Migration, ...]:
        return tuple(m for m in every(dialect) if m.version <= version)
    return upto


async def _open_variant(admin: asyncpg.Connection, base: str, name: str) -> Variant:
    """A fresh schema for ``name``, migrated to what that variant tests."""
    schema = f"bench_attention_{uuid.uuid4().hex[:8]}"
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base else "?"
    store = open_store(f"{base}{sep}search_path={schema}")
    if name == "0012":
        await store.start()
    else:
        with patch.object(postgres_adapter, "load_migrations", _migrations_up_to(11)):
            await store.start()
    if name in VARIANT_SQL:
        await admin.execute(f'SET search_path = "{schema}"; {VARIANT_SQL[name]}; RESET search_path')
    return Variant(name, schema, store)


def _new_runs(count: int, round_no: int) -> list[NewRun]:
    return [NewRun(automation_id=None, dedupe_key=f"r{round_no}:{i}", owner_id=f"owner{i % 10}",
                   action_type="simple.op", action_config={"op": "log", "message": "bench"},
                   origin=Origin.REQUEST) for i in range(count)]


def _outcome(run: Run, rng: random.Random, args: argparse.Namespace) -> RunOutcome:
    draw = rng.random()
    status = (RunStatus.UNKNOWN if draw < args.unknown else RunStatus.DEAD if draw < args.unknown + args.dead
              else RunStatus.FAILED if draw < args.unknown + args.dead + args.failed else RunStatus.SUCCEEDED)
    return RunOutcome(run_id=run.id, owner=run.lease_owner or "", epoch=run.lease_epoch, status=status,
                      reason=None if status is RunStatus.SUCCEEDED else "bench",
                      result={"ok": True} if status is RunStatus.SUCCEEDED else None)


def _batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


async def _updates(admin: asyncpg.Connection, schema: str, at_least: int = 0) -> tuple[int, int]:
    """``runs``' (updates, HOT updates) so far, once the backends have flushed ``at_least`` updates
    (an idle backend flushes its table statistics within 10 s, PostgreSQL 15)."""
    deadline = time.monotonic() + 15
    while True:
        await admin.execute("SELECT pg_stat_clear_snapshot()")
        row = await admin.fetchrow("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                                   "WHERE schemaname = $1 AND relname = 'runs'", schema)
        assert row is not None
        if int(row["n_tup_upd"]) >= at_least or time.monotonic() > deadline:
            return int(row["n_tup_upd"]), int(row["n_tup_hot_upd"])
        await asyncio.sleep(0.5)


async def one_round(variant: Variant, admin: asyncpg.Connection, round_no: int, args: argparse.Namespace) -> None:
    """Create, claim and finish --runs runs in ``variant``, timing each phase."""
    store, rng = variant.store, random.Random(round_no)
    started = time.perf_counter()
    ids: list[str] = []
    for chunk in _batches(_new_runs(args.runs, round_no), args.batch):
        async with store.transaction() as tx:
            ids += [r.run.id for r in await tx.runs.insert_many(chunk)]
    variant.us_per_run["create"].append((time.perf_counter() - started) * 1e6 / len(ids))
    before = await _updates(admin, variant.schema, variant.updates)
    started = time.perf_counter()
    claimed: list[Run] = []
    for chunk in _batches(ids, args.batch):
        async with store.transaction() as tx:
            claimed += await tx.runs.claim_many(chunk, "bench-worker", LEASE_S)
    variant.us_per_run["claim"].append((time.perf_counter() - started) * 1e6 / len(claimed))
    after_claim = await _updates(admin, variant.schema, before[0] + len(claimed))
    started = time.perf_counter()
    for chunk in _batches(claimed, args.batch):
        async with store.transaction() as tx:
            await tx.runs.finish_many([_outcome(r, rng, args) for r in chunk])
    variant.us_per_run["finish"].append((time.perf_counter() - started) * 1e6 / len(claimed))
    after_finish = await _updates(admin, variant.schema, after_claim[0] + len(claimed))
    variant.updates = after_finish[0]
    for phase, (a, b) in (("claim", (before, after_claim)), ("finish", (after_claim, after_finish))):
        updates = b[0] - a[0]
        variant.hot[phase].append(100.0 * (b[1] - a[1]) / updates if updates else 0.0)


def summary(variant: Variant, baseline: Variant) -> dict[str, Any]:
    """Medians over rounds, and the median of the round-by-round differences from ``baseline`` (the
    rounds of a pair ran one after the other: the box's noise is mostly shared)."""
    return {"variant": variant.name,
            **{f"{p}_us": statistics.median(v) for p, v in variant.us_per_run.items()},
            **{f"{p}_delta_us": statistics.median(a - b for a, b in zip(v, baseline.us_per_run[p], strict=True))
               for p, v in variant.us_per_run.items()},
            **{f"{p}_hot_pct": statistics.median(v) for p, v in variant.hot.items()}}


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\n{args.rounds} rounds of {args.runs:,} runs, batches of {args.batch}; outcomes: "
          f"{args.unknown:.0%} UNKNOWN, {args.dead:.0%} DEAD, {args.failed:.0%} FAILED, the rest SUCCEEDED; "
          "medians over rounds")
    print("µs per run (in brackets: the median of the paired differences from 0011)")
    print(f"{'schema':<15} {'create':>16} {'claim':>16} {'finish':>16} {'claims HOT':>11} {'finishes HOT':>13}")
    for r in rows:
        cells = "".join(f" {r[f'{p}_us']:6.1f} ({r[f'{p}_delta_us']:+5.1f})" for p in PHASES)
        print(f"{r['variant']:<15}{cells} {r['claim_hot_pct']:10.0f}% {r['finish_hot_pct']:12.0f}%")


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    admin = await asyncpg.connect(args.postgres)
    variants: list[Variant] = []
    try:
        async with AsyncExitStack() as stack:
            for name in VARIANTS:
                variants.append(await _open_variant(admin, args.postgres, name))
                stack.push_async_callback(variants[-1].store.stop)
            for round_no in range(args.rounds):
                shift = round_no % len(variants)
                for variant in variants[shift:] + variants[:shift]:
                    await one_round(variant, admin, round_no, args)
                print(f"  round {round_no + 1}: " + "  ".join(
                    f"{v.name} claim {v.us_per_run['claim'][-1]:.1f} finish {v.us_per_run['finish'][-1]:.1f} µs"
                    for v in variants), flush=True)
        return [summary(v, variants[0]) for v in variants]
    finally:
        for variant in variants:
            await admin.execute(f'DROP SCHEMA IF EXISTS "{variant.schema}" CASCADE')
        await admin.close()


TRIGGER_PHASES = {
    "insert": "INSERT INTO runs (id, dedupe_key, origin, status, action_type, action_config, policy, owner_id) "
              "SELECT $1 || g, $1 || g, 'request', 'PENDING', 'webhook', '{}', '{}', 'owner' || (g % 10) "
              "FROM generate_series(1, $2) AS g",
    "claim": "UPDATE runs SET status = 'RUNNING', lease_owner = 'w', lease_expires_at = now() + interval '60 s', "
             "lease_epoch = lease_epoch + 1, attempt = attempt + 1, started_at = coalesce(started_at, now()), "
             "updated_at = now() WHERE id LIKE $1 || '%' AND status = 'PENDING'",
    "finish": "UPDATE runs SET status = CASE WHEN abs(hashtext(id)) % $2 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END, "
              "result = '{}'::json, lease_owner = NULL, lease_expires_at = NULL, finished_at = now(), "
              "updated_at = now() WHERE id LIKE $1 || '%' AND status = 'RUNNING'",
}


async def _trigger_phase(conn: asyncpg.Connection, phase: str, prefix: str, args: argparse.Namespace) -> float:
    """One phase's statement over --runs rows: server µs per row (one round trip)."""
    rows: int = args.runs
    params: tuple[Any, ...] = {"insert": (prefix, rows), "claim": (prefix,), "finish": (prefix, args.fail_every)}[phase]
    started = time.perf_counter()
    await conn.execute(TRIGGER_PHASES[phase], *params)
    return (time.perf_counter() - started) * 1e6 / rows


async def triggers(args: argparse.Namespace) -> list[dict[str, Any]]:
    """0012's triggers enabled vs disabled, alternating, in one schema."""
    admin = await asyncpg.connect(args.postgres)
    variant = await _open_variant(admin, args.postgres, "0012")
    await variant.store.stop()
    took: dict[bool, dict[str, list[float]]] = {on: {p: [] for p in PHASES} for on in (True, False)}
    conn = await asyncpg.connect(args.postgres, server_settings={"search_path": variant.schema})
    try:
        await conn.execute("CREATE INDEX runs_id_prefix ON runs (id text_pattern_ops)")  # the phases' WHERE
        for round_no in range(args.rounds):
            for on in (True, False) if round_no % 2 else (False, True):
                await conn.execute(f"ALTER TABLE runs {'ENABLE' if on else 'DISABLE'} TRIGGER USER")
                for phase, phase_sql in zip(PHASES, ("insert", "claim", "finish"), strict=True):
                    took[on][phase].append(await _trigger_phase(conn, phase_sql, f"r{round_no}{on:d}-", args))
    finally:
        await conn.close()
        await admin.execute(f'DROP SCHEMA IF EXISTS "{variant.schema}" CASCADE')
        await admin.close()
    rows = [{"phase": p, "on_us": statistics.median(took[True][p]), "off_us": statistics.median(took[False][p]),
             "delta_us": statistics.median(a - b for a, b in zip(took[True][p], took[False][p], strict=True))}
            for p in PHASES]
    print(f"\n{args.rounds} rounds of {args.runs:,} rows per statement; 1 in {args.fail_every} finishes FAILED")
    print(f"{'phase':<8} {'triggers on':>12} {'off':>8} {'paired diff':>12}  (server µs per row)")
    for r in rows:
        print(f"{r['phase']:<8} {r['on_us']:12.2f} {r['off_us']:8.2f} {r['delta_us']:+12.2f}")
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--section", choices=("store", "triggers"), default="store")
    parser.add_argument("--runs", type=int, default=20_000, help="runs per round and schema")
    parser.add_argument("--batch", type=int, default=500, help="runs per transaction")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--unknown", type=float, default=0.01, help="share of runs finished UNKNOWN")
    parser.add_argument("--dead", type=float, default=0.01, help="share of runs finished DEAD")
    parser.add_argument("--failed", type=float, default=0.05, help="share of runs finished FAILED")
    parser.add_argument("--fail-every", type=int, default=14, help="triggers: 1 in N finishes FAILED")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.section == "triggers":
        rows = asyncio.run(triggers(args))
    else:
        rows = asyncio.run(bench(args))
        print_table(rows, args)
    if args.json:
        print(json.dumps({"args": vars(args), "result": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
