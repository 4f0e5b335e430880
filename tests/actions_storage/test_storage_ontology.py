"""StorageOntology on SQLite and PostgreSQL: CRUD, optimistic locking, relations, CDC in the same
transaction, idempotent replay, batch atomicity."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from actions_storage_support import cdc_rows, event_factory

from actwheel.actions.ontology_port import NewObject, ObjectType
from actwheel.actions.storage_ontology import (
    StorageOntology,
    cdc_routing_key,
    ledger_key,
)
from actwheel.clock import VirtualClock
from actwheel.errors import Conflict, InvalidAction, NotAvailable, NotFound
from actwheel.storage import Store, Transaction


def order(sku: str, **extra: Any) -> NewObject:
    return NewObject(object_type="Order", properties={"sku": sku, **extra})


async def object_count(ontology: StorageOntology) -> int:
    return len(await ontology.list_objects("Order", include_deleted=True, limit=10_000))


# --- create -------------------------------------------------------------------------------


async def test_create_commits_the_object_and_its_cdc_event(ontology: StorageOntology, store: Store) -> None:
    created = await ontology.create_object("Order", {"sku": "A", "qty": 2})
    assert created.version == 1
    assert await ontology.get_object(created.id) == created
    rows = await cdc_rows(store)
    assert [(rk, kind) for rk, kind, _ in rows] == [("cdc.ontology.Order.created", "ontology.changed")]
    data = rows[0][2]
    assert data["entity"] == "object"
    assert data["id"] == created.id
    assert data["after"]["properties"] == {"sku": "A", "qty": 2}
    assert data["before"] is None


async def test_invalid_properties_name_every_field_and_write_nothing(
    ontology: StorageOntology, store: Store
) -> None:
    with pytest.raises(InvalidAction) as caught:
        await ontology.create_object("Order", {"qty": 0})
    fields = {e.field: e.value for e in caught.value.errors}
    assert fields == {"properties.sku": None, "properties.qty": 0}
    assert await object_count(ontology) == 0
    assert await cdc_rows(store) == []


async def test_unknown_object_type_is_not_found(ontology: StorageOntology, store: Store) -> None:
    with pytest.raises(NotFound, match="Invoice"):
        await ontology.create_object("Invoice", {"n": 1})
    assert await cdc_rows(store) == []


async def test_a_batch_is_all_or_nothing(ontology: StorageOntology, store: Store) -> None:
    with pytest.raises(InvalidAction) as caught:
        await ontology.create_objects([order("A"), order("B"), NewObject(object_type="Order", properties={})])
    assert [e.field for e in caught.value.errors] == ["objects[2].properties.sku"]
    assert await object_count(ontology) == 0
    assert await cdc_rows(store) == []

    created = await ontology.create_objects([order(f"S{i}") for i in range(50)])
    listed = await ontology.list_objects("Order", limit=100)
    assert [o.id for o in listed] == [o.id for o in created]  # creation order, also within one transaction
    later = await ontology.create_object("Order", {"sku": "later"})
    assert (await ontology.list_objects("Order", limit=100))[-1] == later  # and across transactions
    assert len(await cdc_rows(store)) == 51


async def test_list_objects_without_a_type_spans_every_type(ontology: StorageOntology) -> None:
    await ontology.put_type(ObjectType(name="Customer", properties={"name": {"type": "string"}}))
    a = await ontology.create_object("Order", {"sku": "A"})
    c = await ontology.create_object("Customer", {"name": "Ann"})
    assert {o.id for o in await ontology.list_objects()} == {a.id, c.id}
    assert [o.id for o in await ontology.list_objects("Customer")] == [c.id]


async def test_a_type_with_an_invalid_schema_is_refused(ontology: StorageOntology) -> None:
    with pytest.raises(InvalidAction) as caught:
        await ontology.put_type(ObjectType(name="Bad", properties={"n": {"type": "number-ish"}}))
    assert "properties.n.type" in caught.value.errors[0].field
    with pytest.raises(NotFound):
        await ontology.get_type("Bad")


# --- update -------------------------------------------------------------------------------


async def test_update_merges_bumps_the_version_and_emits_before_and_after(
    ontology: StorageOntology, store: Store
) -> None:
    obj = await ontology.create_object("Order", {"sku": "A", "qty": 1})
    change = await ontology.update_object(obj.id, {"qty": 5}, expected_version=1)
    assert change.before.properties == {"sku": "A", "qty": 1}
    assert change.after.properties == {"sku": "A", "qty": 5}
    assert change.after.version == 2
    rk, _, data = (await cdc_rows(store))[-1]
    assert rk == "cdc.ontology.Order.updated"
    assert (data["before"]["version"], data["after"]["version"]) == (1, 2)


async def test_a_stale_version_is_a_conflict_and_changes_nothing(
    ontology: StorageOntology, store: Store
) -> None:
    obj = await ontology.create_object("Order", {"sku": "A"})
    await ontology.update_object(obj.id, {"sku": "B"}, expected_version=1)
    with pytest.raises(Conflict, match="version is 2, not 1"):
        await ontology.update_object(obj.id, {"sku": "C"}, expected_version=1)
    current = await ontology.get_object(obj.id)
    assert (current.properties["sku"], current.version) == ("B", 2)
    assert [rk.rsplit(".", 1)[1] for rk, _, _ in await cdc_rows(store)] == ["created", "updated"]


async def test_an_update_that_breaks_the_schema_is_refused(ontology: StorageOntology) -> None:
    obj = await ontology.create_object("Order", {"sku": "A"})
    await ontology.update_object(obj.id, {"sku": "A2"}, expected_version=None, merge=False)
    with pytest.raises(InvalidAction) as caught:
        await ontology.update_object(obj.id, {"qty": "many"}, expected_version=None)
    assert caught.value.errors[0].field == "properties.qty"
    assert (await ontology.get_object(obj.id)).version == 2  # only the valid replace happened


async def test_concurrent_merges_without_a_version_lose_nothing(ontology: StorageOntology) -> None:
    obj = await ontology.create_object("Order", {"sku": "A"})
    await asyncio.gather(
        ontology.update_object(obj.id, {"qty": 3}, expected_version=None),
        ontology.update_object(obj.id, {"note": "x"}, expected_version=None),
    )
    current = await ontology.get_object(obj.id)
    assert current.properties == {"sku": "A", "qty": 3, "note": "x"}
    assert current.version == 3


# --- delete and restore -------------------------------------------------------------------


async def test_soft_delete_hides_the_object_and_restore_brings_it_back(
    ontology: StorageOntology, store: Store
) -> None:
    obj = await ontology.create_object("Order", {"sku": "A"})
    before = await ontology.delete_object(obj.id, soft=True)
    assert before == obj
    with pytest.raises(NotFound):
        await ontology.get_object(obj.id)
    hidden = await ontology.get_object(obj.id, include_deleted=True)
    assert (hidden.deleted, hidden.version) == (True, 2)
    _, _, data = (await cdc_rows(store))[-1]
    assert (data["change"], data["hard"], data["after"]["deleted"]) == ("deleted", False, True)

    restored = await ontology.restore_object(before, expected_version=2)
    assert (restored.deleted, restored.version, restored.properties) == (False, 3, {"sku": "A"})
    assert (await cdc_rows(store))[-1][0] == "cdc.ontology.Order.updated"


async def test_restore_with_a_stale_version_is_a_conflict(ontology: StorageOntology) -> None:
    obj = await ontology.create_object("Order", {"sku": "A"})
    await ontology.update_object(obj.id, {"sku": "B"}, expected_version=1)
    with pytest.raises(Conflict):
        await ontology.restore_object(obj, expected_version=1)
    assert (await ontology.get_object(obj.id)).properties == {"sku": "B"}


async def test_hard_delete_removes_the_row_and_restore_recreates_it(
    ontology: StorageOntology, store: Store
) -> None:
    obj = await ontology.create_object("Order", {"sku": "A"})
    await ontology.delete_object(obj.id, soft=False, expected_version=1)
    with pytest.raises(NotFound):
        await ontology.get_object(obj.id, include_deleted=True)
    rk, _, data = (await cdc_rows(store))[-1]
    assert (rk, data["hard"], data["after"], data["before"]["id"]) == (
        "cdc.ontology.Order.deleted",
        True,
        None,
        obj.id,
    )
    restored = await ontology.restore_object(obj)
    assert (restored.id, restored.version) == (obj.id, 2)
    assert (await cdc_rows(store))[-1][0] == "cdc.ontology.Order.created"


async def test_hard_delete_of_a_related_object_is_refused(ontology: StorageOntology) -> None:
    a = await ontology.create_object("Order", {"sku": "A"})
    b = await ontology.create_object("Order", {"sku": "B"})
    await ontology.create_relation("pairs", a.id, b.id)
    with pytest.raises(Conflict, match="1 relation"):
        await ontology.delete_object(b.id, soft=False)
    assert (await ontology.get_object(b.id)).version == 1


# --- relations ----------------------------------------------------------------------------


async def test_relations_create_list_delete_restore_with_cdc(ontology: StorageOntology, store: Store) -> None:
    a = await ontology.create_object("Order", {"sku": "A"})
    b = await ontology.create_object("Order", {"sku": "B"})
    rel = await ontology.create_relation("pairs", a.id, b.id, {"weight": 2})
    assert await ontology.get_relation(rel.id) == rel
    assert await ontology.list_relations(source=a.id) == [rel]
    assert await ontology.list_relations(target=b.id) == [rel]
    assert await ontology.list_relations(source=b.id) == []
    assert await ontology.list_relations(source=a.id, target=a.id) == []
    assert await ontology.delete_relation(rel.id) == rel
    with pytest.raises(NotFound):
        await ontology.get_relation(rel.id)
    assert await ontology.restore_relation(rel) == rel
    with pytest.raises(Conflict):
        await ontology.restore_relation(rel)
    keys = [rk for rk, _, _ in await cdc_rows(store)][2:]
    assert keys == [
        "cdc.ontology.relation.pairs.created",
        "cdc.ontology.relation.pairs.deleted",
        "cdc.ontology.relation.pairs.created",
    ]


async def test_a_relation_needs_two_live_objects(ontology: StorageOntology, store: Store) -> None:
    a = await ontology.create_object("Order", {"sku": "A"})
    b = await ontology.create_object("Order", {"sku": "B"})
    await ontology.delete_object(b.id, soft=True)
    with pytest.raises(NotFound):
        await ontology.create_relation("pairs", a.id, b.id)
    with pytest.raises(NotFound):
        await ontology.create_relation("pairs", a.id, "no-such-object")
    assert [rk for rk, _, _ in await cdc_rows(store) if ".relation." in rk] == []


async def test_listing_every_relation_is_not_available(ontology: StorageOntology) -> None:
    with pytest.raises(NotAvailable, match="give source or target"):
        await ontology.list_relations()


def test_routing_keys_are_one_word_per_name() -> None:
    assert cdc_routing_key("object", "Order", "created") == "cdc.ontology.Order.created"
    assert cdc_routing_key("object", "shop.Order", "updated") == "cdc.ontology.shop_Order.updated"
    assert (
        cdc_routing_key("relation", "is part of/#", "deleted") == "cdc.ontology.relation.is_part_of__.deleted"
    )


# --- the transaction holds the change and its CDC row together ------------------------------


class _FailingOutboxStore(Store):
    """The real store, except that appending to the outbox fails after the row was written."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.dialect = inner.dialect

    async def start(self) -> None:
        await self._inner.start()

    async def stop(self) -> None:
        await self._inner.stop()

    async def migrate(self) -> list[str]:
        return await self._inner.migrate()

    async def wait_for_outbox(self, timeout: float) -> bool:  # noqa: ASYNC109
        return await self._inner.wait_for_outbox(timeout)

    @asynccontextmanager
    async def transaction(self, *, urgent: bool = False) -> AsyncIterator[Transaction]:
        async with self._inner.transaction(urgent=urgent) as tx:
            real = tx.outbox.append_many

            async def append_then_fail(messages: Any) -> None:
                await real(messages)
                raise RuntimeError("outbox write failed after the change")

            tx.outbox.append_many = append_then_fail  # type: ignore[method-assign]
            tx.outbox.append = lambda m: append_then_fail([m])  # type: ignore[method-assign]
            yield tx


