"""Supervisor: restarts crashed actors with backoff on the injected clock, counts restarts, stops bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from structlog.testing import capture_logs

from actwheel.actors.base import Actor, ActorState
from actwheel.actors.supervisor import Supervisor
from actwheel.clock import VirtualClock


async def _until(condition: Callable[[], bool], rounds: int = 200) -> None:
    """Let the loop run until ``condition`` holds (a bounded number of turns: no wall-clock waits)."""
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def _settle(rounds: int = 50) -> None:
    """Let every runnable task run (used before asserting that something did NOT happen)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


class Flaky(Actor):
    """Crashes on its first ``crashes`` runs, then serves until asked to stop."""

    def __init__(self, name: str, crashes: int) -> None:
        super().__init__()
        self.name = name
        self.crashes = crashes
        self.runs = 0

    async def run(self) -> None:
        self.runs += 1
        if self.runs <= self.crashes:
            raise RuntimeError(f"crash {self.runs}")
        self.mark_ready()
        await self.stopping.wait()


class Stubborn(Actor):
    """Ignores stop requests; records that it was cancelled."""

    name = "stubborn"

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = False

    async def run(self) -> None:
        self.mark_ready()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def test_all_ready_then_stop_in_order() -> None:
    actors = [Flaky("a", 0), Flaky("b", 0)]
    supervisor = Supervisor(actors, clock=VirtualClock(), grace_s=5)
    assert not supervisor.is_ready
    await supervisor.start()
    assert supervisor.is_ready
    assert [a.state for a in actors] == [ActorState.READY, ActorState.READY]
    await supervisor.stop()
    assert [a.state for a in actors] == [ActorState.STOPPED, ActorState.STOPPED]
    assert supervisor.restarts == {"a": 0, "b": 0}


async def test_crashing_actor_is_restarted_with_doubling_backoff() -> None:
    clock = VirtualClock()
    restarted: list[str] = []
    flaky = Flaky("flaky", crashes=3)
    supervisor = Supervisor([flaky], clock=clock, backoff_initial_s=1.0, backoff_max_s=3.0,
                            on_restart=restarted.append)
    starting = asyncio.create_task(supervisor.start())
    try:
        await _until(lambda: clock.sleepers == 1)
        assert (flaky.runs, flaky.state, restarted) == (1, ActorState.CRASHED, ["flaky"])
        clock.advance(0.999)
        await _settle()
        assert flaky.runs == 1  # still backing off
        clock.advance(0.001)  # first backoff: 1 s
        await _until(lambda: flaky.runs == 2 and clock.sleepers == 1)
        clock.advance(1.999)
        await _settle()
        assert flaky.runs == 2
        clock.advance(0.001)  # second backoff: 2 s
        await _until(lambda: flaky.runs == 3 and clock.sleepers == 1)
        clock.advance(2.999)  # third backoff: capped at 3 s
        await _settle()
        assert flaky.runs == 3
        clock.advance(0.001)
        await starting
        assert flaky.runs == 4
        assert supervisor.is_ready
        assert supervisor.restarts == {"flaky": 3}
        assert restarted == ["flaky"] * 3
    finally:
        starting.cancel()
        await supervisor.stop()
    assert flaky.state is ActorState.STOPPED


async def test_a_crash_while_stopping_is_not_restarted() -> None:
    class CrashOnStop(Actor):
        name = "crash-on-stop"
        runs = 0

        async def run(self) -> None:
            self.runs += 1
            self.mark_ready()
            await self.stopping.wait()
            raise RuntimeError("cleanup failed")

    actor = CrashOnStop()
    supervisor = Supervisor([actor], clock=VirtualClock(), grace_s=5)
    await supervisor.start()
    await supervisor.stop()
    assert actor.runs == 1
    assert supervisor.restarts == {"crash-on-stop": 0}
    assert actor.state is ActorState.CRASHED


async def test_stop_is_bounded_when_an_actor_ignores_it_and_idempotent() -> None:
    stubborn = Stubborn()
    polite = Flaky("polite", 0)
    supervisor = Supervisor([stubborn, polite], clock=VirtualClock(), grace_s=0.05)
    await supervisor.start()
    await asyncio.wait_for(supervisor.stop(), timeout=10)  # the bound is the grace period, then cancel
    assert stubborn.cancelled
    assert polite.state is ActorState.STOPPED
    assert stubborn.stopping.is_set()
    await asyncio.wait_for(supervisor.stop(), timeout=1)  # again: returns at once


async def test_stop_without_start() -> None:
    supervisor = Supervisor([Flaky("a", 0)], clock=VirtualClock())
    await supervisor.stop()
    assert not supervisor.is_ready


async def test_an_empty_supervisor_is_never_ready() -> None:
    supervisor = Supervisor([], clock=VirtualClock())
    await supervisor.start()
    assert not supervisor.is_ready
    await supervisor.stop()


