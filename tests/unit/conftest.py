"""Fixtures for the unit tests: a real SQLite store and an engine whose actors are not started."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import structlog

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


@pytest.fixture
def process_logging_restored() -> Iterator[None]:
    """For tests that configure the process's logging (``configure_logging``, ``actwheel run``): the next
    test gets structlog's defaults and the root logger back (its handler wrote to this test's stderr)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)
