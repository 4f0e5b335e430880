"""Benchmark: what authentication costs an HTTP request, and how fast a revocation bites.

1. ``auth``: requests/s of ``GET /v1/automations/{id}`` with a bearer API key against the same
   route with authentication switched off (``Settings(auth=False)``), in the same run. Two engines
   (embedded stack, one SQLite file, the ``metrics`` role only) each behind a real uvicorn server on
   loopback, in this process; the load comes from a child process per burst (an ``httpx.AsyncClient``,
   ``--concurrency`` requests in flight, keep-alive), so the client's CPU is not the server's. Rounds
   alternate which server goes first, after one warm-up round per server; the figure per server is the
   median of its rounds, and ``ratio`` = authenticated / open (target ≥ 0.9). Every response is checked
   (200, the automation's id): a burst with an error fails the benchmark.
   ``authenticate_us`` is the in-process cost of one cached ``Authenticator.authenticate`` call, for scale.
2. ``asgi_cpu``: the same two apps called as ASGI in this process (no socket, no client, no uvicorn),
   alternating, CPU µs per request by ``time.process_time`` (this process's threads, the SQLite
   driver's included): the server's own cost without HTTP parsing, so the auth share is larger here
   than through a server. It moves with the box too (caches, frequency); the target names the
   server ratio above.
3. ``revocation``: a key in use on the authenticated server is revoked from *another* store on the same
   database (as ``actwheel keys revoke`` or another instance does, so this instance's cache is not told);
   the time from that commit until the server answers 401, polling every ``--poll-ms``. Bound: the
   authenticator's 1 s row cache (+ one poll interval).

    python bench/api.py [--seconds 2] [--rounds 10] [--concurrency 8] [--revocations 5] [--poll-ms 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from typing import TYPE_CHECKING

import httpx

# The load generator (this file run with --client in a child process) needs httpx alone: actwheel and
# uvicorn are imported by the functions of the parent, so a child starts fast and loads nothing else.
if TYPE_CHECKING:
    import uvicorn

    from actwheel.engine import Engine
    from actwheel.settings import Settings

ADMIN = {"owner_id": "admin", "scopes": frozenset({"*"}), "principal_id": "bench", "kind": "user"}
OWNER = "bench"
AUTOMATION = {"name": "bench", "trigger": {"type": "once", "at": "2099-01-01T00:00:00Z"},
              "action": {"type": "simple.op", "config": {"op": "log", "message": "never"}}}


@dataclass
class Served:
    name: str
    engine: Engine
    server: uvicorn.Server
    task: asyncio.Task[None]
    url: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _serve(name: str, settings: Settings) -> Served:
    import uvicorn

    from actwheel.api.app import create_app
    from actwheel.engine import Engine

    engine = Engine(settings)
    await engine.start()
    server = uvicorn.Server(uvicorn.Config(create_app(engine.control), host=settings.http_host,
                                           port=settings.http_port, log_level="warning", lifespan="off",
                                           access_log=False))
    task = asyncio.create_task(server.serve(), name=f"http-{name}")
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    return Served(name, engine, server, task, f"http://{settings.http_host}:{settings.http_port}")


async def _stop(served: Served) -> None:
    served.server.should_exit = True
    await asyncio.wait([served.task], timeout=5)
    await served.engine.stop()


@contextlib.asynccontextmanager
async def _servers(folder: Path) -> AsyncIterator[tuple[Served, Served, str, str]]:
    """(authenticated, open, automation id, a key that reads it) on one SQLite file."""
    from actwheel.service.caller import Caller
    from actwheel.settings import Settings

    admin = Caller(**ADMIN)
    database = f"sqlite:///{folder / 'api.db'}"
    common: dict[str, Any] = {"database_url": database, "roles": ("metrics",), "http_host": "127.0.0.1",
                              "admin_key_file": str(folder / "actwheel-admin.key"), "local_owner": OWNER}
    secured = await _serve("auth", Settings(auth=True, http_port=_free_port(), **common))
    opened: Served | None = None
    try:
        control = secured.engine.control
        await control.principals.create(admin, {"id": OWNER, "kind": "user", "scopes": ["automation:*", "key:*"]})
        owner = Caller(OWNER, frozenset({"automation:*"}), OWNER, "user")
        automation = await control.automations.create(owner, AUTOMATION)
        minted = await control.keys.create(admin, {"principal_id": OWNER, "name": "bench",
                                                   "scopes": ["automation:read"]})
        opened = await _serve("open", Settings(auth=False, http_port=_free_port(), **common))
        yield secured, opened, automation.id, minted.token
    finally:
        if opened is not None:
            await _stop(opened)
        await _stop(secured)


# --- load: one child process per burst --------------------------------------------------------


async def _burst(url: str, token: str | None, seconds: float, concurrency: int) -> dict[str, Any]:
    """Run ``_client`` in a child process against ``url``; its figures (the key travels in the environment)."""
    env = {**os.environ, "ACTWHEEL_TOKEN": token or ""}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--client", url, "--seconds", str(seconds), "--concurrency", str(concurrency),
        env=env, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"client against {url} exited {proc.returncode}")
    result: dict[str, Any] = json.loads(out)
    return result


async def _client(url: str, seconds: float, concurrency: int) -> dict[str, Any]:
    token = os.environ.get("ACTWHEEL_TOKEN") or None
    headers = {"authorization": f"Bearer {token}"} if token else {}
    expected_id = url.rsplit("/", 1)[1]
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    counts = {"ok": 0, "errors": 0}
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=10) as client:
        for _ in range(concurrency):  # open the connections before the clock starts
            await client.get(url)
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            while time.perf_counter() < deadline:
                response = await client.get(url)
                ok = response.status_code == 200 and response.json()["id"] == expected_id
                counts["ok" if ok else "errors"] += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {**counts, "elapsed_s": elapsed, "rate": counts["ok"] / elapsed}


async def _throughput(secured: Served, opened: Served, automation_id: str, token: str,
                      args: argparse.Namespace) -> dict[str, Any]:
    path = f"/v1/automations/{automation_id}"
    targets = {"auth": (secured.url + path, token), "open": (opened.url + path, None)}
    for url, key in targets.values():  # warm-up, discarded
        await _burst(url, key, min(1.0, args.seconds), args.concurrency)
    rates: dict[str, list[float]] = {"auth": [], "open": []}
    for round_no in range(args.rounds):
        order = ("auth", "open") if round_no % 2 == 0 else ("open", "auth")
        for name in order:
            url, key = targets[name]
            figures = await _burst(url, key, args.seconds, args.concurrency)
            if figures["errors"]:
                raise RuntimeError(f"{name}: {figures['errors']} wrong answers in round {round_no}")
            rates[name].append(figures["rate"])
    auth_rate, open_rate = statistics.median(rates["auth"]), statistics.median(rates["open"])
    paired = [a / o for a, o in zip(rates["auth"], rates["open"], strict=True)]
    return {"auth_rps": auth_rate, "open_rps": open_rate, "ratio": statistics.median(paired),
            "ratio_of_medians": auth_rate / open_rate, "round_ratios": paired, "rounds": rates,
            "target_ratio": 0.9}


async def _asgi_cpu(secured: Served, opened: Served, automation_id: str, token: str, rounds: int,
                    requests: int = 300) -> dict[str, Any]:
    """CPU µs per request of each app called as ASGI in this process (no socket, no client), alternating;
    ``time.process_time`` does not count what other processes on the machine take."""
    from actwheel.api.app import create_app

    path = f"/v1/automations/{automation_id}"
    apps = {"auth": (create_app(secured.engine.control), [(b"authorization", f"Bearer {token}".encode())]),
            "open": (create_app(opened.engine.control), [])}
    cpu: dict[str, list[float]] = {"auth": [], "open": []}
    for round_no in range(rounds + 1):
        for name in ("auth", "open") if round_no % 2 == 0 else ("open", "auth"):
            app, headers = apps[name]
            started = time.process_time()
            for _ in range(requests):
                await _asgi_get(app, path, headers)
            if round_no:  # round 0 warms up
                cpu[name].append((time.process_time() - started) / requests * 1e6)
    auth_us, open_us = statistics.median(cpu["auth"]), statistics.median(cpu["open"])
    return {"auth_cpu_us": auth_us, "open_cpu_us": open_us, "ratio": open_us / auth_us, "rounds": cpu}


async def _asgi_get(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> None:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"bench"), *headers], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    if status != [200]:
        raise RuntimeError(f"ASGI GET {path} answered {status}")


async def _authenticate_cost(secured: Served, token: str, calls: int = 20_000) -> float:
    """µs per cached ``authenticate`` (the work the guard adds once the key's rows are cached)."""
    from actwheel.auth.authenticator import Authenticator
    from actwheel.clock import SystemClock

    authenticator = Authenticator(store=secured.engine.store, clock=SystemClock(), cache_ttl_s=3600)
    await authenticator.authenticate(token)
    started = time.perf_counter()
    for _ in range(calls):
        await authenticator.authenticate(token)
    return (time.perf_counter() - started) / calls * 1e6


# --- revocation -------------------------------------------------------------------------------


async def _revocations(secured: Served, automation_id: str, args: argparse.Namespace) -> dict[str, Any]:
    from actwheel.auth.authenticator import CACHE_TTL_S
    from actwheel.clock import SystemClock
    from actwheel.service.caller import Caller
    from actwheel.service.identity import KeyService
    from actwheel.storage import open_store

    admin = Caller(**ADMIN)
    url = f"{secured.url}/v1/automations/{automation_id}"
    other = open_store(secured.engine.settings.database_url, clock=SystemClock())  # "another instance"
    await other.start()
    delays: list[float] = []
    try:
        keys = KeyService(store=other, clock=SystemClock())
        async with httpx.AsyncClient(timeout=10) as client:
            for _ in range(args.revocations):
                minted = await keys.create(admin, {"principal_id": OWNER, "name": "revoked",
                                                   "scopes": ["automation:read"]})
                headers = {"authorization": f"Bearer {minted.token}"}
                if (await client.get(url, headers=headers)).status_code != 200:
                    raise RuntimeError("a fresh key was refused")
                await keys.revoke(admin, minted.key.id)
                revoked_at = time.perf_counter()
                delays.append(await _until_refused(client, url, headers, args.poll_ms / 1000) - revoked_at)
    finally:
        await other.stop()
    return {"samples": len(delays), "max_s": max(delays), "median_s": statistics.median(delays),
            "bound_s": CACHE_TTL_S, "poll_ms": args.poll_ms,
            "within_bound": max(delays) <= CACHE_TTL_S + args.poll_ms / 1000 + 0.05}


async def _until_refused(client: httpx.AsyncClient, url: str, headers: dict[str, str], poll_s: float) -> float:
    """Poll ``url`` until it answers 401; the ``perf_counter`` of that answer."""
    while True:
        status = (await client.get(url, headers=headers)).status_code
        if status == 401:
            return time.perf_counter()
        if status != 200:
            raise RuntimeError(f"a revoked key got {status}, not 401")
        await asyncio.sleep(poll_s)


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="actwheel-bench-api-") as folder:
        async with _servers(Path(folder)) as (secured, opened, automation_id, token):
            throughput = await _throughput(secured, opened, automation_id, token, args)
            asgi = await _asgi_cpu(secured, opened, automation_id, token, args.rounds)
            cost = await _authenticate_cost(secured, token)
            revocation = await _revocations(secured, automation_id, args)
    return {"transport": "uvicorn on 127.0.0.1 (h11, asyncio loop) in this process; httpx client in a child "
                         "process per burst", "route": "GET /v1/automations/{id}", "seconds": args.seconds,
            "rounds": args.rounds, "concurrency": args.concurrency, "throughput": throughput,
            "asgi_cpu": asgi, "authenticate_us": cost, "revocation": revocation}


