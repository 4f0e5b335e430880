"""Fuzz: compare actwheel's Quartz evaluator with real Quartz on random cases; print mismatches.

    .venv/bin/python tools/quartz-vectors/compare.py --seed 1 --count 5000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cases as case_gen
import quartz

from actwheel.errors import InvalidTrigger
from actwheel.triggers.quartz_eval import QuartzLoops, next_fire_seconds
from actwheel.triggers.quartz_parse import parse_quartz


def ours(expr: str, zone: str, start_ms: int, count: int) -> dict[str, Any]:
    try:
        parsed = parse_quartz(expr)
    except InvalidTrigger as error:
        return {"outcome": "invalid", "message": str(error)}
    fires: list[int] = []
    after = start_ms // 1000 + 1
    for _ in range(count):
        try:
            fire = next_fire_seconds(parsed, ZoneInfo(zone), after)
        except QuartzLoops:
            return {"outcome": "invalid", "message": "loops"}
        if fire is None:
            break
        fires.append(fire * 1000)
        after = fire + 1
    return {"outcome": "ok", "fires_ms": fires}


def agrees(theirs: dict[str, Any], mine: dict[str, Any]) -> bool:
    if theirs["outcome"] in ("eval_error", "timeout"):
        return mine["outcome"] == "invalid"
    if theirs["outcome"] != mine["outcome"]:
        return False
    return theirs["outcome"] == "invalid" or theirs["fires_ms"] == mine["fires_ms"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--fires", type=int, default=5)
    parser.add_argument("--mutate", type=float, default=0.2)
    args = parser.parse_args()
    todo = list(case_gen.cases(args.seed, args.count, args.mutate))
    bad = 0
    for (expr, zone, start), theirs in zip(todo, quartz.run(todo, args.fires), strict=True):
        mine = ours(expr, zone, start, args.fires)
        if not agrees(theirs, mine):
            bad += 1
            print(f"MISMATCH {expr!r} {zone} {start}\n  quartz: {theirs}\n  ours:   {mine}")
    print(f"{len(todo) - bad}/{len(todo)} agree")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