class _BlindLedgerStore(_FailingOutboxStore):
    """The real store, except that ledger look-ups see nothing: as if a concurrent first call with the
    same key committed between our look-up and our insert."""

    @asynccontextmanager
    async def transaction(self, *, urgent: bool = False) -> AsyncIterator[Transaction]:
        async with self._inner.transaction(urgent=urgent) as tx:
            async def nothing(key: str) -> None:
                return None

            tx.idempotency.get = nothing  # type: ignore[method-assign,assignment]
            yield tx


async def test_a_rolled_back_change_leaves_neither_object_nor_cdc_row(
    ontology: StorageOntology, store: Store, clock: VirtualClock
) -> None:
    failing = StorageOntology(_FailingOutboxStore(store), event_factory(clock))
    with pytest.raises(RuntimeError):
        await failing.create_objects([order("A"), order("B")], idempotency_key="k1")
    assert await object_count(ontology) == 0
    assert await cdc_rows(store) == []
    async with store.transaction() as tx:
        assert await tx.idempotency.get(ledger_key("k1")) is None

    kept = await ontology.create_object("Order", {"sku": "K"})
    with pytest.raises(RuntimeError):
        await failing.update_object(kept.id, {"sku": "L"}, expected_version=1)
    assert (await ontology.get_object(kept.id)).properties == {"sku": "K"}
    assert len(await cdc_rows(store)) == 1


