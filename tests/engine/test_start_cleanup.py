"""A start that fails half-way tears down what it had started: nothing stays open under ``async with engine:``.

Every test uses a real SQLite file and a real memory bus (subclassed only to fail where a broker
could); the store counts as closed when it refuses to be used again and its WAL file is gone
(SQLite checkpoints and deletes it when the last connection closes).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from actwheel.actors.base import Actor, ActorState
from actwheel.bus import MemoryBus, QueueSpec
from actwheel.bus.base import BusState
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import BusUnavailable, InvalidInput, StorageUnavailable
from actwheel.settings import Settings
from actwheel.storage.sqlite import SqliteStore


class UnreachableBus(MemoryBus):
    """A broker that cannot be reached."""

    async def start(self) -> None:
        raise BusUnavailable("broker unreachable (test)")


class RefusingBus(MemoryBus):
    """Connects, then refuses every queue declaration (as a broker does for changed arguments)."""

    async def declare_queue(self, spec: QueueSpec) -> None:
        raise InvalidInput("queue", spec.name, "the arguments it was declared with (test)")


class HangingBus(MemoryBus):
    """A connect that never completes: the start can only end by being cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.connecting = asyncio.Event()

    async def start(self) -> None:
        self.connecting.set()
        await asyncio.Event().wait()


class NeverReady(Actor):
    """Runs, never signals readiness, returns when asked to stop."""

    name = "never-ready"

    async def run(self) -> None:
        await self.stopping.wait()


def _engine(db: Path, bus: MemoryBus, roles: tuple[str, ...] = ("metrics",)) -> Engine:
    settings = Settings(database_url=f"sqlite:///{db}", instance="t", roles=roles, grace_s=1.0)
    return Engine(settings, clock=VirtualClock(), store=SqliteStore(str(db)), bus=bus)


def _connection_open(db: Path) -> bool:
    """SQLite deletes the WAL file when the last connection to the database closes."""
    return Path(f"{db}-wal").exists()


async def _assert_store_closed(engine: Engine, db: Path) -> None:
    assert not _connection_open(db), "the SQLite connection is still open"
    with pytest.raises(StorageUnavailable, match="was stopped"):
        await engine.store.start()


async def _assert_stopped_cleanly(engine: Engine) -> None:
    assert not engine.started
    assert not engine.ready
    await engine.stop()  # nothing left to tear down: a no-op
    assert not engine.started


async def test_a_bus_that_cannot_connect_closes_the_store_and_its_error_propagates(tmp_path: Path) -> None:
    db = tmp_path / "db"
    engine = _engine(db, UnreachableBus())

    with pytest.raises(BusUnavailable, match="unreachable"):
        async with engine:
            pytest.fail("the body must not run when start fails")

    await _assert_store_closed(engine, db)
    await _assert_stopped_cleanly(engine)


async def test_a_refused_queue_declaration_closes_the_bus_and_the_store(tmp_path: Path) -> None:
    db = tmp_path / "db"
    bus = RefusingBus()
    engine = _engine(db, bus)

    with pytest.raises(InvalidInput, match="declared with"):
        await engine.start()

    assert bus.state is BusState.STOPPED
    await _assert_store_closed(engine, db)
    await _assert_stopped_cleanly(engine)


async def test_actors_not_ready_in_time_are_stopped_and_the_bus_and_store_closed(tmp_path: Path) -> None:
    db = tmp_path / "db"
    bus = MemoryBus()
    engine = _engine(db, bus)
    laggard = NeverReady()
    engine.supervisor.actors.append(laggard)

    with pytest.raises(TimeoutError):
        await engine.start(ready_timeout_s=0.05)

    assert [a.state for a in engine.supervisor.actors] == [ActorState.STOPPED, ActorState.STOPPED]
    assert bus.state is BusState.STOPPED
    await _assert_store_closed(engine, db)
    await _assert_stopped_cleanly(engine)


async def test_a_start_cancelled_half_way_closes_what_it_had_opened(tmp_path: Path) -> None:
    db = tmp_path / "db"
    bus = HangingBus()
    engine = _engine(db, bus)
    starting = asyncio.create_task(engine.start())
    await bus.connecting.wait()

    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting

    await _assert_store_closed(engine, db)
    await _assert_stopped_cleanly(engine)


async def test_a_start_that_succeeds_keeps_everything_open_until_stop(tmp_path: Path) -> None:
    db = tmp_path / "db"
    bus = MemoryBus()
    engine = _engine(db, bus)

    async with engine:
        assert engine.ready
        assert bus.state.value == BusState.RUNNING.value
        assert _connection_open(db)

    assert bus.state is BusState.STOPPED
    await _assert_store_closed(engine, db)
    await _assert_stopped_cleanly(engine)
