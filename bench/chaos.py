"""The fault suite (issue 14): every scenario of tests/faults/scenarios.py at full size, on throwaway
PostgreSQL and RabbitMQ servers of its own (never the shared dev services; root for the tmpfs).

Scenarios (``--only`` picks some, by name):

- ``sigkill-all`` / ``sigkill-router`` / ``sigkill-ticker``: a process running every role, only the
  router or only the ticker is SIGKILLed ``--kills`` times while a second process runs every role;
- ``broker``: the RabbitMQ node SIGKILLed and started again ``--rounds`` times in a row (20): the
  consumers (``rabbitmqctl list_consumers``) must be back within 30 s every time;
- ``pg-stall``, ``pg-reset``, ``pg-latency``, ``pg-half-open``, ``amqp-stall``, ``amqp-reset``,
  ``amqp-half-open``: the fault-injecting proxy between one engine and PostgreSQL / RabbitMQ
  (``--fault-s`` each); a stalled or silent database must turn /readyz to 503;
- ``skew``: three in-process engines whose clocks read −N, 0, +N s (``--skew-s``) on one database;
- ``disk-full``: an embedded engine whose SQLite file is on an 8 MiB tmpfs that fills up.

Each prints one row: injected faults, expected instants, duplicates, missing, lost (outbox rows never
published), unsettled runs, STRONG effects extra/missing, the longest recovery; ``--json`` prints
them as JSON too. Exit code 1 when a scenario broke an invariant or its own promise.

    python bench/chaos.py [--only broker,pg-stall] [--rounds 20] [--kills 3] [--automations 50]
                          [--window-s 30] [--fault-s 10] [--skew-s 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for folder in (ROOT, ROOT / "tests", ROOT / "tests" / "engine", ROOT / "tests" / "faults"):
    sys.path.insert(0, str(folder))

from instances import Instances  # noqa: E402 (after the sys.path entries above)
from scenarios import Figures, broker_restarts, clock_skew, disk_full, network_faults, sigkill_churn  # noqa: E402

Scenario = Callable[[Instances, Path, argparse.Namespace], Awaitable[Figures]]


def _promises(name: str, figures: Figures) -> list[str]:
    """What a scenario promises besides the invariants."""
    broken = []
    if name == "broker" and figures.recovery_s >= 30.0:
        broken.append(f"consumers back after {figures.recovery_s:.1f} s (>= 30 s)")
    if name in ("pg-stall", "pg-half-open") and not all(figures.details.get("readyz_503_during_fault", [])):
        broken.append("/readyz was never 503 while the database did not answer")
    if name == "skew" and figures.details.get("recovered"):
        broken.append(f"{figures.details['recovered']} runs recovered: a live lease was taken")
    if name == "disk-full":
        if figures.details.get("refused_status") != 507:
            broken.append(f"a write on a full disk answered {figures.details.get('refused_status')}, not 507")
        if not (figures.details.get("kept_readable") and figures.details.get("kept_after")):
            broken.append("committed automations were not kept")
    return broken


def _scenarios(args: argparse.Namespace) -> dict[str, Scenario]:
    n, w, f = args.automations, args.window_s, args.fault_s

    def net(link: str, kind: str, repeats: int = 1) -> Scenario:
        return lambda s, d, a: network_faults(s, d, link=link, kind=kind, fault_s=1.0 if kind == "reset" else f,
                                              automations=n, window_s=w, repeats=repeats)

    return {
        "sigkill-all": lambda s, d, a: sigkill_churn(s, d, victim_roles=None, kills=a.kills, automations=n,
                                                     window_s=w),
        "sigkill-router": lambda s, d, a: sigkill_churn(s, d, victim_roles=["router"], kills=a.kills, automations=n,
                                                        window_s=w),
        "sigkill-ticker": lambda s, d, a: sigkill_churn(s, d, victim_roles=["ticker"], kills=a.kills, automations=n,
                                                        window_s=w),
        "broker": lambda s, d, a: broker_restarts(s, d, rounds=a.rounds, automations=n),
        "pg-stall": net("postgres", "stall"),
        "pg-reset": net("postgres", "reset", repeats=3),
        "pg-latency": net("postgres", "latency"),
        "pg-half-open": net("postgres", "half_open"),
        "amqp-stall": net("rabbitmq", "stall"),
        "amqp-reset": net("rabbitmq", "reset", repeats=3),
        "amqp-half-open": net("rabbitmq", "half_open"),
        "skew": lambda s, d, a: clock_skew(s, skew_s=a.skew_s, automations=n, window_s=w),
        "disk-full": lambda s, d, a: disk_full(d),
    }


async def _run(args: argparse.Namespace) -> list[dict[str, object]]:
    scenarios = _scenarios(args)
    chosen = [name.strip() for name in args.only.split(",")] if args.only else list(scenarios)
    unknown = [name for name in chosen if name not in scenarios]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; known: {', '.join(scenarios)}")
    rows: list[dict[str, object]] = []
    with Instances.create() as services, _log_dir(args.log_dir) as logs:
        print(f"throwaway services: {services.database_url} {services.broker_url} (node {services.rmq_node})")
        _header()
        for name in chosen:
            began = time.monotonic()
            try:
                figures = await scenarios[name](services, Path(logs), args)
                broken = figures.violations() + _promises(name, figures)
                row = {"name": name, **figures.as_dict(), "broken": broken}
            except Exception as exc:  # one scenario's crash is its row, the suite goes on
                row = {"name": name, "scenario": name, "faults": "?", "broken": [f"crashed: {exc!r}"],
                       "traceback": traceback.format_exc()[-3000:]}
            row["elapsed_s"] = round(time.monotonic() - began, 1)
            rows.append(row)
            _print(row)
    return rows


@contextlib.contextmanager
def _log_dir(kept: str | None) -> Iterator[str]:
    """The engines' logs: a folder that is kept when given, else a temporary one."""
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        yield kept
        return
    with tempfile.TemporaryDirectory(prefix="chaos-") as logs:
        yield logs