async def test_losing_the_ledger_race_rolls_the_change_back(ontology: StorageOntology, store: Store) -> None:
    # The key is taken between our look-up and our insert (a concurrent first call that committed):
    # the change must be rolled back rather than committed twice.
    async with store.transaction() as tx:
        await tx.idempotency.put(ledger_key("k"), {"op": "someone else's"})
    ontology = StorageOntology(_BlindLedgerStore(store), ontology._events)
    with pytest.raises(Conflict, match="idempotency_key"):
        await ontology.create_object("Order", {"sku": "A"}, idempotency_key="k")
    assert await object_count(ontology) == 0
    assert await cdc_rows(store) == []


# --- idempotent replay --------------------------------------------------------------------


async def test_create_with_a_key_replays_the_first_outcome(ontology: StorageOntology, store: Store) -> None:
    first = await ontology.create_object("Order", {"sku": "A"}, idempotency_key="run:1|create")
    await ontology.delete_object(first.id, soft=False)  # even after the object is gone...
    again = await ontology.create_object("Order", {"sku": "A"}, idempotency_key="run:1|create")
    assert again == first  # ...the replay returns the first outcome and re-creates nothing
    assert await object_count(ontology) == 0
    assert [rk.rsplit(".", 1)[1] for rk, _, _ in await cdc_rows(store)] == ["created", "deleted"]


