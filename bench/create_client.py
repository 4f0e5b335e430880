"""A load client for ``bench/e2e.py``'s ``changes`` row over a real socket, run as its own process.

It opens ``concurrency`` keep-alive HTTP/1.1 connections to a running actwheel (``--url``; requests
written by hand: a client that costs little), prints ``ready``, waits for a line on stdin (so that its
start-up is not timed), creates ``--creates`` automations with single ``POST /v1/automations`` calls,
``concurrency`` in flight, and prints one JSON line: the wall seconds from the go line to the last
answer, the creates answered 201 and its own CPU seconds. Any other answer stops it with the status and
the body's start (exit 1): the figure is of successful creates only.

    ACTWHEEL_BENCH_TOKEN=KEY python bench/create_client.py --url http://127.0.0.1:PORT --creates 4000 --concurrency 64

The key comes from the environment, never the command line (which other users of the machine can read).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any
from urllib.parse import urlsplit

FAR = {"type": "cron", "expression": "0 0 3 * * ?"}
ACTION = {"op": "set_variable", "name": "x", "value": 1}


async def create_all(url: str, token: str, creates: int, concurrency: int) -> dict[str, Any]:
    """HTTP/1.1 written and read by hand over ``concurrency`` keep-alive connections: a client that costs
    little, so that on this 2-core box it leaves the cores to the server being measured."""
    where = urlsplit(url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    connections = [await asyncio.open_connection(host, port) for _ in range(concurrency)]
    for reader, writer in connections[:1]:  # one request answered before the go line
        writer.write(f"GET /healthz HTTP/1.1\r\nhost: {host}\r\n\r\n".encode())
        await _answer(reader, 200)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    queue = iter(range(creates))

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
        done = 0
        for i in queue:
            body = json.dumps({"name": f"s{i}", "trigger": FAR,
                               "action": {"type": "simple.op", "config": ACTION}}).encode()
            writer.write(f"POST /v1/automations HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\n"
                         f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body)
            await _answer(reader, 201)
            done += 1
        return done

    started, cpu = time.perf_counter(), time.process_time()
    done = sum(await asyncio.gather(*(worker(*c) for c in connections)))
    result = {"wall_s": time.perf_counter() - started, "creates": done, "client_cpu_s": time.process_time() - cpu}
    for _, writer in connections:
        writer.close()
    return result


async def _answer(reader: asyncio.StreamReader, expected: int) -> bytes:
    """One response's body; any status but ``expected`` stops the client with the status and the body's start."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        elif name.strip().lower() == b"transfer-encoding":  # never sent for these JSON answers: read wrong
            raise SystemExit(f"a {value.strip()!r} answer: this client reads only content-length bodies")
    body = await reader.readexactly(length)
    if status != expected:
        raise SystemExit(f"answered {status}, not {expected}: {body[:300]!r}")
    return body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--creates", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    token = os.environ["ACTWHEEL_BENCH_TOKEN"]
    print(json.dumps(asyncio.run(create_all(args.url, token, args.creates, args.concurrency))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
