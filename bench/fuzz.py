"""Benchmark: a larger Schemathesis run against a running engine, on the embedded stack (SQLite + the
in-process bus) and the services stack (PostgreSQL + RabbitMQ), as tests/fuzz/test_fuzz.py does in CI with
fewer examples. Per stack: operations tested, test cases generated, unique failures, lines of the engine's
log that show a crash, and the time taken.

    python bench/fuzz.py [--examples 100] [--seed 14] [--stacks embedded,services] [--workers 1] [--json]

The services stack needs ops/dev-services (a fresh PostgreSQL schema and RabbitMQ vhost per run).
Exits 1 when a stack had a failure or a crash line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "fuzz"), str(ROOT / "tests" / "engine")]

from fuzzing import FuzzResult, RunningEngine, fuzz  # noqa: E402  (tests/fuzz: the harness the CI run uses)


async def run_stack(stack: str, args: argparse.Namespace) -> FuzzResult:
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{stack}-") as folder:
        workdir = Path(folder)
        if stack == "embedded":
            with RunningEngine(workdir) as engine:
                return await asyncio.to_thread(fuzz, engine, stack=stack, max_examples=args.examples,
                                               seed=args.seed, workers=args.workers)
        from procs import fresh_vhost
        from services import isolated_postgres_url, rabbitmq_url
        async with isolated_postgres_url("fuzzbench") as database, fresh_vhost(rabbitmq_url()) as broker:
            engine = RunningEngine(workdir, database=database, broker=broker)
            await asyncio.to_thread(engine.__enter__)
            try:
                return await asyncio.to_thread(fuzz, engine, stack=stack, max_examples=args.examples,
                                               seed=args.seed, workers=args.workers)
            finally:
                await asyncio.to_thread(engine.__exit__, None, None, None)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=100, help="max examples per operation and phase")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--stacks", default="embedded,services")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    results = [await run_stack(stack, args) for stack in args.stacks.split(",")]
    figures: dict[str, Any] = {"examples": args.examples, "seed": args.seed,
                               "command": results[0].command if results else [],
                               "stacks": [r.as_dict() for r in results]}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for r in results:
            print(f"{r.stack:9} operations {r.operations:3}  cases {r.cases:6}  failures {r.failures:3}  "
                  f"engine crash lines {len(r.crash_lines):2}  key works {r.key_still_works}  {r.seconds:6.1f} s")
    for r in results:
        if r.failures or r.crash_lines or not r.key_still_works:
            print(r.output[-20000:], *r.crash_lines[:20], sep="\n", file=sys.stderr)
    return 1 if any(r.failures or r.crash_lines or not r.key_still_works for r in results) else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
