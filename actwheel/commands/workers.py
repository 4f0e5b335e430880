"""``actwheel run --workers N``: N engine processes on one machine, sharing one listening socket.

The engine runs in one event loop, so one process uses one core. ``--workers N`` starts N copies of
``actwheel run`` (the same options), each a full instance with every role asked for: its own
instance id (``<instance>-w<i>``, through ``ACTWHEEL_INSTANCE``), its own run leases, its share of
the partition leases. They talk through the database and the broker exactly as instances on
several machines do, so nothing here is needed for correctness: the parent only starts, restarts
and stops them.

The parent binds the HTTP socket once and hands it to every worker (``ACTWHEEL_HTTP_FD``); the kernel
spreads the connections over the workers' accept loops, as gunicorn's and uvicorn's workers do.

- SQLite allows one writer and the in-process bus reaches one process only: with either, more than
  one worker is refused before anything starts (exit 2, the reason on stderr).
- A worker that exits on its own is started again after a backoff (1 s, doubling to 30 s; back to
  1 s once it ran 60 s).
- SIGTERM or SIGINT to the parent is passed to every worker, which drains as a single ``actwheel
  run`` does; after ``grace`` seconds the stragglers are killed. The parent exits 0.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from actwheel.backoff import exponential_delay
from actwheel.errors import ActwheelError
from actwheel.logs import get_logger
from actwheel.settings import Settings

__all__ = ["HTTP_FD_ENV", "INSTANCE_ENV", "WorkerPool", "check_scalable", "listening_socket"]

_log = get_logger("actwheel.workers")
#: The inherited listening socket's file descriptor, in a worker's environment.
HTTP_FD_ENV = "ACTWHEEL_HTTP_FD"
#: A worker's instance id (read by :func:`actwheel.settings.instance_id`).
INSTANCE_ENV = "ACTWHEEL_INSTANCE"
#: SIGUSR1 is forwarded to every worker (each writes its task dump: actwheel/commands/taskdump.py).
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGUSR1)
_BACKOFF_FIRST_S, _BACKOFF_MAX_S, _STABLE_S = 1.0, 30.0, 60.0


def check_scalable(settings: Settings, workers: int) -> None:
    """Refuse a worker count the stores cannot take.

    :raises ActwheelError: ``workers`` < 1, or > 1 on SQLite or on the in-process bus
    """
    if workers < 1:
        raise ActwheelError(f"--workers {workers}: at least 1")
    if workers == 1:
        return
    if settings.database_url.startswith("sqlite:"):
        raise ActwheelError(f"--workers {workers} needs PostgreSQL: SQLite allows one writer (use --database "
                            "postgresql://…, or one worker)")
    if not settings.broker_url.startswith(("amqp://", "amqps://")):
        raise ActwheelError(f"--workers {workers} needs RabbitMQ: the in-process bus reaches one process only "
                            "(use --broker amqp://…, or one worker)")


def listening_socket(host: str, port: int) -> socket.socket:
    """The HTTP socket every worker accepts on, bound and listening, inheritable."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ActwheelError(f"--http {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@dataclass
class _Worker:
    index: int
    instance: str
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    #: Exits in a row that came before it ran ``_STABLE_S`` (the last one included): the backoff's attempt.
    quick_exits: int = 0
    restart_at: float | None = None
    restarts: int = 0

    def restart_delay_s(self, ran_s: float) -> float:
        """Seconds before this worker, which exited after running ``ran_s`` seconds, is started again: 1 s,
        doubling to 30 s while it keeps exiting early, back to 1 s once it ran ``_STABLE_S``."""
        self.quick_exits = 1 if ran_s >= _STABLE_S else self.quick_exits + 1
        return exponential_delay(self.quick_exits, base_s=_BACKOFF_FIRST_S, max_s=_BACKOFF_MAX_S)


@dataclass
class WorkerPool:
    """N ``actwheel run`` children of this process (see the module docstring)."""

    argv: Sequence[str]  # the options of ``actwheel run`` a worker gets (without --workers)
    count: int
    instance: str
    sock: socket.socket
    grace_s: float = 30.0
    workers: list[_Worker] = field(default_factory=list)

    def run(self) -> int:
        """Start the workers and supervise them until SIGTERM or SIGINT; returns the exit code."""
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            self.workers = [_Worker(i, f"{self.instance}-w{i}") for i in range(self.count)]
            for worker in self.workers:
                self._spawn(worker)
            print(f"actwheel: {self.count} workers ({', '.join(w.instance for w in self.workers)}) on one socket",
                  flush=True)
            self._supervise()
            self._stop_all()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        return 0

    def _supervise(self) -> None:
        while True:
            received = signal.sigtimedwait(_SIGNALS, self._wait_s())
            if received is not None and received.si_signo in (signal.SIGTERM, signal.SIGINT):
                return
            if received is not None and received.si_signo == signal.SIGUSR1:
                self.forward(signal.SIGUSR1)
            self._reap()
            self._restart_due()

    def forward(self, signo: int) -> int:
        """Send ``signo`` to every running worker; returns how many got it."""
        running = [w.proc for w in self.workers if w.proc is not None and w.proc.poll() is None]
        for proc in running:
            proc.send_signal(signo)
        return len(running)

    def _wait_s(self) -> float:
        due = [w.restart_at for w in self.workers if w.restart_at is not None]
        return max(0.01, min(due) - time.monotonic()) if due else 5.0

    def _reap(self) -> None:
        now = time.monotonic()
        for worker in self.workers:
            if worker.proc is None or worker.proc.poll() is None:
                continue
            ran = now - worker.started_at
            delay_s = worker.restart_delay_s(ran)
            worker.restart_at = now + delay_s
            _log.error("worker_exited", instance=worker.instance, code=worker.proc.returncode, ran_s=round(ran, 1),
                       restart_in_s=delay_s)
            worker.proc = None

    def _restart_due(self) -> None:
        now = time.monotonic()
        for worker in self.workers:
            if worker.restart_at is not None and worker.restart_at <= now:
                worker.restart_at = None
                worker.restarts += 1
                self._spawn(worker)

    def _spawn(self, worker: _Worker) -> None:
        env = {**os.environ, INSTANCE_ENV: worker.instance, HTTP_FD_ENV: str(self.sock.fileno())}
        # preexec_fn is safe here: this parent runs no threads
        worker.proc = subprocess.Popen([sys.executable, "-m", "actwheel", "run", *self.argv], env=env,
                                       pass_fds=(self.sock.fileno(),), preexec_fn=_unblock_signals)
        worker.started_at = time.monotonic()

    def _stop_all(self) -> None:
        running = [w.proc for w in self.workers if w.proc is not None and w.proc.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for proc in running:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _log.warning("worker_killed_after_grace", pid=proc.pid, grace_s=self.grace_s)
                proc.kill()
                proc.wait()


def _unblock_signals() -> None:
    """In the child, before exec: the signal mask is inherited, and a worker must hear SIGTERM. SIGUSR1
    is ignored (that survives exec) until the worker's loop takes it for its task dump: a dump asked for
    while a worker starts must not kill it (SIGUSR1's default action)."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
