"""Throwaway PostgreSQL and RabbitMQ servers for destructive scenarios: never the shared dev services.

``ops/dev-services`` does the work. It reads its ports, RabbitMQ node name and data folder from
``$ACTWHEEL_DEVDATA/services.env`` when that file exists, so a fresh folder with a ``services.env``
written here (free ports, a node name of its own) gives servers nobody else uses, run as the
``postgres`` / ``rabbitmq`` OS users when root, exactly as in CI. They are killed (SIGKILL), started
again and stopped for good through the same script; the folder is removed at the end.

::

    with Instances.create() as services:        # both servers up
        services.database_url, services.broker_url
        services.kill_broker(); services.start("rabbitmq")
        services.consumers()                    # rabbitmqctl list_consumers: queue name -> consumers

Everything here is synchronous (subprocesses); async callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEV_SERVICES = ROOT / "ops" / "dev-services"
RMQ_CTL = Path("/usr/lib/rabbitmq/bin/rabbitmqctl")


def unavailable(message: str) -> None:
    """Skip loudly on a dev machine; fail under ``CI`` (where everything here must work)."""
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


class ServiceError(RuntimeError):
    """ops/dev-services or rabbitmqctl failed; the message carries its output."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Instances:
    """One throwaway PostgreSQL + RabbitMQ pair in ``devdata`` (see the module docstring)."""

    devdata: Path
    pg_port: int
    rmq_port: int
    rmq_dist_port: int
    rmq_node: str
    #: the ``rabbitmq-server`` launchers of :meth:`restart_broker`, reaped once the node is gone
    launched: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @classmethod
    @contextlib.contextmanager
    def create(cls, which: tuple[str, ...] = ("postgres", "rabbitmq")) -> Iterator[Instances]:
        """Start the servers in ``which``; stop them and remove their folder afterwards, whatever happens."""
        if not DEV_SERVICES.exists() or ("rabbitmq" in which and not RMQ_CTL.exists()):
            unavailable("!!! ops/dev-services or the RabbitMQ binaries are missing: no throwaway services !!!")
        devdata = Path(tempfile.mkdtemp(prefix="actwheel-faults-", dir="/tmp"))
        devdata.chmod(0o755)  # the postgres / rabbitmq OS users must traverse it
        tag = uuid.uuid4().hex[:8]
        services = cls(devdata=devdata, pg_port=free_port(), rmq_port=free_port(), rmq_dist_port=free_port(),
                       rmq_node=f"faults-{tag}@localhost")
        services._write_env()
        try:
            with ThreadPoolExecutor(len(which)) as pool:  # both at once: RabbitMQ's boot is the long one
                for started in [pool.submit(services.start, name) for name in which]:
                    started.result()
            yield services
        finally:
            for name in which:
                with contextlib.suppress(ServiceError, subprocess.TimeoutExpired):
                    services.stop(name)
            services.kill_broker()  # in case stop could not reach it
            services.reap()
            shutil.rmtree(devdata, ignore_errors=True)

    def _write_env(self) -> None:
        lines = [f"PG_PORT={self.pg_port}", f"RMQ_PORT={self.rmq_port}", f"RMQ_DIST_PORT={self.rmq_dist_port}",
                 f"RMQ_NODE={self.rmq_node}", f"SERVICE_DATA={self.devdata}"]
        (self.devdata / "services.env").write_text("\n".join(lines) + "\n", encoding="utf-8")

    @property
    def database_url(self) -> str:
        return f"postgresql://actwheel:actwheel@127.0.0.1:{self.pg_port}/actwheel"

    @property
    def broker_url(self) -> str:
        return f"amqp://actwheel:actwheel@127.0.0.1:{self.rmq_port}/"

    # --- lifecycle through ops/dev-services ----------------------------------------------------

    def _dev_services(self, action: str, which: str, timeout: float = 120.0) -> str:
        env = {**os.environ, "ACTWHEEL_DEVDATA": str(self.devdata), "ACTWHEEL_SERVICES_WAIT": "60"}
        done = subprocess.run([str(DEV_SERVICES), action, which], env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            raise ServiceError(f"ops/dev-services {action} {which} failed ({done.returncode}): "
                               f"{(done.stdout + done.stderr)[-1500:]}")
        return done.stdout

    def start(self, which: str) -> float:
        """Start ``which`` (``postgres`` or ``rabbitmq``) and wait until it answers; returns the seconds taken."""
        began = time.monotonic()
        self._dev_services("start", which)
        return time.monotonic() - began

    def stop(self, which: str) -> None:
        self._dev_services("stop", which)

    def kill_broker(self) -> bool:
        """SIGKILL the RabbitMQ node (the Erlang VM): no goodbye to any client. False when it was not running."""
        killed = self._kill_pid_file(self.devdata / "rabbitmq" / "actwheel.pid")
        if killed:
            self.reap()
        return killed

    def kill_postgres(self) -> bool:
        """SIGKILL the PostgreSQL postmaster (its backends exit when they notice)."""
        return self._kill_pid_file(self.devdata / "postgres" / "data" / "postmaster.pid")

    @staticmethod
    def _kill_pid_file(path: Path) -> bool:
        try:
            pid = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return False
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.05)  # polling a process's exit: there is no wait() on a non-child
        raise ServiceError(f"pid {pid} from {path} survived SIGKILL for 30 s")

    # --- RabbitMQ CLI -------------------------------------------------------------------------

    def restart_broker(self, within: float = 60.0) -> float:
        """Launch the (killed) node again as ops/dev-services does, without its user set-up (the users are
        in the node's database already): returns once the AMQP listener accepts, in seconds. Quicker than
        :meth:`start`, which runs a dozen ``rabbitmqctl`` calls."""
        began = time.monotonic()
        rmq_dir = self.devdata / "rabbitmq"
        log = (rmq_dir / "log" / "restart.log").open("ab")
        try:
            server = self._as_rabbitmq([str(RMQ_CTL.parent / "rabbitmq-server")])
            self.launched.append(subprocess.Popen(server, cwd=rmq_dir, stdin=subprocess.DEVNULL, stdout=log,
                                                  stderr=subprocess.STDOUT, start_new_session=True))
        finally:
            log.close()
        while time.monotonic() - began < within:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.rmq_port), timeout=1):
                return time.monotonic() - began
            time.sleep(0.1)  # polling a port that opens when the node has booted
        raise ServiceError(f"RabbitMQ {self.rmq_node} did not listen on {self.rmq_port} within {within}s")

    def reap(self) -> None:
        """Wait for the launchers whose node has exited (after :meth:`kill_broker` or :meth:`stop`)."""
        for proc in list(self.launched):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
                self.launched.remove(proc)

    def _as_rabbitmq(self, cmd: list[str]) -> list[str]:
        """``cmd`` with the environment ops/dev-services gives every RabbitMQ command, as the rabbitmq user."""
        rmq_dir = self.devdata / "rabbitmq"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(rmq_dir / "home"),
               "RABBITMQ_NODENAME": self.rmq_node, "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
               "RABBITMQ_NODE_PORT": str(self.rmq_port), "RABBITMQ_DIST_PORT": str(self.rmq_dist_port),
               "RABBITMQ_MNESIA_BASE": str(rmq_dir / "mnesia"), "RABBITMQ_LOG_BASE": str(rmq_dir / "log"),
               "RABBITMQ_PID_FILE": str(rmq_dir / "actwheel.pid"),
               "RABBITMQ_CONFIG_FILE": str(rmq_dir / "rabbitmq.conf"),
               "RABBITMQ_ENABLED_PLUGINS_FILE": str(rmq_dir / "enabled_plugins"),
               "RABBITMQ_CONF_ENV_FILE": str(rmq_dir / "rabbitmq-env.conf"), "ERL_EPMD_ADDRESS": "127.0.0.1",
               "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}"}
        full = ["env", *(f"{k}={v}" for k, v in env.items()), *cmd]
        return ["runuser", "-u", "rabbitmq", "--", *full] if os.getuid() == 0 else full

    def rabbitmqctl(self, *args: str, timeout: float = 60.0) -> str:
        rmq_dir = self.devdata / "rabbitmq"
        cmd = self._as_rabbitmq([str(RMQ_CTL), "-n", self.rmq_node, "-q", *args])
        done = subprocess.run(cmd, cwd=rmq_dir, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            raise ServiceError(f"rabbitmqctl {' '.join(args)} failed ({done.returncode}): {done.stderr[-800:]}")
        return done.stdout

    def consumers(self, vhost: str = "/") -> dict[str, int]:
        """Consumers per queue as the broker counts them (``list_queues`` says 0 for quorum queues)."""
        listing = self.rabbitmqctl("list_consumers", "-p", vhost, "queue_name", "--no-table-headers")
        return dict(Counter(line.strip() for line in listing.splitlines() if line.strip()))
