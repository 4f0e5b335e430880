"""The supervisor: starts actors, restarts the ones that crash, stops them in order.

Shutdown order (dramatiq's ``Worker.stop``): every actor is asked to stop
intake at once; in-flight work gets ``grace_s`` to finish; whatever is still
running is then cancelled. Cleanup is bounded: ``stop()`` never hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Sequence
from datetime import datetime

from actwheel.actors.base import Actor, ActorState
from actwheel.actors.sleeping import sleep_or_wake
from actwheel.backoff import exponential_delay
from actwheel.cancellation import cancel_requested
from actwheel.clock import Clock, SystemClock
from actwheel.logs import get_logger

__all__ = ["Supervisor"]

_log = get_logger("actwheel.supervisor")


class Supervisor:
    """Owns the actors' tasks. ``on_restart(name)`` is called for every restart (metrics).

    A crashed actor waits ``backoff_initial_s`` doubling up to ``backoff_max_s`` before each restart.
    The series starts over once an actor has come up again (ready) and served ``stable_s`` seconds:
    a crash after that is a new failure, not the next one of a crash loop. Without the reset, an actor
    that crashes once per broker outage waited 0.1, 0.2, ... 25.6 s after the 1st, 2nd, ... 9th outage.
    """

    def __init__(
        self,
        actors: Sequence[Actor],
        *,
        clock: Clock | None = None,
        grace_s: float = 10.0,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 30.0,
        stable_s: float = 1.0,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        self.actors = list(actors)
        self._clock = clock or SystemClock()
        self._grace_s = grace_s
        self._backoff = (backoff_initial_s, backoff_max_s)
        self._stable_s = stable_s
        self._on_restart = on_restart
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False
        self.restarts: dict[str, int] = {a.name: 0 for a in self.actors}

    async def start(self, *, ready_timeout_s: float = 30.0) -> None:
        """Start every actor and return once all are ready.

        :raises TimeoutError: if an actor is not ready within ``ready_timeout_s``
        """
        for actor in self.actors:
            self._tasks[actor.name] = asyncio.create_task(self._supervise(actor), name=f"actor:{actor.name}")
        await asyncio.wait_for(self.wait_ready(), timeout=ready_timeout_s)

    async def wait_ready(self) -> None:
        await asyncio.gather(*(actor.ready.wait() for actor in self.actors))

    @property
    def is_ready(self) -> bool:
        return bool(self.actors) and all(a.ready.is_set() for a in self.actors)

    async def stop(self) -> None:
        """Stop intake everywhere, give in-flight work the grace period, then cancel. Idempotent."""
        if self._stopping:
            return
        self._stopping = True
        for actor in self.actors:
            actor.request_stop()
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=self._grace_s)
        for task in pending:
            _log.warning("actor_abandoned_after_grace", task=task.get_name(), grace_s=self._grace_s)
            task.cancel()
        if pending:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait(pending, timeout=5.0)

    async def _supervise(self, actor: Actor) -> None:
        crashes = 0
        while True:
            actor.reset_for_restart()
            began = self._clock.now()
            try:
                await actor.run()
            except asyncio.CancelledError:
                if self._stopping or actor.stopping.is_set() or cancel_requested():
                    raise  # a stop, or this task cancelled (asyncio.run's teardown): not ours to outlive
                # Nobody asked this actor or its task to stop: a CancelledError escaped it (a future that
                # something else cancelled, awaited by the actor: issue 14's half-open broker, an aio-pika
                # cancel in a finally). Left alone, the actor would be gone for good while its ready flag
                # stayed set. It is a crash.
                crashes, delay = self._crashed(actor, began, crashes, cause="unasked CancelledError")
            except Exception:
                crashes, delay = self._crashed(actor, began, crashes)
            else:
                if self._stopping or actor.stopping.is_set():
                    actor.state = ActorState.STOPPED
                    return
                # run() is to work until asked to stop: an actor that returns on its own is not serving
                crashes, delay = self._crashed(actor, began, crashes, cause="returned without a stop")
            if self._stopping or actor.stopping.is_set():
                return
            self._count_restart(actor.name)
            await sleep_or_wake(self._clock, delay, actor.stopping)  # stop() does not wait out a backoff
            if self._stopping or actor.stopping.is_set():
                return

    def _crashed(self, actor: Actor, began: datetime, crashes: int, *,
                 cause: str | None = None) -> tuple[int, float]:
        """Mark and log a crash (inside an ``except``, the log carries its traceback); returns the crash
        count and the backoff before the restart."""
        actor.state = ActorState.CRASHED
        if self._served(actor, began):
            crashes = 0
        crashes += 1
        delay = exponential_delay(crashes, base_s=self._backoff[0], max_s=self._backoff[1])
        causes = {} if cause is None else {"cause": cause}
        _log.error("actor_crashed", actor=actor.name, restart_in_s=delay, exc_info=sys.exc_info()[0] is not None,
                   **causes)
        return crashes, delay

    def _served(self, actor: Actor, began: datetime) -> bool:
        """True when the run that just crashed had come up and lasted ``stable_s``: its backoff starts over."""
        return actor.ready.is_set() and (self._clock.now() - began).total_seconds() >= self._stable_s

    def _count_restart(self, name: str) -> None:
        self.restarts[name] = self.restarts.get(name, 0) + 1
        if self._on_restart is not None:
            self._on_restart(name)
