"""Real ``actwheel run`` processes and the dev services they run on, for resilience tests.

- :class:`EngineProcess`: one ``actwheel run`` subprocess (its own ``HOSTNAME``, HTTP port and
  log file); :meth:`EngineProcess.wait_ready` polls ``/readyz``; :meth:`EngineProcess.kill`
  sends SIGKILL (no drain at all), :meth:`EngineProcess.stop` SIGTERM (graceful drain).
- :func:`fresh_vhost`: a RabbitMQ vhost of its own for one test (``actwheel run`` declares the
  production exchange names, so isolation has to come from the vhost), deleted afterwards.
- :func:`rabbitmq_app` / :func:`postgres_restart`: disrupt the ``ops/dev-services`` instances
  (``rabbitmqctl stop_app``/``start_app``, ``pg_ctl restart -m fast``).

Every service helper skips loudly on a dev machine where the dev services are not the ones in
use, and fails under ``CI``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from services import services_env

ROOT = Path(__file__).resolve().parents[2]
DEVDATA = Path(os.environ.get("ACTWHEEL_DEVDATA") or ROOT / ".devdata")
#: What ops/dev-services chose for this checkout (a second checkout on one machine gets its own node
#: name, ports and — as root in a folder the service users cannot traverse — its own data folder).
_CHOSEN = services_env(DEVDATA)
RMQ_NODE = _CHOSEN.get("RMQ_NODE", "actwheel@localhost")
SERVICE_DATA = Path(_CHOSEN.get("SERVICE_DATA") or DEVDATA)
RMQ_DIR = SERVICE_DATA / "rabbitmq"
RMQ_DIST_PORT = _CHOSEN.get("RMQ_DIST_PORT", "25680")
RMQ_USER = "actwheel"
PG_DATA = SERVICE_DATA / "postgres" / "data"

T = TypeVar("T")


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


# --- waiting ------------------------------------------------------------------------------

async def eventually(probe: Callable[[], Awaitable[T | None]], *, within: float, every: float = 0.2,
                     what: str = "condition") -> T:
    """Poll ``probe`` until it returns something truthy (bounded); the loop yields between probes."""
    deadline = time.monotonic() + within
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(every)


# --- actwheel run subprocesses ------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: The engines' log level (``ACTWHEEL_TEST_ENGINE_LOG``, e.g. DEBUG to see what a failing scenario did).
ENGINE_LOG_LEVEL = os.environ.get("ACTWHEEL_TEST_ENGINE_LOG", "WARNING")


class EngineProcess:
    """One ``actwheel run`` subprocess; start it again after a kill with :meth:`start`."""

    def __init__(self, instance: str, *, database: str, broker: str, log_dir: Path,
                 actors: Sequence[str] | None = None, partition_leases: bool = True,
                 env: dict[str, str] | None = None, extra_args: Sequence[str] = ()) -> None:
        self.instance = instance
        self.port = free_port()
        self._database = database
        self._broker = broker
        self._log_dir = log_dir
        self._actors = actors
        self._partition_leases = partition_leases
        self._env = env or {}
        self._extra_args = list(extra_args)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self._log_dir / f"{self.instance}.log"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "actwheel", "run", "--database", self._database, "--broker", self._broker,
               "--http", f"127.0.0.1:{self.port}", "--log-level", ENGINE_LOG_LEVEL, "--insecure-no-auth"]
        if self._actors:
            cmd += ["--actors", ",".join(self._actors)]
        if not self._partition_leases:
            cmd.append("--no-partition-leases")
        return cmd + self._extra_args

    def start(self) -> None:
        """Spawn the process (output appended to :attr:`log_path`)."""
        assert self._proc is None or self._proc.poll() is not None, f"{self.instance} is already running"
        self._close_log()
        self._log = self.log_path.open("ab")
        env = {**os.environ, "HOSTNAME": self.instance, "PYTHONUNBUFFERED": "1", **self._env}
        self._proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                      cwd=self._log_dir, start_new_session=True)
        self.starts += 1

    async def wait_ready(self, within: float = 30.0) -> None:
        """Poll ``/readyz`` until 200; fail with the log tail when the process dies or times out."""
        async with httpx.AsyncClient(timeout=2.0) as client:
            async def ready() -> bool:
                self._check_alive()
                with contextlib.suppress(httpx.HTTPError):
                    return (await client.get(f"{self.url}/readyz")).status_code == 200
                return False

            try:
                await eventually(ready, within=within, every=0.1, what=f"{self.instance} /readyz")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{self.tail()}") from None

    def _check_alive(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            code = None if self._proc is None else self._proc.returncode
            raise AssertionError(f"{self.instance} exited with {code}\n{self.tail()}")

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: the process dies mid-work, nothing is drained, nothing is acked."""
        if self.alive:
            assert self._proc is not None
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait(timeout=10)

    async def stop(self, within: float = 20.0) -> int | None:
        """SIGTERM (graceful drain), SIGKILL after ``within`` seconds; returns the exit code."""
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self._proc.wait, within)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_log()
        return self._proc.returncode

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    async def task_dump(self, within: float = 5.0) -> str:
        """SIGUSR1: the engine writes its asyncio tasks' stacks to its log (actwheel/commands/taskdump.py);
        returns that dump, for a test explaining an engine that is up yet does no work."""
        if not self.alive or self._proc is None:
            return f"({self.instance}: not running, no task dump)"
        self._proc.send_signal(signal.SIGUSR1)

        async def dumped() -> str | None:
            text = self.log_path.read_text(errors="replace")
            start = text.rfind("--- actwheel task dump")
            end = text.find("--- end of task dump ---", start)
            return text[start:end] if start >= 0 and end >= 0 else None

        try:
            return await eventually(dumped, within=within, every=0.1, what=f"{self.instance}'s task dump")
        except AssertionError as exc:
            return f"({exc})"

    def tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return f"({self.instance}: no log)"
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return f"--- {self.instance} log tail ---\n" + "\n".join(text)


