"""Fixtures for the HTTP identity tests: a fresh database of each kind, a VirtualClock at the real time,
and ``make_world`` (see :mod:`api_support`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_support import World, WorldFactory, populate
from services import isolated_postgres_url

from actwheel.api.app import create_app
from actwheel.bus.memory import MemoryBus
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.settings import Settings
from actwheel.storage import Store, open_store


@pytest.fixture(params=["sqlite", "postgres"])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh, empty database of each kind (PostgreSQL skips loudly locally, fails under CI)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/actwheel.db"
        return
    request.applymarker(pytest.mark.postgres)
    async with isolated_postgres_url("api") as url:
        yield url


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
async def store(db_url: str, clock: VirtualClock) -> AsyncIterator[Store]:
    opened = open_store(db_url, clock=clock)
    await opened.start()
    try:
        yield opened
    finally:
        await opened.stop()


@pytest.fixture
async def make_world(db_url: str, store: Store, clock: VirtualClock, tmp_path: Path) -> AsyncIterator[WorldFactory]:
    """Build the world once per test, with optional :class:`Settings` overrides (``metrics_auth``...)."""
    clients: list[httpx.AsyncClient] = []

    async def build(**settings: Any) -> World:
        key_file = tmp_path / "keys" / "admin.key"
        engine = Engine(Settings(database_url=db_url, instance="t", admin_key_file=str(key_file), **settings),
                        clock=clock, store=store, bus=MemoryBus())
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(engine.control)),
                                 base_url="http://t")
        clients.append(http)
        world = World(engine, clock, http, key_file)
        await populate(world)
        return world

    yield build
    for http in clients:
        await http.aclose()


@pytest.fixture
async def world(make_world: WorldFactory) -> World:
    return await make_world()