def _print(result: dict[str, Any]) -> None:
    t, r = result["throughput"], result["revocation"]
    print(f"{result['route']} — {result['transport']}")
    print(f"  {result['rounds']} rounds x {result['seconds']} s each, {result['concurrency']} in flight")
    for name, label in (("auth", "authenticated"), ("open", "auth off")):
        rounds = ", ".join(f"{x:.0f}" for x in t["rounds"][name])
        print(f"  {label:<15} {t[name + '_rps']:8.0f} req/s  (rounds: {rounds})")
    print(f"  ratio           {t['ratio']:8.3f}x       (median of the paired rounds; target >= {t['target_ratio']}; "
          f"per round: {', '.join(f'{x:.2f}' for x in t['round_ratios'])}; of the medians {t['ratio_of_medians']:.3f})")
    a = result["asgi_cpu"]
    print(f"  in-process ASGI, CPU per request: authenticated {a['auth_cpu_us']:.0f} us, auth off "
          f"{a['open_cpu_us']:.0f} us: ratio {a['ratio']:.3f}x")
    print(f"  one cached authenticate(): {result['authenticate_us']:.1f} us")
    print(f"revocation from another store: refused after median {r['median_s']:.3f} s, max {r['max_s']:.3f} s "
          f"({r['samples']} keys, poll {r['poll_ms']} ms; bound {r['bound_s']} s: "
          f"{'honoured' if r['within_bound'] else 'MISSED'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one burst")
    parser.add_argument("--rounds", type=int, default=10, help="measured bursts per server, alternating")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--revocations", type=int, default=5)
    parser.add_argument("--poll-ms", type=float, default=20.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--client", help=argparse.SUPPRESS)  # internal: be the load generator for this URL
    args = parser.parse_args()
    if args.client:
        print(json.dumps(asyncio.run(_client(args.client, args.seconds, args.concurrency))))
        return
    from actwheel.logs import configure_logging

    configure_logging("WARNING")
    result = asyncio.run(_main(args))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)


if __name__ == "__main__":
    main()
