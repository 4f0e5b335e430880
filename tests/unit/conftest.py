"""Fixtures for the unit tests: a real SQLite store and an engine whose actors are not started."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.settings import Settings


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
async def engine(tmp_path: Path, clock: VirtualClock) -> AsyncIterator[Engine]:
    """An engine on a fresh SQLite file with a VirtualClock; store started, actors not."""
    built = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'db'}", instance="t", auth=False), clock=clock)
    await built.store.start()
    try:
        yield built
    finally:
        await built.store.stop()