@contextlib.asynccontextmanager
async def engine_processes(procs: Sequence[EngineProcess]) -> AsyncIterator[Sequence[EngineProcess]]:
    """Start ``procs``, wait until all are ready; stop (then kill) every one of them afterwards."""
    try:
        for proc in procs:
            proc.start()
        for proc in procs:
            await proc.wait_ready()
        yield procs
    finally:
        await asyncio.gather(*(proc.stop() for proc in procs), return_exceptions=True)


# --- RabbitMQ -----------------------------------------------------------------------------

def _rmq_env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(RMQ_DIR / "home"),
        "RABBITMQ_NODENAME": RMQ_NODE, "RABBITMQ_MNESIA_BASE": str(RMQ_DIR / "mnesia"),
        "RABBITMQ_LOG_BASE": str(RMQ_DIR / "log"), "RABBITMQ_CONFIG_FILE": str(RMQ_DIR / "rabbitmq.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(RMQ_DIR / "enabled_plugins"),
        "RABBITMQ_CONF_ENV_FILE": str(RMQ_DIR / "rabbitmq-env.conf"), "ERL_EPMD_ADDRESS": "127.0.0.1",
        "RABBITMQ_DIST_PORT": RMQ_DIST_PORT,
    }


def _as_owner_of(path: Path, cmd: list[str], env: dict[str, str] | None = None) -> list[str]:
    """``cmd`` run with ``env`` as the OS user owning ``path`` (ops/dev-services runs the servers
    unprivileged when it is root); ``runuser`` resets HOME, so the environment goes through ``env``."""
    with_env = ["env", *(f"{k}={v}" for k, v in (env or {}).items()), *cmd]
    if os.getuid() != 0:
        return with_env
    import pwd

    owner = pwd.getpwuid(path.stat().st_uid).pw_name
    return with_env if owner == "root" else ["runuser", "-u", owner, "--", *with_env]


def require_dev_rabbitmq() -> None:
    ctl = Path("/usr/lib/rabbitmq/bin/rabbitmqctl")
    if not ctl.exists() or not (RMQ_DIR / "home").is_dir():
        _unavailable(f"!!! the ops/dev-services RabbitMQ is not here ({RMQ_DIR}) !!! "
                     "start it with `ops/dev-services start rabbitmq`")


async def rabbitmqctl(*args: str, within: float = 60.0) -> str:
    """Run ``rabbitmqctl -n actwheel@localhost ARGS`` against the dev-services node; returns stdout."""
    require_dev_rabbitmq()
    cmd = _as_owner_of(RMQ_DIR / "home", ["/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", RMQ_NODE, "-q", *args],
                       _rmq_env())
    proc = await asyncio.create_subprocess_exec(*cmd, cwd=RMQ_DIR, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), within)
    if proc.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed ({proc.returncode}): {err.decode()[-500:]}")
    return out.decode()


@contextlib.asynccontextmanager
async def fresh_vhost(broker_url: str) -> AsyncIterator[str]:
    """A new vhost with full permissions for the test user; yields ``broker_url`` pointed at it."""
    vhost = f"t-{uuid.uuid4().hex[:10]}"
    await rabbitmqctl("add_vhost", vhost)
    try:
        await rabbitmqctl("set_permissions", "-p", vhost, RMQ_USER, ".*", ".*", ".*")
        parts = urlsplit(broker_url)
        yield urlunsplit(parts._replace(path=f"/{vhost}"))
    finally:
        await rabbitmqctl("delete_vhost", vhost)


@contextlib.asynccontextmanager
async def rabbitmq_stopped() -> AsyncIterator[None]:
    """``stop_app`` now; ``start_app`` (and wait for the node) when the block ends, whatever happens."""
    await rabbitmqctl("stop_app")
    try:
        yield
    finally:
        await rabbitmqctl("start_app")
        await rabbitmqctl("await_startup", "--timeout", "60")


# --- PostgreSQL ---------------------------------------------------------------------------

def _pg_ctl() -> str:
    candidates = [os.environ.get("ACTWHEEL_PG_BIN", ""), "/usr/lib/postgresql/15/bin",
                  *sorted((str(p) for p in Path("/usr/lib/postgresql").glob("*/bin")), reverse=True)]
    for directory in candidates:
        if directory and Path(directory, "pg_ctl").exists():
            return str(Path(directory, "pg_ctl"))
    return shutil.which("pg_ctl") or ""


def require_dev_postgres() -> str:
    pg_ctl = _pg_ctl()
    if not pg_ctl or not (PG_DATA / "PG_VERSION").exists():
        _unavailable(f"!!! the ops/dev-services PostgreSQL is not here ({PG_DATA}) !!! "
                     "start it with `ops/dev-services start postgres`")
    return pg_ctl


async def postgres_restart(within: float = 60.0) -> None:
    """``pg_ctl restart -m fast``: every connection is terminated, the server comes back."""
    pg_ctl = require_dev_postgres()
    cmd = _as_owner_of(PG_DATA, [pg_ctl, "-D", str(PG_DATA), "-l", str(PG_DATA.parent / "postgres.log"),
                                 "-m", "fast", "-w", "-t", str(int(within)), "restart"])
    proc = await asyncio.create_subprocess_exec(*cmd, cwd=PG_DATA.parent, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    out, err = await asyncio.wait_for(proc.communicate(), within + 10)
    if proc.returncode != 0:
        raise RuntimeError(f"pg_ctl restart failed ({proc.returncode}): {(out + err).decode()[-500:]}")
