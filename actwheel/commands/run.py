"""``actwheel run``: the engine and its HTTP server, until SIGTERM or SIGINT (then drain)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import uvicorn

from actwheel.api.app import create_app
from actwheel.commands.taskdump import install_task_dump
from actwheel.commands.workers import HTTP_FD_ENV, WorkerPool, check_scalable, listening_socket
from actwheel.engine import Engine
from actwheel.errors import ActwheelError
from actwheel.logs import configure_logging
from actwheel.mcp.http import endpoint_of
from actwheel.redact import redact_url
from actwheel.settings import ALL_ROLES, Settings, parse_http

__all__ = ["GC_GEN0", "LOOPS", "loop_factory", "register", "serve", "tune_gc"]

#: ``ACTWHEEL_LOOP``: ``asyncio`` (the default: uvloop measured no better here, docs/benchmarks.md),
#: ``auto`` (uvloop when installed — the ``fast`` extra —, else the stdlib loop) or ``uvloop``.
LOOPS = ("auto", "asyncio", "uvloop")
#: Generation 0's threshold after start-up (``ACTWHEEL_GC_GEN0``; Python's default is 700): with
#: gc.freeze() it cut the CPU per run by ~30 % in bench/e2e.py's sustained scenario.
GC_GEN0 = 50_000


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run", help="start the engine (embedded default: SQLite file + in-process bus)")
    parser.add_argument("--broker", help="amqp://user:pass@host:port/vhost (env ACTWHEEL_BROKER_URL); "
                                         "default: the in-process bus")
    parser.add_argument("--database", help="postgresql://… or sqlite:///path (env ACTWHEEL_DATABASE_URL); "
                                           "default: sqlite:///actwheel.db")
    parser.add_argument("--http", default="127.0.0.1:8080", help="HOST:PORT to serve the API on")
    parser.add_argument("--actors", help="comma-separated roles to run: " + ",".join(ALL_ROLES))
    parser.add_argument("--no-partition-leases", action="store_true",
                        help="every ticker loads every automation (correct, slower)")
    parser.add_argument("--insecure-no-auth", action="store_true",
                        help="LOCAL EXPERIMENTS ONLY: no API keys, every request is the local owner with every "
                             "scope (refused unless --http is a loopback address; env ACTWHEEL_INSECURE_NO_AUTH)")
    parser.add_argument("--workers", type=int, default=1,
                        help="engine processes on this machine, sharing the --http socket (more than 1 needs "
                             "PostgreSQL and RabbitMQ; see docs/operations.md)")
    parser.add_argument("--log-level", default="INFO")
    parser.set_defaults(handler=_run)


def _worker_argv(args: argparse.Namespace) -> list[str]:
    """The options a worker of ``--workers`` runs with: this command's, without ``--workers``."""
    argv = ["--http", args.http, "--log-level", args.log_level]
    for flag, value in (("--broker", args.broker), ("--database", args.database), ("--actors", args.actors)):
        if value is not None:
            argv += [flag, value]
    argv += ["--no-partition-leases"] if args.no_partition_leases else []
    argv += ["--insecure-no-auth"] if args.insecure_no_auth else []
    return argv


def _run(args: argparse.Namespace) -> int:
    try:
        configure_logging(args.log_level)
        host, port = parse_http(args.http)
        settings = Settings.from_env(
            database_url=args.database, broker_url=args.broker, http_host=host, http_port=port,
            roles=tuple(r.strip() for r in args.actors.split(",") if r.strip()) if args.actors is not None else None,
            partition_leases=False if args.no_partition_leases else None,
            auth=False if args.insecure_no_auth else None)
        factory = loop_factory(os.environ.get("ACTWHEEL_LOOP", "asyncio"))
        check_scalable(settings, args.workers)
        if args.workers > 1:
            sock = listening_socket(host, port)
    except ActwheelError as exc:
        print(f"actwheel run: {exc}", file=sys.stderr)
        return 2
    if args.workers > 1:
        with sock:
            pool = WorkerPool(_worker_argv(args), args.workers, settings.instance, sock, grace_s=settings.grace_s + 10)
            return pool.run()
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(serve(settings))


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop to run on: uvloop's where asked (or ``auto`` and installed), else the stdlib's
    (``None``). Speed only: both run the same code.

    :raises ActwheelError: ``uvloop`` asked and not installed, or an unknown choice
    """
    if choice not in LOOPS:
        raise ActwheelError(f"ACTWHEEL_LOOP={choice!r}: one of {', '.join(LOOPS)}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ActwheelError("ACTWHEEL_LOOP=uvloop: uvloop is not installed "
                                "(pip install 'actwheel[fast]')") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def tune_gc(threshold0: int = 0) -> None:
    """After start-up: move everything allocated so far (modules, registries, parsed schemas) out of the
    collector's view (``gc.freeze``), so later collections do not walk it again; ``threshold0`` > 0
    also sets generation 0's threshold (``ACTWHEEL_GC_GEN0``). Speed only."""
    gc.collect()
    gc.freeze()
    if threshold0 > 0:
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(threshold0, gen1, gen2)


async def serve(settings: Settings) -> int:
    """Run until a stop signal; drain in order. Returns the process exit code."""
    engine = Engine(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    install_task_dump(loop)
    app = create_app(engine.control)
    inherited = os.environ.get(HTTP_FD_ENV)  # a worker of --workers: the parent's listening socket
    where: dict[str, Any] = {"fd": int(inherited)} if inherited else {"host": settings.http_host,
                                                                      "port": settings.http_port}
    server = uvicorn.Server(uvicorn.Config(app, **where, log_level="warning", lifespan="off", access_log=False))
    http: asyncio.Task[None] | None = None
    mcp = AsyncExitStack()
    try:
        await engine.start()
        if os.environ.get("ACTWHEEL_GC_FREEZE", "1") != "0":
            tune_gc(int(os.environ.get("ACTWHEEL_GC_GEN0", str(GC_GEN0)) or 0))
        # uvicorn runs with lifespan off, so nothing else starts the MCP session manager: /mcp would
        # fail every request (it answers 503 until this point, and again once it is left).
        await mcp.enter_async_context(endpoint_of(app).running())
        http = asyncio.create_task(server.serve(), name="http")
        print(f"actwheel {settings.instance} listening on http://{settings.http_host}:{settings.http_port} "
              f"(database {redact_url(settings.database_url)}, broker {redact_url(settings.broker_url)}, "
              f"actors {','.join(settings.roles)}, {_auth_line(settings)})", flush=True)
        await _wait_first(stop.wait(), asyncio.shield(http))
    finally:
        await engine.control.stream.close()  # open live streams end now: they must not hold the server up
        server.should_exit = True  # the API stops taking requests first, then the actors drain
        await mcp.aclose()  # open MCP sessions end (their SSE streams with them): they must not hold the server up
        if http is not None:
            await asyncio.wait([http], timeout=5)
        await engine.stop()
    return 0


def _auth_line(settings: Settings) -> str:
    if not settings.auth:
        return "AUTHENTICATION DISABLED (--insecure-no-auth)"
    return f"API keys required; bootstrap admin key file {settings.admin_key_path()}"


async def _wait_first(*aws: Any) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        if not task.done():
            task.cancel()


