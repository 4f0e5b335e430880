"""Benchmark: the timing wheel against a heapq priority queue with lazy deletion, same work, same process.

For each size N: N timers spread uniformly over one hour are scheduled, 10 % are
cancelled, another 10 % rescheduled to a new time in the hour, then the clock
advances second by second to the end. Printed per size: ns per schedule, per
cancel, per reschedule, per fired item (total advance time / items fired, so the
heap pays for skipping its dead entries there, as it would in production), and
bytes per pending timer (tracemalloc, structure built in a separate run so the
timings are not slowed by tracing). Each timing is the best of --repeat
interleaved runs. Ratios are wheel / heapq: lower is better.

    python bench/wheel.py [--sizes 10000,100000,1000000] [--repeat 3] [--json] [--seed N]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from heapq import heappop, heappush
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actwheel.wheel import TimingWheel

HOUR_MS = 3_600_000
SECOND_MS = 1_000
TARGETS = {"schedule": 1.2, "cancel": 2.0, "fire": 0.5, "bytes": 1.2}


class Timers(Protocol):
    def schedule(self, key: str, due_ms: int, item: object) -> None: ...
    def cancel(self, key: str) -> bool: ...
    def advance(self, now_ms: int) -> list[Any]: ...


class HeapTimers:
    """The baseline: the heapq documentation's priority queue with lazy deletion (entry marked removed)."""

    __slots__ = ("_counter", "_finder", "_heap")

    def __init__(self, now_ms: int = 0) -> None:
        self._heap: list[list[Any]] = []
        self._finder: dict[str, list[Any]] = {}
        self._counter = itertools.count()

    def schedule(self, key: str, due_ms: int, item: object) -> None:
        old = self._finder.pop(key, None)
        if old is not None:
            old[2] = _REMOVED
        entry = [due_ms, next(self._counter), key, item]
        self._finder[key] = entry
        heappush(self._heap, entry)

    def cancel(self, key: str) -> bool:
        entry = self._finder.pop(key, None)
        if entry is None:
            return False
        entry[2] = _REMOVED
        return True

    def advance(self, now_ms: int) -> list[Any]:
        heap, finder, fired = self._heap, self._finder, []
        while heap and heap[0][0] <= now_ms:
            _, _, key, item = heappop(heap)
            if key is not _REMOVED:
                del finder[key]
                fired.append(item)
        return fired


_REMOVED = "<removed>"


@dataclass(frozen=True)
class Workload:
    keys: list[str]
    items: list[tuple[str]]
    dues: list[int]
    cancelled: list[str]
    rescheduled: list[tuple[str, int]]


@dataclass(frozen=True)
class Figures:
    schedule_ns: float
    cancel_ns: float
    reschedule_ns: float
    fire_ns: float
    fired: int
    bytes_per_timer: float