class Outaged(Actor):
    """Comes up, serves, and crashes whenever :meth:`outage` is called (a broker restart, say)."""

    name = "outaged"

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0
        self._outage = asyncio.Event()

    def outage(self) -> None:
        self._outage.set()

    async def run(self) -> None:
        self.runs += 1
        self._outage.clear()
        self.mark_ready()
        outage = asyncio.ensure_future(self._outage.wait())
        stop = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait((outage, stop), return_when=asyncio.FIRST_COMPLETED)
        for waiter in (outage, stop):
            waiter.cancel()
        if not self._outage.is_set():
            return  # asked to stop: a clean exit, not the supervisor's 10 s grace
        raise RuntimeError("the broker went away")


async def test_a_crash_after_serving_a_while_restarts_after_the_first_backoff_again() -> None:
    """Five outages, each after the actor served 2 s: every restart waits 1 s (it was 1, 2, 4, 8, 16 s)."""
    clock = VirtualClock()
    actor = Outaged()
    supervisor = Supervisor([actor], clock=clock, backoff_initial_s=1.0, backoff_max_s=30.0, stable_s=1.0)
    await supervisor.start()
    try:
        for outage in range(1, 6):
            clock.advance(2.0)  # served 2 s >= stable_s
            actor.outage()
            await _until(lambda: clock.sleepers == 1 and actor.state is ActorState.CRASHED)
            clock.advance(0.999)
            await _settle()
            assert actor.runs == outage, f"outage {outage}: restarted before the first backoff"
            clock.advance(0.001)
            await _until(lambda: actor.ready.is_set() and actor.runs == outage + 1)  # noqa: B023
        assert supervisor.restarts == {"outaged": 5}
    finally:
        await supervisor.stop()


async def test_a_crash_right_after_coming_up_still_doubles_the_backoff() -> None:
    """Ready but crashed before ``stable_s``: the next of a crash loop, the backoff goes on doubling."""
    clock = VirtualClock()
    actor = Outaged()
    supervisor = Supervisor([actor], clock=clock, backoff_initial_s=1.0, backoff_max_s=30.0, stable_s=5.0)
    await supervisor.start()
    try:
        expected = 1.0
        for outage in range(1, 4):
            clock.advance(0.5)  # ready, but only 0.5 s < stable_s
            actor.outage()
            await _until(lambda: clock.sleepers == 1 and actor.state is ActorState.CRASHED)
            clock.advance(expected - 0.001)
            await _settle()
            assert actor.runs == outage, f"crash {outage}: restarted before {expected} s"
            clock.advance(0.001)
            await _until(lambda: actor.ready.is_set() and actor.runs == outage + 1)  # noqa: B023
            expected *= 2
    finally:
        await supervisor.stop()


class MisbehavesOnce(Actor):
    """Its first run ends though nobody asked it to stop; later runs serve until stopped.

    ``cancelled``: it awaits a future that something else cancels (a confirm future cancelled as its
    connection closes), so a CancelledError escapes run(). ``returned``: run() returns at once (a loop
    that ended on its own)."""

    name = "misbehaves-once"

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.runs = 0

    async def run(self) -> None:
        self.runs += 1
        self.mark_ready()
        if self.runs > 1:
            await self.stopping.wait()
        elif self.how == "cancelled":
            confirm: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(confirm.cancel)
            await confirm


@pytest.mark.parametrize(("how", "cause"), [("cancelled", "unasked CancelledError"),
                                            ("returned", "returned without a stop")])
async def test_an_actor_that_ends_unasked_is_a_crash_and_is_restarted_not_gone(how: str, cause: str) -> None:
    clock = VirtualClock()
    actor = MisbehavesOnce(how)
    supervisor = Supervisor([actor], clock=clock, backoff_initial_s=1.0)
    with capture_logs() as logs:
        await supervisor.start()
        await _until(lambda: actor.state is ActorState.CRASHED)
    assert [entry.get("cause") for entry in logs if entry["event"] == "actor_crashed"] == [cause]
    assert supervisor.restarts["misbehaves-once"] == 1
    clock.advance(1.0)
    await _until(lambda: actor.runs == 2 and actor.state is ActorState.READY)
    await supervisor.stop()
    assert actor.state is ActorState.STOPPED


async def test_a_cancel_of_the_supervising_task_itself_still_ends_it() -> None:
    """asyncio.run's teardown cancels every task left: the supervisor must not restart the actor then."""
    actor = Flaky("torn-down", 0)
    supervisor = Supervisor([actor], clock=VirtualClock())
    await supervisor.start()
    task = supervisor._tasks["torn-down"]
    task.cancel()
    await asyncio.wait([task])
    assert task.cancelled()
    assert actor.runs == 1
