"""Benchmark: bus publish throughput, one confirm at a time vs publish_many, and consume throughput.

For each backend (memory, and RabbitMQ when reachable), on a throw-away prefixed topology
with one durable quorum queue bound to ``bench.#``:

- ``publish``: N envelopes, each ``await bus.publish(...)`` (waits for its confirm);
- ``publish_many``: the same N in batches of --batch, confirms awaited together;
- ``consume``: drain the 2N queued messages with one consumer (prefetch --prefetch), acking each.

Printed per mode: messages per second (wall) and client CPU microseconds per message
(process time / N). Each figure is the best of --repeat runs.

    python bench/bus.py [--count 5000] [--batch 500] [--prefetch 200] [--repeat 2]
                        [--url amqp://actwheel:actwheel@127.0.0.1:56720/] [--no-rabbitmq] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aio_pika

from actwheel.bus import AmqpBus, Bus, BusUnavailable, Delivery, Envelope, MemoryBus, QueueSpec, Topology

DEFAULT_URL = "amqp://actwheel:actwheel@127.0.0.1:56720/"


@dataclass
class Figure:
    backend: str
    mode: str
    messages: int
    seconds: float
    per_second: float
    cpu_us_per_message: float


async def timed(backend: str, mode: str, count: int, work: Callable[[], Awaitable[None]]) -> Figure:
    wall, cpu = time.perf_counter(), time.process_time()
    await work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return Figure(backend, mode, count, round(wall, 4), round(count / wall), round(cpu / count * 1e6, 1))


def envelopes(count: int) -> list[Envelope]:
    return [Envelope.new(type="bench.happened", data={"n": i, "automation_id": f"a-{i}"}, source="bench")
            for i in range(count)]


async def one_round(bus: Bus, backend: str, args: argparse.Namespace) -> list[Figure]:
    queue = f"{bus.topology.events}.bench-{uuid.uuid4().hex[:6]}"
    await bus.declare_queue(QueueSpec(queue, ((bus.topology.events, "bench.#"),), max_length=None))
    singles, batched = envelopes(args.count), envelopes(args.count)
    exchange = bus.topology.events

    async def publish_each() -> None:
        for env in singles:
            await bus.publish(exchange, "bench.one", env)

    async def publish_batched() -> None:
        for start in range(0, len(batched), args.batch):
            chunk = batched[start:start + args.batch]
            await bus.publish_many(exchange, [("bench.many", env) for env in chunk])

    figures = [await timed(backend, "publish", args.count, publish_each),
               await timed(backend, f"publish_many[{args.batch}]", args.count, publish_batched)]
    figures.append(await timed(backend, f"consume[prefetch {args.prefetch}]", 2 * args.count,
                               lambda: drain(bus, queue, 2 * args.count, args.prefetch)))
    return figures


async def drain(bus: Bus, queue: str, count: int, prefetch: int) -> None:
    done = asyncio.Event()
    seen = 0

    async def handle(delivery: Delivery) -> None:
        nonlocal seen
        seen += 1
        if seen == count:
            done.set()

    subscription = await bus.consume(queue, handle, prefetch=prefetch)
    await asyncio.wait_for(done.wait(), timeout=300)
    await subscription.cancel(grace=10)


async def run_backend(backend: str, args: argparse.Namespace) -> list[Figure]:
    best: dict[str, Figure] = {}
    for _ in range(args.repeat):
        topology = Topology.prefixed(f"bench-{uuid.uuid4().hex[:8]}.")
        bus: Bus = MemoryBus(topology=topology) if backend == "memory" else AmqpBus(args.url, topology=topology)
        await bus.start()
        try:
            for figure in await one_round(bus, backend, args):
                if figure.mode not in best or figure.per_second > best[figure.mode].per_second:
                    best[figure.mode] = figure
        finally:
            await bus.stop(grace=5)
            if backend == "rabbitmq":
                await cleanup(args.url, topology)
    return list(best.values())


async def cleanup(url: str, topology: Topology) -> None:
    connection = await aio_pika.connect(url, timeout=5)
    async with connection:
        channel = await connection.channel()
        for name in (topology.dead_letters,):
            with contextlib.suppress(Exception):
                await channel.queue_delete(name)
        for exchange in (*topology.exchanges, topology.dlx):
            with contextlib.suppress(Exception):
                await channel.exchange_delete(exchange)


async def bench_queues_cleanup(url: str, names: Sequence[str]) -> None:
    connection = await aio_pika.connect(url, timeout=5)
    async with connection:
        channel = await connection.channel()
        for name in names:
            with contextlib.suppress(Exception):
                await channel.queue_delete(name)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=5000, help="messages per mode")
    parser.add_argument("--batch", type=int, default=500, help="publish_many batch size")
    parser.add_argument("--prefetch", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--url", default=DEFAULT_URL, help="RabbitMQ URL")
    parser.add_argument("--no-rabbitmq", action="store_true", help="memory only")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    return parser.parse_args(argv)


async def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    figures = await run_backend("memory", args)
    skipped = ""
    if not args.no_rabbitmq:
        try:
            figures += await run_backend("rabbitmq", args)
        except BusUnavailable as exc:
            skipped = f"rabbitmq skipped: {exc}"
    report(figures, skipped, args)
    return 0


def report(figures: list[Figure], skipped: str, args: argparse.Namespace) -> None:
    info: dict[str, Any] = {"count": args.count, "batch": args.batch, "repeat": args.repeat}
    if args.json:
        print(json.dumps({**info, "skipped": skipped or None, "results": [asdict(f) for f in figures]}, indent=2))
        return
    print(f"bus publish/consume, {args.count} messages per mode, best of {args.repeat}")
    print(f"{'backend':<10} {'mode':<22} {'msg/s':>10} {'cpu µs/msg':>11}")
    for f in figures:
        print(f"{f.backend:<10} {f.mode:<22} {f.per_second:>10,} {f.cpu_us_per_message:>11}")
    if skipped:
        print(skipped)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
