"""Actors: small supervised asyncio tasks with an explicit lifecycle.

An actor is one long-running coroutine, :meth:`Actor.run`. It signals
readiness once its intake is live (a bus subscription, a loaded wheel) and
returns when :meth:`Actor.request_stop` asks it to. Teardown it registers on
its own ``AsyncExitStack`` runs whether it returns or crashes. The
:class:`~actwheel.actors.supervisor.Supervisor` restarts an actor that
crashes, with backoff; unacked bus messages come back to it by redelivery.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from enum import Enum

__all__ = ["Actor", "ActorState"]


class ActorState(Enum):
    NEW = "new"
    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    STOPPED = "stopped"
    CRASHED = "crashed"


class Actor(ABC):
    """One role of the engine (ticker, planner, router, ...).

    Subclasses implement :meth:`run`; they call ``self.mark_ready()`` once their
    intake is live and return promptly after ``self.stopping`` is set, having
    stopped intake first and finished in-flight work.
    """

    #: The role name used in ``--actors``, logs and metrics.
    name: str = "actor"

    def __init__(self) -> None:
        self.state = ActorState.NEW
        self.stopping = asyncio.Event()
        self.ready = asyncio.Event()

    @abstractmethod
    async def run(self) -> None:
        """Work until ``self.stopping`` is set. Raising means a crash: the supervisor restarts."""

    def mark_ready(self) -> None:
        """Signal that intake is live (subscribed, loaded)."""
        self.state = ActorState.READY
        self.ready.set()

    def request_stop(self) -> None:
        """Ask the actor to stop intake and return from :meth:`run`. Idempotent."""
        if self.state not in (ActorState.STOPPED, ActorState.CRASHED):
            self.state = ActorState.STOPPING
        self.stopping.set()

    def reset_for_restart(self) -> None:
        """Called by the supervisor before a restart after a crash."""
        self.ready.clear()
        self.state = ActorState.STARTING
