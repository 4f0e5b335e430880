"""Benchmark: bounded history (issue 14) — does the retention sweeper keep the database flat under load
without slowing the claim path, and what would an index on ``finished_at`` cost the finish path?

``--section soak`` (default): runs are created, claimed and finished at ``--rate`` runs/s (each tick of
100 ms: cursor CAS + insert_many + the planner's ``run.ready`` message; claim_many; finish_many with two
audit rows per run and the relay's mark_published), for ``--minutes``, with the engine's
``RetentionSweeper`` running beside it (``--retention-s``, default 120 s, every ``--sweep-s``). Printed
per minute: runs created, runs and audit rows deleted, rows in ``runs``, the database size (PostgreSQL:
the relations of the schema, tables and indexes; SQLite: file + WAL − free pages), claim and finish
latency (median and p99 of the per-batch transaction) and the claim median's ratio to minute 1's (the
baseline: nothing is old enough to delete yet). Whether the load kept up is shown as achieved runs/s.
Below each minute, so that the cause of any growth is visible: PostgreSQL, per swept table (runs, audit,
outbox) its heap, indexes and TOAST, live and dead tuples (``pg_stat_user_tables``) and vacuums so far,
then each index of runs; SQLite, the file as the file system sees it (+ WAL) and its free pages. At the
end, ``steady``: the lowest and highest size and claim/finish p50 from the minute after the first
retention window and one sweep, and their spread (±). ``--autovacuum default`` resets migration 0011's
per-table autovacuum settings to the server's, for the comparison.

``--section finish-index``: claim+finish batched (``bench/storage.py``'s scenario, --runs per round) on a
table without, then with, ``CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT
NULL``, alternating rounds in the same process; the ratio is with / without (median of the pairs).

    python bench/retention.py [--backend sqlite|postgres] [--section soak|finish-index]
                              [--minutes 10] [--rate 1000] [--retention-s 120] [--sweep-s 30] [--batch 1000]
                              [--runs 20000] [--rounds 4] [--postgres URL] [--autovacuum tuned|default] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import asyncpg
from storage import (  # bench/storage.py: the same fixtures and scenarios
    Cursors,
    _succeeded,
    claim_finish_batched,
    create_automations,
    create_batched,
    postgres_schema,
)

from actwheel.actors.retention import RetentionSweeper
from actwheel.clock import SystemClock
from actwheel.storage import Store, open_store
from actwheel.storage.records import NewAuditEntry

DEFAULT_POSTGRES = "postgresql://actwheel:actwheel@127.0.0.1:54329/actwheel"
TICK_S = 0.1
LEASE_S = 30.0


@dataclass
class Minute:
    minute: int
    created: int = 0
    deleted_runs: int = 0
    deleted_audit: int = 0
    rows: int = 0
    size_mb: float = 0.0
    claim_p50_ms: float = 0.0
    claim_p99_ms: float = 0.0
    finish_p50_ms: float = 0.0
    claim_ratio: float = 1.0
    achieved_per_s: float = 0.0
    #: PostgreSQL, per table (runs, audit, outbox): heap/index/toast MB, live and dead tuples, vacuums so far;
    #: the runs indexes one by one. SQLite: file_mb is the file as the file system sees it (+ WAL).
    tables: dict[str, dict[str, float]] = field(default_factory=dict)
    indexes_mb: dict[str, float] = field(default_factory=dict)
    file_mb: float = 0.0
    claims: list[float] = field(default_factory=list, repr=False)
    finishes: list[float] = field(default_factory=list, repr=False)


def _p(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


#: The per-table settings migration 0011 sets; ``--autovacuum default`` resets them (the server's defaults).
AUTOVACUUM_OPTIONS = ("autovacuum_vacuum_scale_factor", "autovacuum_vacuum_threshold",
                      "autovacuum_vacuum_insert_scale_factor", "autovacuum_vacuum_insert_threshold",
                      "autovacuum_vacuum_cost_delay", "autovacuum_vacuum_cost_limit",
                      "autovacuum_analyze_scale_factor")
#: The tables the sweeper deletes from, whose size and dead tuples each minute prints.
SWEPT = ("runs", "audit", "outbox")
_TABLE_STATS = """
SELECT c.relname AS name, pg_relation_size(c.oid) AS heap, pg_indexes_size(c.oid) AS indexes,
       coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) AS toast,
       s.n_live_tup AS live, s.n_dead_tup AS dead, s.autovacuum_count + s.vacuum_count AS vacuums
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = $1 AND c.relname = ANY($2::text[])"""
_INDEX_SIZES = """
SELECT i.relname AS name, pg_relation_size(i.oid) AS size FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = $1 AND t.relname = 'runs' ORDER BY 1"""


class Sizer:
    """The database's size in MB, measured outside the store (a raw connection, or the file)."""

    def __init__(self, backend: str, url: str) -> None:
        self.backend, self.url = backend, url

    async def measure(self, minute: Minute) -> None:
        if self.backend == "postgres":
            await self._postgres(minute)
        else:
            self._sqlite(minute)

    async def _postgres(self, minute: Minute) -> None:
        schema = self.url.rsplit("search_path=", 1)[-1]
        conn = await asyncpg.connect(self.url.split("?")[0])
        try:
            size = await conn.fetchval(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'", schema)
            rows = await conn.fetchval(f'SELECT count(*) FROM "{schema}".runs')
            tables = await conn.fetch(_TABLE_STATS, schema, list(SWEPT))
            indexes = await conn.fetch(_INDEX_SIZES, schema)
        finally:
            await conn.close()
        minute.size_mb, minute.rows = float(size) / 1e6, int(rows)
        minute.tables = {t["name"]: {"heap_mb": t["heap"] / 1e6, "index_mb": t["indexes"] / 1e6,
                                     "toast_mb": t["toast"] / 1e6, "live": float(t["live"]),
                                     "dead": float(t["dead"]), "vacuums": float(t["vacuums"])} for t in tables}
        minute.indexes_mb = {i["name"]: i["size"] / 1e6 for i in indexes}

    def _sqlite(self, minute: Minute) -> None:
        import sqlite3

        path = self.url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as conn:
            pages, free, page = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                                 for p in ("page_count", "freelist_count", "page_size"))
            rows = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        wal = os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0
        minute.size_mb, minute.rows = ((pages - free) * page + wal) / 1e6, int(rows)
        minute.file_mb = (os.path.getsize(path) + wal) / 1e6
        minute.tables = {"file": {"pages": float(pages), "free_pages": float(free)}}


