"""Benchmark: ``actwheel run --workers N`` on this machine (issue 15, "more cores"): runs/s through
every hop with 1 and with 2 worker processes, on PostgreSQL + RabbitMQ (the ops/dev-services ones, as
tests/services.py finds them), a fresh schema and vhost per round.

Each round starts ``actwheel run --workers N``, creates ``--rate`` automations firing every second
(``simple.op``, overlap ``allow``) through the batch route, lets ``--warmup`` seconds pass and counts
the runs that finished SUCCEEDED during the next ``--seconds`` (and, for the record, the runs still in
flight at the end and the instants recorded SKIPPED, e.g. held by the planner's backlog bound). Offer
more than one process can take (the default 3,000/s is about twice what one measured here) so that the
figure is capacity, not the offered rate. Rounds alternate 1, 2, 1, 2, ... in the same process; the
verdict is the median ratio 2-workers / 1-worker of the pairs. The machine also runs the database and
the broker, so the second process competes with them for the same two cores.

    python bench/workers.py [--rate 3000] [--seconds 20] [--warmup 8] [--rounds 2] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for folder in (ROOT, ROOT / "tests", ROOT / "tests" / "engine"):
    sys.path.insert(0, str(folder))

import asyncpg  # noqa: E402
import httpx  # noqa: E402
from procs import EngineProcess, fresh_vhost  # noqa: E402 (after the sys.path entries above)
from services import isolated_postgres_url, rabbitmq_url  # noqa: E402

ACTION = {"type": "simple.op", "config": {"op": "set_variable", "name": "x", "value": 1}}


async def _create(client: httpx.AsyncClient, rate: int, start: datetime) -> None:
    trigger = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
               "start_date_time": start.isoformat()}
    items = [{"name": f"b{i}", "trigger": trigger, "action": ACTION, "policy": {"overlap": "allow"}}
             for i in range(rate)]
    for first in range(0, rate, 1000):
        answer = await client.post("/v1/automations/batch", json={"items": items[first:first + 1000]})
        assert answer.status_code in (200, 201), answer.text


async def one_round(workers: int, *, rate: int, seconds: int, warmup: int, log_dir: Path) -> dict[str, Any]:
    async with isolated_postgres_url() as database, fresh_vhost(rabbitmq_url()) as broker:
        proc = EngineProcess(f"bench-{workers}w-{uuid.uuid4().hex[:4]}", database=database, broker=broker,
                             log_dir=log_dir, extra_args=["--workers", str(workers)])
        proc.start()
        conn = await asyncpg.connect(database)
        try:
            await proc.wait_ready(90)
            start = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
            async with httpx.AsyncClient(base_url=proc.url, timeout=60) as client:
                await _create(client, rate, start)
            began = max(datetime.now(UTC), start) + timedelta(seconds=warmup)
            await asyncio.sleep((began - datetime.now(UTC)).total_seconds() + seconds)  # the measured window
            ended = began + timedelta(seconds=seconds)
            done = await conn.fetchval("SELECT count(*) FROM runs WHERE status = 'SUCCEEDED' AND finished_at >= $1 "
                                       "AND finished_at < $2", began, ended)
            backlog = await conn.fetchval("SELECT count(*) FROM runs WHERE finished_at IS NULL")
            skipped = await conn.fetchval("SELECT count(*) FROM runs WHERE status = 'SKIPPED'")
        finally:
            await conn.close()
            await proc.stop(within=60)
    return {"workers": workers, "offered_runs_per_s": rate, "runs_per_s": round(done / seconds, 1),
            "in_flight_at_end": backlog, "skipped": skipped}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as logs:
        for _ in range(args.rounds):
            for workers in (1, 2):
                row = await one_round(workers, rate=args.rate, seconds=args.seconds, warmup=args.warmup,
                                      log_dir=Path(logs))
                rounds.append(row)
                if not args.json:
                    print(f"workers={row['workers']}  offered {row['offered_runs_per_s']}/s  "
                          f"{row['runs_per_s']:.0f} runs/s  in flight at the end {row['in_flight_at_end']}  "
                          f"skipped (held by backpressure, misfire) {row['skipped']}",
                          flush=True)
    one = [r["runs_per_s"] for r in rounds if r["workers"] == 1]
    two = [r["runs_per_s"] for r in rounds if r["workers"] == 2]
    ratios = [b / a for a, b in zip(one, two, strict=True) if a]
    return {"rounds": rounds, "runs_per_s_1": statistics.median(one), "runs_per_s_2": statistics.median(two),
            "ratio_2_vs_1": round(statistics.median(ratios), 2) if ratios else None}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=3000, help="automations firing every second")
    parser.add_argument("--seconds", type=int, default=20, help="the measured window")
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="pairs of (1 worker, 2 workers)")
    parser.add_argument("--json", action="store_true")
    parsed = parser.parse_args()
    result = asyncio.run(main(parsed))
    if parsed.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"median: 1 worker {result['runs_per_s_1']:.0f} runs/s, 2 workers {result['runs_per_s_2']:.0f} runs/s, "
              f"ratio {result['ratio_2_vs_1']}")
