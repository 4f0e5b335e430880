"""Engine fixtures: the embedded stack (memory bus + SQLite, virtual time) always; RabbitMQ + PostgreSQL
when the services run (skipped loudly on a dev machine without them, failing under CI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from engine_harness import Stack, delete_broker_topology, new_stack
from services import isolated_postgres_url, rabbitmq_url


@pytest.fixture(params=["embedded", pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.rabbitmq])])
async def stack(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stack]:
    if request.param == "embedded":
        yield new_stack("embedded", f"sqlite:///{tmp_path / 'actwheel.db'}", None)
        return
    broker = rabbitmq_url()
    async with isolated_postgres_url() as database:
        services = new_stack("services", database, broker)
        try:
            yield services
        finally:
            await delete_broker_topology(services)


@pytest.fixture
async def embedded(tmp_path: Path) -> Stack:
    return new_stack("embedded", f"sqlite:///{tmp_path / 'actwheel.db'}", None)