async def one_tick(store: Store, cursors: Cursors, per_tick: int, minute: Minute) -> None:
    ids = await create_batched(store, cursors, per_tick, per_tick)
    start = time.perf_counter()
    async with store.transaction() as tx:
        runs = await tx.runs.claim_many(ids, "bench-worker", LEASE_S)
    minute.claims.append(time.perf_counter() - start)
    start = time.perf_counter()
    async with store.transaction() as tx:
        await tx.runs.finish_many([_succeeded(r) for r in runs])
        await tx.audit.append_many([NewAuditEntry(event_id=f"{r.id}:{phase}", phase=phase, actor="bench",
                                                  run_id=r.id, automation_id=r.automation_id)
                                    for r in runs for phase in ("EXECUTE", "FINISH")])
        taken = await tx.outbox.take_batch(500)
        await tx.outbox.mark_published([m.id for m in taken])
    minute.finishes.append(time.perf_counter() - start)
    minute.created += len(ids)


async def soak(backend: str, url: str, args: argparse.Namespace) -> list[Minute]:
    store = open_store(url)
    await store.start()
    if backend == "postgres" and args.autovacuum == "default":
        await _raw(backend, url, ";".join(f"ALTER TABLE {t} RESET ({', '.join(AUTOVACUUM_OPTIONS)})" for t in SWEPT))
    sizer = Sizer(backend, url)
    sweeper = RetentionSweeper(store=store, clock=SystemClock(), instance="bench", retention_s=args.retention_s,
                               interval_s=args.sweep_s, batch=args.batch, pause_s=0.05)
    totals = {"runs": 0, "audit": 0}
    original = sweeper.sweep

    async def counted_sweep() -> object:
        report = await original()
        totals["runs"] += report.runs
        totals["audit"] += report.audit
        return report

    sweeper.sweep = counted_sweep  # type: ignore[method-assign]
    sweeping = asyncio.create_task(sweeper.run())
    minutes: list[Minute] = []
    try:
        cursors = Cursors(await create_automations(store, max(100, args.rate)))
        per_tick = max(1, round(args.rate * TICK_S))
        for m in range(1, args.minutes + 1):
            minute = Minute(m)
            began = time.perf_counter()
            deadline = began + 60
            next_tick = began
            while time.perf_counter() < deadline:
                await one_tick(store, cursors, per_tick, minute)
                next_tick += TICK_S
                await asyncio.sleep(max(0.0, next_tick - time.perf_counter()))
            minute.achieved_per_s = minute.created / (time.perf_counter() - began)
            await sizer.measure(minute)
            minute.deleted_runs, minute.deleted_audit = totals["runs"], totals["audit"]
            minute.claim_p50_ms, minute.claim_p99_ms = _p(minute.claims, 0.5), _p(minute.claims, 0.99)
            minute.finish_p50_ms = _p(minute.finishes, 0.5)
            minute.claim_ratio = minute.claim_p50_ms / minutes[0].claim_p50_ms if minutes else 1.0
            minutes.append(minute)
            print_minute(backend, minute)
    finally:
        sweeper.request_stop()
        await sweeping
        await store.stop()
    return minutes