def make_workload(size: int, seed: int) -> Workload:
    rng = random.Random(seed)
    keys = [f"automation-{i:08d}" for i in range(size)]
    for key in keys:
        hash(key)  # cache the hash now so neither structure pays for it
    chosen = rng.sample(keys, k=size // 5)
    return Workload(
        keys=keys,
        items=[(key,) for key in keys],
        dues=[rng.randrange(HOUR_MS) for _ in keys],
        cancelled=chosen[: size // 10],
        rescheduled=[(key, rng.randrange(HOUR_MS)) for key in chosen[size // 10 :]],
    )


def _timed(work: Callable[[Timers, Workload], int], timers: Timers, load: Workload) -> float:
    """Nanoseconds per unit of ``work`` (which returns how many units it did)."""
    gc.collect()
    start = time.perf_counter_ns()
    count = work(timers, load)
    return (time.perf_counter_ns() - start) / max(count, 1)


def _load(timers: Timers, load: Workload) -> int:
    schedule = timers.schedule
    for key, due, item in zip(load.keys, load.dues, load.items, strict=True):
        schedule(key, due, item)
    return len(load.keys)


def _cancel(timers: Timers, load: Workload) -> int:
    cancel = timers.cancel
    for key in load.cancelled:
        cancel(key)
    return len(load.cancelled)


def _reschedule(timers: Timers, load: Workload) -> int:
    schedule = timers.schedule
    for key, due in load.rescheduled:
        schedule(key, due, key)
    return len(load.rescheduled)


def _run_clock(timers: Timers, load: Workload) -> int:
    advance, fired = timers.advance, 0
    for now in range(SECOND_MS, HOUR_MS + SECOND_MS, SECOND_MS):
        fired += len(advance(now))
    expected = len(load.keys) - len(load.cancelled)
    if fired != expected:
        raise AssertionError(f"{type(timers).__name__} fired {fired} timers, expected {expected}")
    return fired


def bytes_per_timer(factory: Callable[[], Timers], load: Workload) -> float:
    """Traced bytes held by the structure once every timer is scheduled (keys and items excluded)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        timers = factory()
        _load(timers, load)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return used / len(load.keys)


def time_once(factory: Callable[[], Timers], load: Workload) -> dict[str, float]:
    timers = factory()
    return {
        "schedule_ns": _timed(_load, timers, load),
        "cancel_ns": _timed(_cancel, timers, load),
        "reschedule_ns": _timed(_reschedule, timers, load),
        "fire_ns": _timed(_run_clock, timers, load),
    }


def measure(factories: dict[str, Callable[[], Timers]], load: Workload, repeat: int) -> dict[str, Figures]:
    """Best of ``repeat`` interleaved runs per figure (on a shared machine the minimum is least noisy)."""
    best: dict[str, dict[str, float]] = {name: {} for name in factories}
    for _ in range(repeat):
        for name, factory in factories.items():
            for field, value in time_once(factory, load).items():
                best[name][field] = min(value, best[name].get(field, value))
    fired = len(load.keys) - len(load.cancelled)
    return {
        name: Figures(**best[name], fired=fired, bytes_per_timer=bytes_per_timer(factory, load))
        for name, factory in factories.items()
    }


def run_size(size: int, seed: int, repeat: int) -> dict[str, Any]:
    load = make_workload(size, seed)
    figures = measure({"wheel": lambda: TimingWheel(now_ms=0), "heapq": HeapTimers}, load, repeat)
    wheel, heap = figures["wheel"], figures["heapq"]
    ratios = {
        "schedule": wheel.schedule_ns / heap.schedule_ns,
        "cancel": wheel.cancel_ns / heap.cancel_ns,
        "reschedule": wheel.reschedule_ns / heap.reschedule_ns,
        "fire": wheel.fire_ns / heap.fire_ns,
        "bytes": wheel.bytes_per_timer / heap.bytes_per_timer,
    }
    met = {name: ratios[name] <= limit for name, limit in TARGETS.items()}
    return {
        "timers": size, "repeat": repeat, "wheel": asdict(wheel), "heapq": asdict(heap),
        "ratio": ratios, "target_met": met,
    }


def render(results: Sequence[dict[str, Any]]) -> str:
    rows = [
        ("ns / schedule", "schedule_ns", "schedule"),
        ("ns / cancel", "cancel_ns", "cancel"),
        ("ns / reschedule", "reschedule_ns", "reschedule"),
        ("ns / fired item", "fire_ns", "fire"),
        ("bytes / pending timer", "bytes_per_timer", "bytes"),
    ]
    lines = [f"{'':24}{'wheel':>12}{'heapq':>12}{'ratio':>9}{'target':>9}"]
    for result in results:
        lines.append(
            f"-- {result['timers']:,} timers over one hour, 10% cancelled, 10% rescheduled, 1 s steps"
            f" (best of {result['repeat']})"
        )
        for label, field, ratio in rows:
            target = TARGETS.get(ratio)
            verdict = ""
            if target is not None:
                verdict = f"<={target:.1f} {'ok' if result['target_met'][ratio] else 'MISS'}"
            lines.append(
                f"{label:24}{result['wheel'][field]:12.0f}{result['heapq'][field]:12.0f}"
                f"{result['ratio'][ratio]:9.2f}  {verdict}"
            )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated timer counts")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs per size; best figure kept")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(part) for part in args.sizes.split(",") if part.strip()]
    except ValueError:
        parser.error(f"--sizes: expected comma-separated integers, got {args.sizes!r}")
    if not args.sizes or min(args.sizes) < 10:
        parser.error("--sizes: each size must be an integer >= 10")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    results = [run_size(size, args.seed, max(args.repeat, 1)) for size in args.sizes]
    info = {"python": sys.version.split()[0], "seed": args.seed, "targets": TARGETS}
    if args.json:
        print(json.dumps({**info, "results": results}, indent=2))
    else:
        print(f"python {info['python']}, seed {args.seed}")
        print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
