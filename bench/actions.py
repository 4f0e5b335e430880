"""Benchmark: dispatch overhead per action, and ontology creates per second (single vs batched).

1. ``dispatch``: the engine's own pipeline (``Engine.pipeline``, its ``_make_context``, metrics,
   audit trail; embedded stack: SQLite store + memory bus, actors not started) around a no-op
   executor, against calling the no-op executor directly. CPU µs per dispatch from
   ``time.process_time``; target ≤ 300 µs.
2. ``ontology``: objects created per second on SQLite (a file) and PostgreSQL (a throw-away
   schema), each mode side by side with its baselines in the same process:

   - ``in-memory``            InMemoryOntology.create_objects (no IO; the ceiling of the Python work)
   - ``raw insert single``    one transaction per ``tx.ontology.create_object`` (no validation, no CDC)
   - ``raw insert batched``   --batch ``create_object`` calls in one transaction
   - ``storage single``       ``StorageOntology.create_object``: validate + insert + CDC row + ledger
   - ``storage batched``      ``StorageOntology.create_objects(--batch)`` with an idempotency key

   Target: ≥ 20k objects/s batched on PostgreSQL. Each figure is the best of --repeat runs.

    python bench/actions.py [--dispatches 3000] [--singles 300] [--objects 10000] [--batch 1000]
                            [--repeat 2] [--postgres URL] [--no-postgres] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg

from actwheel.actions.base import ActionContext, ActionDefinition, ActionResult
from actwheel.actions.ontology_port import InMemoryOntology, NewObject, ObjectType
from actwheel.actions.pipeline import DispatchRequest
from actwheel.actions.registry import ActionRegistry
from actwheel.actions.storage_ontology import StorageOntology
from actwheel.bus.memory import MemoryBus
from actwheel.bus.topology import DEFAULT_TOPOLOGY
from actwheel.clock import SystemClock
from actwheel.engine import Engine
from actwheel.errors import StorageUnavailable
from actwheel.events import EventFactory
from actwheel.logs import configure_logging
from actwheel.settings import Settings
from actwheel.storage import Store, open_store

DEFAULT_POSTGRES = "postgresql://actwheel:actwheel@127.0.0.1:54329/actwheel"
ORDER = ObjectType(
    name="Order", properties={"sku": {"type": "string"}, "qty": {"type": "integer"}}, required=("sku",)
)


@dataclass
class Figure:
    bench: str
    backend: str
    mode: str
    count: int
    seconds: float
    per_second: float
    cpu_us_each: float


class NoOp(ActionDefinition):
    type = "bench.noop"
    display_name = "No-op"
    description = "Does nothing (benchmark)."
    config_schema: ClassVar[dict[str, Any]] = {"type": "object"}

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        return ActionResult.ok("nothing")


async def timed(
    bench: str, backend: str, mode: str, count: int, work: Callable[[], Awaitable[None]]
) -> Figure:
    wall, cpu = time.perf_counter(), time.process_time()
    await work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return Figure(
        bench, backend, mode, count, round(wall, 4), round(count / wall), round(cpu / count * 1e6, 1)
    )


def keep_best(best: dict[tuple[str, str], Figure], figures: Sequence[Figure]) -> None:
    for f in figures:
        key = (f.backend, f.mode)
        if key not in best or f.cpu_us_each < best[key].cpu_us_each:
            best[key] = f


# --- 1. dispatch overhead ---------------------------------------------------------------------


async def dispatch_round(count: int, tmp: Path) -> list[Figure]:
    registry = ActionRegistry()
    noop = registry.register(NoOp())
    settings = Settings(database_url=f"sqlite:///{tmp}/dispatch.db", instance="bench")
    engine = Engine(settings, bus=MemoryBus(), registry=registry)
    requests = [
        DispatchRequest(
            run_id=f"r{i}", owner_id="bench", action_type=NoOp.type, config={}, scopes=frozenset()
        )
        for i in range(count)
    ]
    ctx = ActionContext(run_id="direct", owner_id="bench")

    async def through_pipeline() -> None:
        for request in requests:
            outcome = await engine.pipeline.dispatch(request)
            assert outcome.status == "SUCCEEDED"

    async def executor_alone() -> None:
        for _ in range(count):
            await noop.execute({}, ctx)

    return [
        await timed("dispatch", "embedded", "executor alone (baseline)", count, executor_alone),
        await timed("dispatch", "embedded", "pipeline around no-op", count, through_pipeline),
    ]


# --- 2. ontology creates ----------------------------------------------------------------------


def orders(count: int, tag: str) -> list[NewObject]:
    return [
        NewObject(object_type="Order", properties={"sku": f"{tag}-{i}", "qty": i % 7}) for i in range(count)
    ]


async def ontology_round(store: Store, backend: str, args: argparse.Namespace) -> list[Figure]:
    ontology = StorageOntology(
        store, EventFactory(topology=DEFAULT_TOPOLOGY, clock=SystemClock(), source="bench")
    )
    await ontology.put_type(ORDER)
    singles, objects, batch = args.singles, args.objects, args.batch
    memory = InMemoryOntology()
    await memory.put_type(ORDER)
    figures = [
        await timed(
            "ontology",
            backend,
            f"in-memory batched[{batch}]",
            objects,
            lambda: in_batches(memory.create_objects, orders(objects, "m"), batch),
        )
    ]
    figures.append(
        await timed(
            "ontology",
            backend,
            "raw insert single",
            singles,
            lambda: raw_inserts(store, orders(singles, "rs"), 1),
        )
    )
    figures.append(
        await timed(
            "ontology",
            backend,
            f"raw insert batched[{batch}]",
            objects,
            lambda: raw_inserts(store, orders(objects, "rb"), batch),
        )
    )
    figures.append(
        await timed(
            "ontology",
            backend,
            "storage single",
            singles,
            lambda: storage_singles(ontology, orders(singles, "ss")),
        )
    )
    figures.append(
        await timed(
            "ontology",
            backend,
            f"storage batched[{batch}]",
            objects,
            lambda: in_batches(keyed(ontology), orders(objects, "sb"), batch),
        )
    )
    return figures


def keyed(ontology: StorageOntology) -> Callable[[Sequence[NewObject]], Awaitable[Any]]:
    async def create(chunk: Sequence[NewObject]) -> Any:
        return await ontology.create_objects(chunk, idempotency_key=f"bench:{uuid.uuid4().hex}")

    return create


async def in_batches(
    create: Callable[[Sequence[NewObject]], Awaitable[Any]], news: list[NewObject], size: int
) -> None:
    for start in range(0, len(news), size):
        await create(news[start : start + size])


async def raw_inserts(store: Store, news: list[NewObject], size: int) -> None:
    for start in range(0, len(news), size):
        async with store.transaction() as tx:
            for new in news[start : start + size]:
                await tx.ontology.create_object(new.object_type, new.properties)


async def storage_singles(ontology: StorageOntology, news: list[NewObject]) -> None:
    for new in news:
        await ontology.create_object(new.object_type, new.properties, idempotency_key=uuid.uuid4().hex)


@asynccontextmanager
async def postgres_schema(url: str) -> AsyncIterator[str]:
    """``url`` bound to a fresh schema, dropped afterwards."""
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(url, timeout=5)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        separator = "&" if "?" in url else "?"
        yield f"{url}{separator}search_path={schema}"
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


@asynccontextmanager
async def started(url: str) -> AsyncIterator[Store]:
    store = open_store(url)
    await store.start()
    try:
        yield store
    finally:
        await store.stop()


async def ontology_backend(backend: str, url: str, args: argparse.Namespace) -> list[Figure]:
    best: dict[tuple[str, str], Figure] = {}
    for round_ in range(args.repeat):
        if backend == "postgres":
            async with postgres_schema(url) as schema_url, started(schema_url) as store:
                keep_best(best, await ontology_round(store, backend, args))
        else:
            async with started(f"sqlite:///{url}/ontology-{round_}.db") as store:
                keep_best(best, await ontology_round(store, backend, args))
    return list(best.values())


# --- main -------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dispatches", type=int, default=3000, help="dispatches per run")
    parser.add_argument("--singles", type=int, default=300, help="objects created one per transaction")
    parser.add_argument("--objects", type=int, default=10_000, help="objects created in batches")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="PostgreSQL URL")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    return parser.parse_args(argv)


async def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("WARNING")
    skipped: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        best: dict[tuple[str, str], Figure] = {}
        for _ in range(args.repeat):
            keep_best(best, await dispatch_round(args.dispatches, Path(tmp)))
        figures = list(best.values())
        figures += await ontology_backend("sqlite", tmp, args)
    if not args.no_postgres:
        try:
            figures += await ontology_backend("postgres", args.postgres, args)
        except (OSError, StorageUnavailable, asyncpg.PostgresError) as exc:
            skipped.append(f"postgres skipped: {type(exc).__name__}: {exc}")
    report(figures, skipped, args)
    return 0


def report(figures: list[Figure], skipped: list[str], args: argparse.Namespace) -> None:
    info = {k: getattr(args, k) for k in ("dispatches", "singles", "objects", "batch", "repeat")}
    if args.json:
        print(json.dumps({**info, "skipped": skipped, "results": [asdict(f) for f in figures]}, indent=2))
        return
    print(f"actions bench, best of {args.repeat}")
    print(f"{'bench':<9} {'backend':<9} {'mode':<28} {'count':>7} {'per s':>10} {'cpu µs each':>12}")
    for f in figures:
        print(
            f"{f.bench:<9} {f.backend:<9} {f.mode:<28} {f.count:>7} {f.per_second:>10,} {f.cpu_us_each:>12}"
        )
    for line in skipped:
        print(line)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
