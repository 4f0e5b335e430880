"""Contract: automations.get_many, runs.get_many, ontology.create_objects, secrets.exists_any, idempotency."""

from __future__ import annotations

import asyncio

import pytest
from storage_harness import Backend, aborted, db_now, make_automation, make_run

from actwheel.errors import Conflict, InvalidInput, NotFound
from actwheel.storage import Store
from actwheel.storage.records import NewOntologyObject, ObjectRecord

# --- automations.get_many -------------------------------------------------------------------


async def test_get_many_returns_the_found_automations_by_id_and_leaves_missing_ones_out(store: Store) -> None:
    a = await make_automation(store, name="a")
    b = await make_automation(store, name="b")
    async with store.transaction() as tx:
        found = await tx.automations.get_many([b.id, "ghost", a.id, b.id])
        single = await tx.automations.get(a.id)
        nothing = await tx.automations.get_many([])
    assert set(found) == {a.id, b.id}
    assert found[a.id] == single
    assert found[b.id].name == "b"
    assert nothing == {}


async def test_get_many_refuses_one_string_and_empty_ids(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as one_string:
            await tx.automations.get_many("abc")
        with pytest.raises(InvalidInput) as empty_id:
            await tx.automations.get_many(["ok", ""])
    assert one_string.value.field == "automation_ids"
    assert empty_id.value.field == "automation_ids[1]"


# --- runs.get_many --------------------------------------------------------------------------


async def test_runs_get_many_returns_the_found_runs_by_id_and_leaves_missing_ones_out(store: Store) -> None:
    a = await make_automation(store)
    first = await make_run(store, a, "k1")
    adhoc = await make_run(store, None, "k2", owner_id="bob")
    async with store.transaction() as tx:
        found = await tx.runs.get_many([adhoc.id, "ghost", first.id, adhoc.id])
        single = await tx.runs.get(first.id)
        nothing = await tx.runs.get_many([])
    assert set(found) == {first.id, adhoc.id}
    assert found[first.id] == single
    assert (found[adhoc.id].owner_id, found[adhoc.id].automation_id) == ("bob", None)
    assert nothing == {}


async def test_runs_get_many_refuses_one_string_and_empty_ids(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as one_string:
            await tx.runs.get_many("abc")
        with pytest.raises(InvalidInput) as empty_id:
            await tx.runs.get_many(["ok", ""])
    assert one_string.value.field == "run_ids"
    assert empty_id.value.field == "run_ids[1]"


# --- ontology.create_objects ----------------------------------------------------------------


async def _types(store: Store, *names: str) -> None:
    async with store.transaction() as tx:
        for name in names:
            await tx.ontology.put_type(name, {"sku": {"type": "string"}})


async def _object_ids(store: Store, object_type: str) -> list[str]:
    async with store.transaction() as tx:
        return [o.id for o in await tx.ontology.list_objects(object_type, limit=10_000)]


async def test_create_objects_inserts_in_order_and_reads_back_as_create_object_would(store: Store) -> None:
    await _types(store, "Order", "Item")
    news = [NewOntologyObject(object_type="Order", properties={"sku": f"A{i}"}) for i in range(3)]
    news.append(NewOntologyObject(object_type="Item", properties={"n": [1, 2]}, id="item-1", created_by="bob"))
    async with store.transaction() as tx:
        created = await tx.ontology.create_objects(news)
        one = await tx.ontology.create_object("Order", {"sku": "B"})
        now = await tx.now()
    async with store.transaction() as tx:
        stored = [await tx.ontology.get_object(o.id) for o in created]
    assert created == stored
    assert [o.properties for o in created] == [{"sku": "A0"}, {"sku": "A1"}, {"sku": "A2"}, {"n": [1, 2]}]
    assert [o.id for o in created][3] == "item-1"
    assert len({o.id for o in created}) == 4
    assert created[3].created_by == "bob"
    assert all(o.version == 1 and not o.deleted for o in created)
    assert created[0].created_at == one.created_at == now  # the database clock (PostgreSQL), the virtual one
    assert sorted(await _object_ids(store, "Order")) == sorted([o.id for o in created[:3]] + [one.id])


async def test_create_objects_of_an_unknown_type_writes_none_and_keeps_the_transaction(store: Store) -> None:
    await _types(store, "Order")
    news = [NewOntologyObject(object_type="Order", properties={}),
            NewOntologyObject(object_type="Ghost", properties={}),
            NewOntologyObject(object_type="Phantom", properties={})]
    async with store.transaction() as tx:
        with pytest.raises(NotFound) as refused:
            await tx.ontology.create_objects(news)
        kept = await tx.ontology.create_object("Order", {"after": True})
    assert refused.value.key == "Ghost"
    assert await _object_ids(store, "Order") == [kept.id]


async def test_create_objects_with_a_taken_or_repeated_id_is_a_conflict_naming_it(store: Store) -> None:
    await _types(store, "Order")
    async with store.transaction() as tx:
        await tx.ontology.create_object("Order", {}, object_id="taken")
    fresh = NewOntologyObject(object_type="Order", properties={}, id="fresh")
    async with store.transaction() as tx:
        with pytest.raises(Conflict) as taken:
            await tx.ontology.create_objects([fresh, NewOntologyObject(object_type="Order", properties={}, id="taken")])
        with pytest.raises(Conflict) as twice:
            await tx.ontology.create_objects([fresh, fresh])
    assert taken.value.key == "taken"
    assert twice.value.key == "fresh"
    assert await _object_ids(store, "Order") == ["taken"]


async def test_create_objects_refuses_bad_input_by_index_and_writes_nothing(store: Store) -> None:
    await _types(store, "Order")
    good = NewOntologyObject(object_type="Order", properties={})
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as not_json:
            await tx.ontology.create_objects([good, NewOntologyObject(object_type="Order", properties={"x": {1, 2}})])
        with pytest.raises(InvalidInput) as no_type:
            await tx.ontology.create_objects([NewOntologyObject(object_type="", properties={})])
        with pytest.raises(InvalidInput) as not_a_record:
            await tx.ontology.create_objects([good, {"object_type": "Order"}])  # type: ignore[list-item]
        assert await tx.ontology.create_objects([]) == []
    assert not_json.value.field == "objects[1].properties"
    assert no_type.value.field == "objects[0].object_type"
    assert not_a_record.value.field == "objects[1]"
    assert await _object_ids(store, "Order") == []


async def test_create_objects_is_undone_with_its_transaction(store: Store) -> None:
    await _types(store, "Order")
    await aborted(store, lambda tx: tx.ontology.create_objects([NewOntologyObject(object_type="Order",
                                                                                  properties={})]))
    assert await _object_ids(store, "Order") == []


async def test_create_objects_in_a_large_batch(store: Store) -> None:
    await _types(store, "Order")
    news = [NewOntologyObject(object_type="Order", properties={"sku": f"S{i}", "qty": i}) for i in range(2500)]
    async with store.transaction() as tx:
        created = await tx.ontology.create_objects(news)
    assert [o.properties["qty"] for o in created] == list(range(2500))
    assert sorted(await _object_ids(store, "Order")) == sorted(o.id for o in created)


def _same_but_times(a: ObjectRecord, b: ObjectRecord) -> bool:
    return (a.id, a.object_type, a.properties, a.version, a.deleted) == (b.id, b.object_type, b.properties,
                                                                          b.version, b.deleted)


async def test_objects_created_in_a_batch_update_and_delete_like_any_other(store: Store) -> None:
    await _types(store, "Order")
    async with store.transaction() as tx:
        (created,) = await tx.ontology.create_objects([NewOntologyObject(object_type="Order", properties={"a": 1})])
        updated = await tx.ontology.update_object(created.id, {"a": 2}, expected_version=1)
        before = await tx.ontology.delete_object(created.id, expected_version=2)
    assert updated.version == 2
    assert _same_but_times(before, updated)


# --- secrets.exists_any ---------------------------------------------------------------------


async def test_secrets_exists_any_sees_any_owner(store: Store) -> None:
    async with store.transaction() as tx:
        empty = await tx.secrets.exists_any()
        await tx.secrets.put("someone-never-seen", "smtp", b"cipher")
        one = await tx.secrets.exists_any()
        await tx.secrets.delete("someone-never-seen", "smtp")
        after_delete = await tx.secrets.exists_any()
    assert (empty, one, after_delete) == (False, True, False)


async def test_secrets_exists_any_does_not_see_a_rolled_back_secret(store: Store) -> None:
    await aborted(store, lambda tx: tx.secrets.put("alice", "smtp", b"cipher"))
    async with store.transaction() as tx:
        assert await tx.secrets.exists_any() is False


# --- the idempotency ledger -----------------------------------------------------------------


async def test_idempotency_put_is_insert_if_absent_and_get_reads_the_first_outcome(store: Store) -> None:
    async with store.transaction() as tx:
        missing = await tx.idempotency.get("k1")
        first = await tx.idempotency.put("k1", {"ids": ["o-1", "o-2"], "op": "create"})
        second = await tx.idempotency.put("k1", {"ids": ["other"]})
        await tx.idempotency.put("k2", {})
    async with store.transaction() as tx:
        got = await tx.idempotency.get("k1")
        empty = await tx.idempotency.get("k2")
    assert missing is None
    assert (first, second) == (True, False)
    assert got == {"ids": ["o-1", "o-2"], "op": "create"}
    assert empty == {}


async def test_idempotency_put_is_undone_with_its_transaction(store: Store) -> None:
    await aborted(store, lambda tx: tx.idempotency.put("k", {"done": True}))
    async with store.transaction() as tx:
        assert await tx.idempotency.get("k") is None
        assert await tx.idempotency.put("k", {"done": True}) is True


async def test_idempotency_refuses_bad_keys_and_outcomes(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as empty_key:
            await tx.idempotency.put("", {})
        with pytest.raises(InvalidInput) as long_key:
            await tx.idempotency.put("k" * 1025, {})
        with pytest.raises(InvalidInput) as not_object:
            await tx.idempotency.put("k", ["a list"])  # type: ignore[arg-type]
        with pytest.raises(InvalidInput) as not_json:
            await tx.idempotency.put("k", {"when": object()})
        with pytest.raises(InvalidInput) as too_big:
            await tx.idempotency.put("k", {"blob": "x" * (4 * 1024 * 1024)})
        assert await tx.idempotency.put("k", {"ids": ["x" * 36] * 20_000})  # a 20k-object batch fits
        stored = await tx.idempotency.get("k")
    assert (empty_key.value.field, long_key.value.field) == ("key", "key")
    assert (not_object.value.field, not_json.value.field, too_big.value.field) == ("outcome",) * 3
    assert stored is not None
    assert len(stored["ids"]) == 20_000


async def test_idempotency_purge_deletes_only_keys_recorded_before(store: Store, backend: Backend) -> None:
    async with store.transaction() as tx:
        await tx.idempotency.put("old", {})
    await backend.pass_time(store, 0.01)
    cut = await db_now(store)
    await backend.pass_time(store, 0.01)
    async with store.transaction() as tx:
        await tx.idempotency.put("new", {})
    async with store.transaction() as tx:
        purged = await tx.idempotency.purge(cut)
        old, new = await tx.idempotency.get("old"), await tx.idempotency.get("new")
    assert purged == 1
    assert (old, new) == (None, {})


async def test_concurrent_puts_of_one_key_record_exactly_one_outcome(backend: Backend) -> None:
    contenders = 20
    async with backend.opened() as first:
        stores = [first] + [backend.open() for _ in range(3)]
        for s in stores[1:]:
            await s.start()
        try:
            gate = asyncio.Event()

            async def put(i: int) -> bool:
                await gate.wait()
                async with stores[i % len(stores)].transaction() as tx:
                    return await tx.idempotency.put("shared", {"winner": i})

            tasks = [asyncio.create_task(put(i)) for i in range(contenders)]
            await asyncio.sleep(0)
            gate.set()
            results = await asyncio.gather(*tasks)
            async with first.transaction() as tx:
                outcome = await tx.idempotency.get("shared")
        finally:
            for s in stores[1:]:
                await s.stop()
    assert results.count(True) == 1
    assert outcome == {"winner": results.index(True)}


async def _until_a_backend_waits_on_a_lock(url: str) -> None:
    """Poll (bounded) until some session of the test database waits for a lock."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        for _ in range(500):
            if await conn.fetchval("select count(*) from pg_stat_activity where wait_event_type = 'Lock'"):
                return
            await asyncio.sleep(0.01)
        raise AssertionError("no session ever waited for a lock")
    finally:
        await conn.close()


async def test_a_put_waiting_on_a_rolled_back_put_of_the_same_key_records_it(backend: Backend) -> None:
    if backend.kind == "sqlite":
        pytest.skip("SQLite has one writer: a second transaction cannot be open while the first writes")
    async with backend.opened() as a, backend.opened() as b:
        recorded, release = asyncio.Event(), asyncio.Event()

        async def first() -> None:
            async with a.transaction() as tx:
                await tx.idempotency.put("k", {"by": "a"})
                recorded.set()
                await release.wait()
                raise RuntimeError("a fails after recording")

        async def second() -> bool:
            await recorded.wait()
            async with b.transaction() as tx:
                return await tx.idempotency.put("k", {"by": "b"})

        failing = asyncio.create_task(first())
        waiting = asyncio.create_task(second())
        await _until_a_backend_waits_on_a_lock(backend.url)
        release.set()
        with pytest.raises(RuntimeError):
            await failing
        assert await waiting is True
        async with b.transaction() as tx:
            assert await tx.idempotency.get("k") == {"by": "b"}
