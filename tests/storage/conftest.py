"""Storage fixtures: one ``store`` per test, parametrized over SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from services import isolated_postgres_url
from storage_harness import Backend

from actwheel.clock import VirtualClock


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: object) -> AsyncIterator[Backend]:
    """A fresh, empty database of each kind (a file for SQLite, a schema for PostgreSQL)."""
    if request.param == "sqlite":
        yield Backend("sqlite", f"sqlite:///{tmp_path}/actwheel.db", VirtualClock())
        return
    request.applymarker(pytest.mark.postgres)
    async with isolated_postgres_url() as url:
        yield Backend("postgres", url, VirtualClock())


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[object]:
    """A started store on ``backend`` (stopped afterwards)."""
    async with backend.opened() as opened:
        yield opened
