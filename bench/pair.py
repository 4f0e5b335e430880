"""Benchmark pairs: two trees of actwheel measured *at the same time*, round after round.

This box is a shared 2-core VM whose speed moves by ±20 % from one minute to the next, so a lever of
5–10 % is invisible between runs taken one after the other, even alternated. Two runs taken at once
see the same box: the ratio of their figures moves by ±3 % (A/A pairs, docs/benchmarks.md round 12),
not ±20 %. Each round starts ``bench/e2e.py`` from tree A and from tree B together (each from its own
folder, on its own code) and prints both figures and B/A; the summary gives the ratios' mean and range.

A tree is a folder holding ``actwheel/`` and ``bench/``, or a git revision of this repository (read
with ``git archive`` into a temporary folder). ``--a HEAD --b HEAD`` is an A/A pair: the instrument's
own spread. ``--b-args`` adds arguments to B's run only: ``--a . --b . --b-args "--ablate trail"`` pairs
the engine with itself minus a hop (bench/ablation.py).

    python bench/pair.py --a HEAD~1 --b . [--rounds 3] [--metric sustained.cpu_us_per_run]
                         [--e2e "--only sustained --rate 1000 --seconds 15"] [--a-args ...] [--b-args ...] [--json]

The default rate (1,000/s) keeps the two engines, each with its SQLite thread, within the box's two
cores; a figure that needs the whole box (a burst's time to drain, sustained at capacity) cannot be
paired this way.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import statistics
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_E2E = "--stack embedded --only sustained --rate 1000 --seconds 15 --gc-freeze 50000"


def tree(spec: str, scratch: Path) -> Path:
    """The folder of ``spec``: itself if it is one, else the git revision unpacked under ``scratch``."""
    folder = Path(spec)
    if (folder / "actwheel").is_dir():
        return folder.resolve()
    target = scratch / spec.replace("/", "_").replace("~", "-").replace("^", "-")
    target.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", spec], capture_output=True, check=False)
    if archive.returncode:
        raise SystemExit(f"--a/--b {spec!r}: neither a folder with actwheel/ nor a git revision "
                         f"({archive.stderr.decode().strip()})")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target


def run_e2e(folder: Path, e2e_args: list[str]) -> dict[str, Any]:
    """One ``bench/e2e.py --json`` from ``folder``, on ``folder``'s code (the first stack's report)."""
    env = {**os.environ, "PYTHONPATH": str(folder)}
    done = subprocess.run([sys.executable, "bench/e2e.py", *e2e_args, "--json"], cwd=folder, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"bench/e2e.py in {folder} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    return dict(next(iter(report.values())))


def pick(report: dict[str, Any], metric: str) -> float:
    value: Any = report
    for part in metric.split("."):
        value = value[part]
    return float(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="tree A: a folder with actwheel/ and bench/, or a git revision")
    parser.add_argument("--b", required=True, help="tree B, likewise")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--metric", default="sustained.cpu_us_per_run", help="a dotted key of e2e's report")
    parser.add_argument("--e2e", default=DEFAULT_E2E, help="bench/e2e.py's arguments, one string")
    parser.add_argument("--a-args", default="", help="more bench/e2e.py arguments for A only")
    parser.add_argument("--b-args", default="", help="more bench/e2e.py arguments for B only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sides = [shlex.split(args.e2e) + shlex.split(args.a_args), shlex.split(args.e2e) + shlex.split(args.b_args)]
    with tempfile.TemporaryDirectory(prefix="actwheel-pair-") as scratch:
        folders = [tree(args.a, Path(scratch)), tree(args.b, Path(scratch))]
        rounds = []
        for number in range(1, args.rounds + 1):
            with ThreadPoolExecutor(max_workers=2) as pool:
                a, b = pool.map(run_e2e, folders, sides)
            pair = {"round": number, "a": pick(a, args.metric), "b": pick(b, args.metric),
                    "a_sleep_p99_ms": a["baseline"]["sleep_p99_ms"], "b_sleep_p99_ms": b["baseline"]["sleep_p99_ms"]}
            pair["b_over_a"] = round(pair["b"] / pair["a"], 3) if pair["a"] else None
            rounds.append(pair)
            if not args.json:
                print(f"round {number}: A {pair['a']:.1f}  B {pair['b']:.1f}  B/A {pair['b_over_a']}", flush=True)
    ratios = [r["b_over_a"] for r in rounds if r["b_over_a"] is not None]
    summary = {"a": args.a, "b": args.b, "metric": args.metric, "e2e": args.e2e, "a_args": args.a_args,
               "b_args": args.b_args, "rounds": rounds,
               "b_over_a_mean": round(statistics.fmean(ratios), 3) if ratios else None,
               "b_over_a_range": [min(ratios), max(ratios)] if ratios else None}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"B/A mean {summary['b_over_a_mean']}, range {summary['b_over_a_range']} ({args.metric})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
