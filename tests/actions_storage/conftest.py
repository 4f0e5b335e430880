"""Fixtures for the storage-backed action tests: each test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from actions_storage_support import database_url, order_ontology, started_store

from actwheel.actions.storage_ontology import StorageOntology
from actwheel.clock import VirtualClock
from actwheel.storage import Store


@pytest.fixture(params=["sqlite", "postgres"])
async def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[str]:
    """A fresh, empty database of each kind (PostgreSQL skips loudly locally, fails under CI)."""
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    async with database_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
async def store(db_url: str, clock: VirtualClock) -> AsyncIterator[Store]:
    async with started_store(db_url, clock) as opened:
        yield opened


@pytest.fixture
async def ontology(store: Store, clock: VirtualClock) -> StorageOntology:
    """A StorageOntology with the object type Order {sku: string (required), qty: integer >= 1}."""
    return await order_ontology(store, clock)
