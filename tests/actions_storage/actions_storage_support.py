"""Helpers for the storage-backed action tests: a store per backend, CDC rows, the Order type."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from services import isolated_postgres_url

from actwheel.actions.ontology_port import ObjectType
from actwheel.actions.storage_ontology import StorageOntology
from actwheel.bus.envelope import decode
from actwheel.bus.topology import DEFAULT_TOPOLOGY
from actwheel.clock import VirtualClock
from actwheel.events import EventFactory
from actwheel.storage import Store, open_store

ORDER = ObjectType(
    name="Order",
    properties={"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
    required=("sku",),
)


@asynccontextmanager
async def database_url(kind: str, tmp_path: Any) -> AsyncIterator[str]:
    """A fresh database of ``kind``: a SQLite file, or a PostgreSQL schema of its own."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path}/actwheel.db"
        return
    async with isolated_postgres_url("aws") as url:
        yield url


@asynccontextmanager
async def started_store(url: str, clock: VirtualClock) -> AsyncIterator[Store]:
    store = open_store(url, clock=clock) if url.startswith("sqlite") else open_store(url)
    await store.start()
    try:
        yield store
    finally:
        await store.stop()


def event_factory(clock: VirtualClock) -> EventFactory:
    return EventFactory(topology=DEFAULT_TOPOLOGY, clock=clock, source="actwheel/test")


async def cdc_rows(store: Store) -> list[tuple[str, str, dict[str, Any]]]:
    """Every unpublished outbox row on the CDC exchange: (routing key, envelope type, data)."""
    async with store.transaction() as tx:
        rows = await tx.outbox.take_batch(10_000)
    found = []
    for row in rows:
        if row.exchange == DEFAULT_TOPOLOGY.cdc:
            envelope = decode(row.body)
            found.append((row.routing_key, envelope.type, envelope.data))
    return found


async def order_ontology(store: Store, clock: VirtualClock) -> StorageOntology:
    ontology = StorageOntology(store, event_factory(clock))
    await ontology.put_type(ORDER)
    return ontology