async def test_a_key_reused_for_other_objects_is_a_conflict(ontology: StorageOntology) -> None:
    await ontology.create_object("Order", {"sku": "A"}, idempotency_key="k")
    with pytest.raises(Conflict, match="different"):
        await ontology.create_object("Order", {"sku": "B"}, idempotency_key="k")
    assert await object_count(ontology) == 1


async def test_concurrent_first_calls_with_one_key_create_once(
    ontology: StorageOntology, store: Store
) -> None:
    results = await asyncio.gather(
        *(ontology.create_objects([order("A"), order("B")], idempotency_key="same") for _ in range(4))
    )
    assert all(r == results[0] for r in results)
    assert await object_count(ontology) == 2
    assert len(await cdc_rows(store)) == 2


async def test_a_large_keyed_batch_replays_every_id_in_order(ontology: StorageOntology) -> None:
    news = [order(f"S{i}") for i in range(4500)]  # more ids than one ledger entry holds
    first = await ontology.create_objects(news, idempotency_key="big")
    again = await ontology.create_objects(news, idempotency_key="big")
    assert [o.id for o in again] == [o.id for o in first]
    assert await object_count(ontology) == 4500


async def test_update_delete_and_relation_calls_replay_with_their_key(
    ontology: StorageOntology, store: Store
) -> None:
    a = await ontology.create_object("Order", {"sku": "A"})
    b = await ontology.create_object("Order", {"sku": "B"})
    change = await ontology.update_object(a.id, {"qty": 2}, expected_version=1, idempotency_key="u")
    assert await ontology.update_object(a.id, {"qty": 2}, expected_version=1, idempotency_key="u") == change
    rel = await ontology.create_relation("pairs", a.id, b.id, idempotency_key="r")
    assert await ontology.create_relation("pairs", a.id, b.id, idempotency_key="r") == rel
    assert await ontology.delete_relation(rel.id, idempotency_key="dr") == rel
    assert await ontology.delete_relation(rel.id, idempotency_key="dr") == rel  # no NotFound
    snapshot = await ontology.delete_object(b.id, soft=True, idempotency_key="d")
    assert await ontology.delete_object(b.id, soft=True, idempotency_key="d") == snapshot
    assert (await ontology.get_object(a.id)).version == 2
    assert (await ontology.get_object(b.id, include_deleted=True)).version == 2
    changes = [rk.split(".", 2)[2] for rk, _, _ in await cdc_rows(store)]
    assert changes == [
        "Order.created",
        "Order.created",
        "Order.updated",
        "relation.pairs.created",
        "relation.pairs.deleted",
        "Order.deleted",
    ]