_COLUMNS = ("scenario", "injected faults", "expected", "dup", "missing", "lost", "unsettled", "fx+/-",
            "recovery s", "verdict")


def _header() -> None:
    print(f"{_COLUMNS[0]:<24} {_COLUMNS[1]:<26} {_COLUMNS[2]:>8} {_COLUMNS[3]:>4} {_COLUMNS[4]:>7} {_COLUMNS[5]:>5} "
          f"{_COLUMNS[6]:>9} {_COLUMNS[7]:>6} {_COLUMNS[8]:>10}  {_COLUMNS[9]}", flush=True)


def _print(row: dict[str, object]) -> None:
    g = row.get
    verdict = "ok" if not row["broken"] else "BROKEN: " + "; ".join(map(str, row["broken"]))  # type: ignore[call-overload]
    effects = f"{g('effects_extra', '-')}/{g('effects_missing', '-')}"
    recovery = g("recovery_s")
    print(f"{g('scenario')!s:<24} {g('faults')!s:<26} {g('expected', '-')!s:>8} {g('duplicates', '-')!s:>4} "
          f"{g('missing', '-')!s:>7} {g('lost', '-')!s:>5} {g('unsettled', '-')!s:>9} {effects:>6} "
          f"{(f'{recovery:.2f}' if isinstance(recovery, float) else '-'):>10}  {verdict}", flush=True)
    details = g("details")
    if details:
        print(f"    {g('statuses')} {details}  ({g('elapsed_s')} s)", flush=True)
    if g("traceback"):
        print(g("traceback"), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated scenario names (default: all)")
    parser.add_argument("--rounds", type=int, default=20, help="broker kill/restart rounds")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs per churn scenario")
    parser.add_argument("--automations", type=int, default=50)
    parser.add_argument("--window-s", type=int, default=30, help="seconds the automations fire")
    parser.add_argument("--fault-s", type=float, default=10.0, help="how long a network fault lasts")
    parser.add_argument("--skew-s", type=float, default=5.0)
    parser.add_argument("--log-dir", default=os.environ.get("ACTWHEEL_CHAOS_LOG_DIR"),
                        help="keep the engines' logs in this folder (default: a temporary one, removed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = asyncio.run(_run(args))
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
    return 1 if any(row["broken"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
