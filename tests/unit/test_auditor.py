"""The auditor over a real SQLite store: batched events, idempotency, malformed batches, refused entries."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from actwheel.actors.audit_rows import AUDITED_HEADER, audited_in_place, pre_audited
from actwheel.actors.auditor import Auditor, audit_entries_of
from actwheel.bus import MemoryBus
from actwheel.bus.base import Delivery, Reject
from actwheel.bus.envelope import Envelope, decode, encode
from actwheel.clock import VirtualClock
from actwheel.errors import InvalidMessage
from actwheel.storage import open_store
from actwheel.storage.base import Store
from actwheel.storage.records import NewOutboxMessage

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


def _outbox_row(routing_key: str, envelope: Envelope) -> NewOutboxMessage:
    return NewOutboxMessage(exchange="actwheel.events", routing_key=routing_key, body=encode(envelope),
                            headers={"x-schema-version": 1})


def _published(row: NewOutboxMessage) -> Delivery:
    """``row`` as the relay publishes it and a consumer receives it (its headers travel with it)."""
    return Delivery(envelope=decode(row.body), queue="actwheel.auditor", exchange=row.exchange,
                    routing_key=row.routing_key, redelivered=False, delivery_count=1, headers=dict(row.headers))


def test_the_router_marks_its_lifecycle_messages_and_writes_what_the_auditor_would() -> None:
    succeeded = _succeeded("r1", "r2").envelope
    completed = Envelope(id="env-2", type="actions.completed", occurred_at=T0, source="actwheel/test",
                         data={"actions": [{"run_id": "r1", "action_type": "simple.op", "result": {"v": 1}}]})
    ready = Envelope(id="env-3", type="runs.ready", occurred_at=T0, source="actwheel/test", data={"run_ids": ["r3"]})
    rows = [_outbox_row("run.succeeded", succeeded), _outbox_row("action.completed", completed),
            _outbox_row("run.ready", ready)]
    marked, entries = audited_in_place(rows)
    assert [r.headers.get(AUDITED_HEADER) for r in marked] == [True, True, None]
    assert [r.body for r in marked] == [r.body for r in rows]  # the messages themselves are unchanged
    expected = [entry for row in rows for entry in audit_entries_of(_published(row))]
    assert entries == expected
    assert [e.event_id for e in entries] == ["env-1:r1", "env-1:r2", "env-2:r1"]
    assert [pre_audited(_published(r)) for r in marked] == [True, True, False]


def test_a_mark_counts_only_on_the_engines_own_lifecycle_messages() -> None:
    succeeded = _succeeded("r1")
    forged_key = Delivery(envelope=succeeded.envelope, queue="q", exchange="actwheel.events",
                          routing_key="order.created", redelivered=False, delivery_count=1,
                          headers={AUDITED_HEADER: True})
    business = Envelope(id="env-9", type="order.created", occurred_at=T0, source="actwheel/test",
                        data={"run_id": "r1"})
    plain_type = Delivery(envelope=business, queue="q", exchange="actwheel.events", routing_key="run.succeeded",
                          redelivered=False, delivery_count=1, headers={AUDITED_HEADER: True})
    truthy = Delivery(envelope=succeeded.envelope, queue="q", exchange="actwheel.events", routing_key="run.succeeded",
                      redelivered=False, delivery_count=1, headers={AUDITED_HEADER: "yes"})
    assert not pre_audited(forged_key)
    assert not pre_audited(plain_type)
    assert not pre_audited(truthy)
    assert not pre_audited(succeeded)


async def test_the_auditor_acknowledges_a_marked_message_without_writing(store: Store) -> None:
    auditor = Auditor(bus=MemoryBus(), store=store)
    [row], _ = audited_in_place([_outbox_row("run.succeeded", _succeeded("r1").envelope)])
    await auditor.on_event(_published(row))
    assert auditor.pre_audited == 1
    assert await _trail(store, "r1") == []  # nothing written here: the router wrote it with the finish
    await auditor.drain()


async def test_rows_written_by_the_router_and_again_by_an_auditor_that_ignores_the_mark_are_kept_once(
        store: Store) -> None:
    row = _outbox_row("run.succeeded", _succeeded("r1", "r2").envelope)
    _, entries = audited_in_place([row])
    async with store.transaction() as tx:  # the router's finish transaction
        await tx.audit.append_many(entries)
    auditor = Auditor(bus=MemoryBus(), store=store)
    await auditor.on_event(_published(row))  # unmarked: an older engine's publisher, or its auditor
    assert auditor.pre_audited == 0
    assert await _trail(store, "r1") == ["env-1:r1"]
    assert await _trail(store, "r2") == ["env-1:r2"]
    await auditor.drain()
