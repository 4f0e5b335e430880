"""The auditor over a real SQLite store: batched events, idempotency, malformed batches, refused entries."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from actwheel.actors.auditor import Auditor, audit_entries_of
from actwheel.bus import MemoryBus
from actwheel.bus.base import Delivery, Reject
from actwheel.bus.envelope import Envelope
from actwheel.clock import VirtualClock
from actwheel.errors import InvalidMessage
from actwheel.storage import open_store
from actwheel.storage.base import Store

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _delivery(routing_key: str, type_: str, data: dict[str, Any], envelope_id: str = "env-1") -> Delivery:
    envelope = Envelope(id=envelope_id, type=type_, occurred_at=T0, source="actwheel/test", data=data)
    return Delivery(envelope=envelope, queue="actwheel.auditor", exchange="actwheel.events", routing_key=routing_key,
                    redelivered=False, delivery_count=1, headers={})


def _succeeded(*run_ids: str) -> Delivery:
    runs = [{"run_id": r, "automation_id": "a1", "status": "SUCCEEDED", "attempt": 1} for r in run_ids]
    return _delivery("run.succeeded", "runs.transitioned", {"status": "SUCCEEDED", "runs": runs})


def test_one_entry_per_run_of_a_batch() -> None:
    entries = audit_entries_of(_succeeded("r1", "r2"))
    assert [(e.event_id, e.run_id, e.phase) for e in entries] == [
        ("env-1:r1", "r1", "LIFECYCLE"), ("env-1:r2", "r2", "LIFECYCLE")]
    assert entries[0].details["status"] == "SUCCEEDED"


def test_completed_actions_are_audited_per_action() -> None:
    delivery = _delivery("action.completed", "actions.completed", {"actions": [
        {"run_id": "r1", "action_type": "simple.op", "result": {"v": 1}}]})
    [entry] = audit_entries_of(delivery)
    assert (entry.event_id, entry.phase, entry.details["result"]) == ("env-1:r1", "ACTION", {"v": 1})


def test_a_malformed_batch_is_refused_whole() -> None:
    bad = _delivery("run.failed", "runs.transitioned", {"status": "FAILED", "runs": [
        {"run_id": "r1", "status": "FAILED"}, 7]})
    with pytest.raises(InvalidMessage) as caught:
        audit_entries_of(bad)
    assert caught.value.field == "data.runs[1]"


def test_a_long_envelope_id_gives_a_bounded_stable_event_id() -> None:
    long_id = "e" * 255
    [first] = audit_entries_of(_delivery("run.succeeded", "runs.transitioned", {
        "status": "SUCCEEDED", "runs": [{"run_id": "r1", "status": "SUCCEEDED"}]}, envelope_id=long_id))
    [again] = audit_entries_of(_delivery("run.succeeded", "runs.transitioned", {
        "status": "SUCCEEDED", "runs": [{"run_id": "r1", "status": "SUCCEEDED"}]}, envelope_id=long_id))
    assert len(first.event_id) <= 255
    assert first.event_id == again.event_id


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'audit.db'}", clock=VirtualClock(T0))
    await store.start()
    yield store
    await store.stop()


async def _trail(store: Store, run_id: str) -> list[str]:
    async with store.transaction() as tx:
        return [entry.event_id for entry in await tx.audit.trail(run_id)]


async def test_a_redelivered_batch_leaves_one_row_per_run(store: Store) -> None:
    auditor = Auditor(bus=MemoryBus(), store=store)
    await auditor.on_event(_succeeded("r1", "r2"))
    await auditor.on_event(_succeeded("r1", "r2"))
    assert await _trail(store, "r1") == ["env-1:r1"]
    assert await _trail(store, "r2") == ["env-1:r2"]
    await auditor.drain()


async def test_entries_the_store_refuses_fail_their_delivery_only(store: Store) -> None:
    auditor = Auditor(bus=MemoryBus(), store=store)
    huge = _delivery("cdc.ontology.order.created", "cdc.changed", {"run_id": "r9", "blob": "x" * 300_000},
                     envelope_id="env-huge")
    outcomes = await asyncio.gather(auditor.on_event(huge), auditor.on_event(_succeeded("r1")),
                                    return_exceptions=True)
    assert isinstance(outcomes[0], Reject)
    assert "details" in str(outcomes[0])
    assert outcomes[1] is None
    assert await _trail(store, "r1") == ["env-1:r1"]
    assert await _trail(store, "r9") == []
    await auditor.drain()