def steady(minutes: list[Minute], args: argparse.Namespace) -> dict[str, float]:
    """Size and claim p50 over the minutes after the first retention window and one sweep (the history
    is bounded from then on): each one's lowest and highest value and the spread around their middle
    (``(max - min) / (max + min)``: ±15 % is 0.15)."""
    first = int((args.retention_s + args.sweep_s) // 60) + 2
    window = [m for m in minutes if m.minute >= first]
    if len(window) < 2:
        return {}
    out: dict[str, float] = {"from_minute": float(first)}
    for name in ("size_mb", "claim_p50_ms", "finish_p50_ms"):
        values = [getattr(m, name) for m in window]
        low, high = min(values), max(values)
        out |= {f"{name}_min": low, f"{name}_max": high, f"{name}_spread": (high - low) / (high + low)}
    print(f"steady from minute {first}: size {out['size_mb_min']:.0f}-{out['size_mb_max']:.0f} MB "
          f"(±{out['size_mb_spread']:.0%}), claim p50 {out['claim_p50_ms_min']:.2f}-{out['claim_p50_ms_max']:.2f} ms "
          f"(±{out['claim_p50_ms_spread']:.0%}), finish p50 {out['finish_p50_ms_min']:.2f}-"
          f"{out['finish_p50_ms_max']:.2f} ms (±{out['finish_p50_ms_spread']:.0%})", flush=True)
    return out


def print_minute(backend: str, m: Minute) -> None:
    print(f"{backend:8} min {m.minute:2}  created {m.created:7}  ({m.achieved_per_s:6.0f}/s)  "
          f"deleted runs {m.deleted_runs:7} audit {m.deleted_audit:7}  rows {m.rows:7}  size {m.size_mb:7.1f} MB  "
          f"claim p50 {m.claim_p50_ms:6.2f} ms p99 {m.claim_p99_ms:6.2f} ms (x{m.claim_ratio:.2f} of min 1)  "
          f"finish p50 {m.finish_p50_ms:6.2f} ms", flush=True)
    if m.file_mb:
        free = m.tables["file"]["free_pages"]
        print(f"{'':8} file {m.file_mb:7.1f} MB (with WAL)  free pages {free:.0f}", flush=True)
    for name, t in m.tables.items():
        if name in SWEPT:
            print(f"{'':8}   {name:7} heap {t['heap_mb']:7.1f} MB  indexes {t['index_mb']:7.1f} MB  toast "
                  f"{t['toast_mb']:5.1f} MB  live {t['live']:8.0f}  dead {t['dead']:8.0f}  vacuums {t['vacuums']:.0f}",
                  flush=True)
    if m.indexes_mb:
        print(f"{'':8}   runs indexes MB: " + "  ".join(f"{k} {v:.1f}" for k, v in m.indexes_mb.items()), flush=True)


# --- what an index on finished_at would cost the finish path ---------------------------------------------


async def finish_index(backend: str, url: str, args: argparse.Namespace) -> dict[str, float]:
    store = open_store(url)
    await store.start()
    try:
        cursors = Cursors(await create_automations(store, 1000))
        pairs: list[tuple[float, float]] = []
        for i in range(args.rounds):
            # ABBA: the table grows round by round, so neither variant always runs on the smaller one.
            if i % 2:
                with_index = await _with_index(backend, url, store, cursors, args)
                without = await _claim_finish_rate(store, cursors, args)
            else:
                without = await _claim_finish_rate(store, cursors, args)
                with_index = await _with_index(backend, url, store, cursors, args)
            pairs.append((without, with_index))
            print(f"{backend:8} claim+finish batched  without {without:8.0f} runs/s  with runs_finished "
                  f"{with_index:8.0f} runs/s  (x{with_index / without:.3f})", flush=True)
    finally:
        await store.stop()
    ratio = statistics.median(w / wo for wo, w in pairs)
    print(f"{backend:8} with / without an index on finished_at: x{ratio:.3f} (median of {len(pairs)} pairs)")
    return {"without_per_s": statistics.median(p[0] for p in pairs),
            "with_per_s": statistics.median(p[1] for p in pairs), "ratio": ratio}


async def _with_index(backend: str, url: str, store: Store, cursors: Cursors, args: argparse.Namespace) -> float:
    await _raw(backend, url, "CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL")
    try:
        return await _claim_finish_rate(store, cursors, args)
    finally:
        await _raw(backend, url, "DROP INDEX runs_finished")


async def _claim_finish_rate(store: Store, cursors: Cursors, args: argparse.Namespace) -> float:
    ids = await create_batched(store, cursors, args.runs, args.batch)
    start = time.perf_counter()
    await claim_finish_batched(store, ids, args.batch)
    return len(ids) / (time.perf_counter() - start)


async def _raw(backend: str, url: str, sql: str) -> None:
    if backend == "postgres":
        conn = await asyncpg.connect(url.split("?")[0], server_settings={"search_path": url.rsplit("=", 1)[-1]})
        try:
            await conn.execute(sql)
        finally:
            await conn.close()
        return
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        conn.execute(sql)


# --- main ----------------------------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace) -> object:
    work = soak if args.section == "soak" else finish_index
    if args.backend == "postgres":
        async with postgres_schema(args.postgres) as url:
            return await work("postgres", url, args)
    with tempfile.TemporaryDirectory() as folder:
        return await work("sqlite", f"sqlite:///{folder}/retention.db", args)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--section", choices=("soak", "finish-index"), default="soak")
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--rate", type=int, default=1000, help="runs per second")
    parser.add_argument("--retention-s", type=float, default=120.0)
    parser.add_argument("--sweep-s", type=float, default=30.0)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20000, help="finish-index: runs per round")
    parser.add_argument("--rounds", type=int, default=4, help="finish-index: pairs of rounds")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--autovacuum", choices=("tuned", "default"), default="tuned",
                        help="postgres: keep 0011's per-table autovacuum settings, or reset them to the server's")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(main_async(args))
    summary = steady(result, args) if isinstance(result, list) else {}
    if args.json:
        out = [asdict(m) | {"claims": None, "finishes": None} for m in result] if isinstance(result, list) else result
        print(json.dumps({"backend": args.backend, "section": args.section, "args": vars(args), "result": out,
                          "steady": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
