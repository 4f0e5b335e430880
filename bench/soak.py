"""The soak (issue 14): one ``actwheel run`` process at a steady load for ``--minutes`` (default 120),
on throwaway PostgreSQL and RabbitMQ servers of its own (tests/faults/instances.py), with retention
on (``ACTWHEEL_RETENTION_S`` = ``--retention-s``, swept every ``--sweep-s``).

The load is ``--automations`` automations firing every second (``simple.op``): pass half of what
``bench/e2e.py`` measured as this machine's capacity. One row per ``--every-min`` (10) minutes:

- RSS of the engine process (``/proc/<pid>/status`` VmRSS) and its growth against the first row;
- fire lateness (``started_at − scheduled_for`` of the runs scheduled in that interval), p50 / p99;
- runs fired in the interval, rows in ``runs``, the schema's size (tables + indexes).

The verdict at the end: RSS growth < 10 % (last row against the first), lateness p99 stable (last
row ≤ 2 × the first row's and ≤ 1 s), the database bounded (once the run is longer than twice the
retention, the last size ≤ 1.25 × the size at one retention). A run shorter than that says so.

    python bench/soak.py [--minutes 120] [--every-min 10] [--automations 100] [--retention-s 600]
                         [--sweep-s 60] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for folder in (ROOT, ROOT / "tests", ROOT / "tests" / "engine", ROOT / "tests" / "faults"):
    sys.path.insert(0, str(folder))

import asyncpg  # noqa: E402
from instances import Instances  # noqa: E402 (after the sys.path entries above)
from procs import EngineProcess, engine_processes  # noqa: E402
from scenarios import fresh_schema, fresh_vhost  # noqa: E402

from actwheel.actions.defaults import default_registry  # noqa: E402
from actwheel.bus.topology import DEFAULT_TOPOLOGY  # noqa: E402
from actwheel.clock import SystemClock  # noqa: E402
from actwheel.events import EventFactory  # noqa: E402
from actwheel.service import AutomationService, Caller  # noqa: E402
from actwheel.storage import open_store  # noqa: E402

ACTION = {"type": "simple.op", "config": {"op": "set_variable", "name": "x", "value": 1}}


@dataclass
class Row:
    minute: float
    rss_mib: float
    rss_growth_pct: float
    fired: int
    late_p50_ms: float | None
    late_p99_ms: float | None
    runs_rows: int
    db_mib: float


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _create(database: str, count: int, hours: float) -> None:
    clock = SystemClock()
    store = open_store(database, clock=clock)
    await store.start()
    try:
        service = AutomationService.build(store=store, registry=default_registry(), clock=clock,
                                          events=EventFactory(topology=DEFAULT_TOPOLOGY, clock=clock, source="soak"))
        start = clock.now().replace(microsecond=0) + timedelta(seconds=3)
        trigger = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                   "start_date_time": start.isoformat(), "end_date_time": (start + timedelta(hours=hours)).isoformat()}
        for i in range(count):
            await service.create(Caller("local"), {"name": f"soak{i}", "trigger": trigger, "action": ACTION})
    finally:
        await store.stop()


async def _sample(conn: asyncpg.Connection, since: datetime, until: datetime) -> tuple[int, Any, Any, int, float]:
    row = await conn.fetchrow(
        "SELECT count(*) AS n,"
        " percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_for)) AS p50,"
        " percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_for)) AS p99"
        " FROM runs WHERE scheduled_for >= $1 AND scheduled_for < $2 AND started_at IS NOT NULL", since, until)
    rows = await conn.fetchval("SELECT count(*) FROM runs")
    size = await conn.fetchval(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'")
    return row["n"], row["p50"], row["p99"], rows, float(size) / 2**20


def _ms(value: Any) -> float | None:
    return None if value is None else round(float(value) * 1000, 1)


async def _soak(args: argparse.Namespace) -> dict[str, Any]:
    rows: list[Row] = []
    with Instances.create() as services, tempfile.TemporaryDirectory(prefix="soak-") as logs:
        async with fresh_schema(services) as database, fresh_vhost(services) as broker:
            env = {"ACTWHEEL_RETENTION_S": str(args.retention_s), "ACTWHEEL_RETENTION_SWEEP_S": str(args.sweep_s)}
            proc = EngineProcess("soak", database=database, broker=broker, log_dir=Path(logs), env=env)
            async with engine_processes([proc]):
                assert proc._proc is not None
                pid = proc._proc.pid
                await _create(database, args.automations, hours=args.minutes / 60 + 1)
                conn = await asyncpg.connect(database)
                try:
                    began = time.monotonic()
                    mark = datetime.now(UTC)
                    every = args.every_min * 60
                    print(f"{'minute':>7} {'RSS MiB':>8} {'growth%':>8} {'fired':>7} {'p50 ms':>8} {'p99 ms':>8} "
                          f"{'runs rows':>10} {'db MiB':>7}", flush=True)
                    while (elapsed := time.monotonic() - began) < args.minutes * 60:
                        await asyncio.sleep(min(every, args.minutes * 60 - elapsed))  # the soak's own pace
                        now = datetime.now(UTC) - timedelta(seconds=2)  # runs of the last 2 s may not have started
                        fired, p50, p99, runs, size = await _sample(conn, mark, now)
                        mark = now
                        rss = _rss_mib(pid)
                        first = rows[0].rss_mib if rows else rss
                        row = Row(minute=round((time.monotonic() - began) / 60, 1), rss_mib=round(rss, 1),
                                  rss_growth_pct=round((rss - first) / first * 100, 1), fired=fired,
                                  late_p50_ms=_ms(p50), late_p99_ms=_ms(p99), runs_rows=runs, db_mib=round(size, 2))
                        rows.append(row)
                        print(f"{row.minute:>7} {row.rss_mib:>8} {row.rss_growth_pct:>8} {row.fired:>7} "
                              f"{row.late_p50_ms!s:>8} {row.late_p99_ms!s:>8} {row.runs_rows:>10} {row.db_mib:>7}",
                              flush=True)
                finally:
                    await conn.close()
    return {"rows": [asdict(r) for r in rows], "verdict": _verdict(rows, args)}


def _verdict(rows: list[Row], args: argparse.Namespace) -> dict[str, Any]:
    if len(rows) < 2:
        return {"judged": False, "why": "fewer than two rows"}
    first, last = rows[0], rows[-1]
    p99_ok = (last.late_p99_ms is not None and first.late_p99_ms is not None
              and last.late_p99_ms <= max(2 * first.late_p99_ms, 50.0) and last.late_p99_ms <= 1000)
    verdict: dict[str, Any] = {"rss_growth_pct": last.rss_growth_pct, "rss_ok": last.rss_growth_pct < 10.0,
                               "p99_first_ms": first.late_p99_ms, "p99_last_ms": last.late_p99_ms, "p99_ok": p99_ok}
    retention_min = args.retention_s / 60
    if args.minutes < 2 * retention_min:
        verdict["db_bounded"] = f"not judged: {args.minutes} min < twice the retention ({retention_min:g} min)"
    else:
        at_retention = next(r for r in rows if r.minute >= retention_min)
        verdict["db_bounded"] = last.db_mib <= 1.25 * at_retention.db_mib
    return verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=120.0)
    parser.add_argument("--every-min", type=float, default=10.0, help="minutes per printed row")
    parser.add_argument("--automations", type=int, default=100, help="automations firing every second")
    parser.add_argument("--retention-s", type=float, default=600.0)
    parser.add_argument("--sweep-s", type=float, default=60.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    outcome = asyncio.run(_soak(args))
    print("verdict:", outcome["verdict"])
    if args.json:
        print(json.dumps(outcome, indent=2))
    verdict = outcome["verdict"]
    return 0 if verdict.get("rss_ok", True) and verdict.get("p99_ok", True) and verdict.get("db_bounded") is not False \
        else 1


if __name__ == "__main__":
    sys.exit(main())
