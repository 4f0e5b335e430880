"""Contract: outbox, audit, ontology, principals/keys, secrets, dead letters, partition leases."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from storage_harness import Backend, aborted, db_now

from actwheel.errors import Conflict, NotFound
from actwheel.storage import Store
from actwheel.storage.records import (
    NewApiKey,
    NewAuditEntry,
    NewDeadLetter,
    NewOutboxMessage,
    NewPrincipal,
    PrincipalKind,
    PrincipalStatus,
)


def _message(i: int) -> NewOutboxMessage:
    return NewOutboxMessage(exchange="actwheel.events", routing_key=f"run.{i}", body=f'{{"n":{i}}}'.encode(),
                            headers={"x-event-id": f"e{i}"})


async def test_outbox_batches_in_order_and_marks_published(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.outbox.append(_message(0))
        await tx.outbox.append_many([_message(i) for i in range(1, 5)])
    async with store.transaction() as tx:
        first = await tx.outbox.take_batch(3)
        assert await tx.outbox.mark_published([m.id for m in first]) == 3
        assert await tx.outbox.mark_published([first[0].id]) == 0
        rest = await tx.outbox.take_batch()
    assert [m.routing_key for m in first] == ["run.0", "run.1", "run.2"]
    assert [m.routing_key for m in rest] == ["run.3", "run.4"]
    assert first[1].body == b'{"n":1}'
    assert first[1].headers == {"x-event-id": "e1"}
    assert "body=" not in repr(first[1])  # bodies stay out of reprs


async def test_outbox_backlog_counts_what_waits_for_the_relay(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.outbox.backlog() == 0
        await tx.outbox.append_many([_message(i) for i in range(4)])
    async with store.transaction() as tx:
        assert await tx.outbox.backlog() == 4
        taken = await tx.outbox.take_batch(3)
        await tx.outbox.mark_published([m.id for m in taken])
        assert await tx.outbox.backlog() == 1


async def test_outbox_purges_only_published_before(store: Store, backend: Backend) -> None:
    async with store.transaction() as tx:
        await tx.outbox.append_many([_message(1), _message(2)])
        batch = await tx.outbox.take_batch()
        await tx.outbox.mark_published([batch[0].id])
    await backend.pass_time(store, 0.01)
    later = await db_now(store)
    async with store.transaction() as tx:
        assert await tx.outbox.purge_published(later) == 1
        assert [m.routing_key for m in await tx.outbox.take_batch()] == ["run.2"]


async def test_wait_for_outbox_is_woken_by_a_commit_and_times_out_otherwise(store: Store) -> None:
    assert await store.wait_for_outbox(0.01) is False
    waiter = asyncio.create_task(store.wait_for_outbox(5))
    await asyncio.sleep(0)
    async with store.transaction() as tx:
        await tx.outbox.append(_message(1))
    assert await waiter is True


async def test_wait_for_outbox_is_not_woken_by_a_rolled_back_append(store: Store) -> None:
    await aborted(store, lambda tx: tx.outbox.append(_message(1)))
    assert await store.wait_for_outbox(0.05) is False


async def test_audit_appends_idempotently_and_reads_in_order(store: Store) -> None:
    entries = [NewAuditEntry(event_id=f"ev-{i}", run_id="run-1", automation_id="auto-1", phase=phase,
                             actor="router", details={"i": i})
               for i, phase in enumerate(["DISPATCH", "VALIDATE", "PERMISSION", "EXECUTE"])]
    async with store.transaction() as tx:
        assert await tx.audit.append_many(entries[:2]) == 2
        assert await tx.audit.append_many(entries) == 2  # the first two are duplicates
        assert await tx.audit.append(entries[0]) is False
        assert await tx.audit.append(NewAuditEntry(event_id="other", run_id="run-2", phase="CDC", actor="x"))
        trail = await tx.audit.trail("run-1")
        recent = await tx.audit.for_automation("auto-1", limit=2)
    assert [e.phase for e in trail] == ["DISPATCH", "VALIDATE", "PERMISSION", "EXECUTE"]
    assert [e.details["i"] for e in trail] == [0, 1, 2, 3]
    assert [e.event_id for e in recent] == ["ev-2", "ev-3"]


async def test_an_audit_batch_counts_a_repeated_event_once_keeps_its_order_and_stamps_a_missing_time(
        store: Store) -> None:
    at = await db_now(store)
    stamped = NewAuditEntry(event_id="late", run_id="run-9", phase="EXECUTE", actor="router",
                            occurred_at=at - timedelta(minutes=5))
    batch = [NewAuditEntry(event_id="a", run_id="run-9", phase="DISPATCH", actor="router"), stamped,
             NewAuditEntry(event_id="a", run_id="run-9", phase="REPEATED", actor="router"),
             NewAuditEntry(event_id="b", run_id="run-9", phase="FINISH", actor="router", details={"k": [1, "x"]})]
    async with store.transaction() as tx:
        assert await tx.audit.append_many(batch) == 3
        assert await tx.audit.append_many([]) == 0
        trail = await tx.audit.trail("run-9")
    assert [(e.event_id, e.phase) for e in trail] == [("a", "DISPATCH"), ("late", "EXECUTE"), ("b", "FINISH")]
    assert trail[0].seq < trail[1].seq < trail[2].seq
    assert trail[1].occurred_at == at - timedelta(minutes=5)
    assert trail[0].occurred_at >= at  # no time given: the transaction's
    assert trail[2].details == {"k": [1, "x"]}


async def test_object_types_create_redefine_and_version(store: Store) -> None:
    async with store.transaction() as tx:
        t1 = await tx.ontology.put_type("Order", {"sku": {"type": "string"}}, ["sku"])
        t2 = await tx.ontology.put_type("Order", {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                                        ["sku"], expected_version=1)
        with pytest.raises(Conflict):
            await tx.ontology.put_type("Order", {}, expected_version=1)
        with pytest.raises(Conflict):
            await tx.ontology.put_type("Order", {}, expected_version=0)
        listed = await tx.ontology.list_types()
        with pytest.raises(NotFound):
            await tx.ontology.get_type("Nope")
    assert (t1.version, t2.version) == (1, 2)
    assert t2.required == ("sku",)
    assert [t.name for t in listed] == ["Order"]


async def test_objects_soft_delete_update_restore_and_relations(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.ontology.put_type("Order", {})
        with pytest.raises(NotFound):
            await tx.ontology.create_object("Ghost", {})
        o1 = await tx.ontology.create_object("Order", {"sku": "A"}, created_by="alice")
        o2 = await tx.ontology.create_object("Order", {"sku": "B"}, object_id="order-b")
        updated = await tx.ontology.update_object(o1.id, {"sku": "A2"}, expected_version=1)
        with pytest.raises(Conflict):
            await tx.ontology.update_object(o1.id, {"sku": "A3"}, expected_version=1)
        rel = await tx.ontology.create_relation("contains", o1.id, o2.id, {"n": 1})
        with pytest.raises(NotFound):
            await tx.ontology.create_relation("contains", o1.id, "ghost")
        assert [r.id for r in await tx.ontology.relations_of(o2.id)] == [rel.id]
        with pytest.raises(Conflict):
            await tx.ontology.delete_object(o2.id, soft=False)  # still related
        before = await tx.ontology.delete_object(o1.id)
        with pytest.raises(NotFound):
            await tx.ontology.get_object(o1.id)
        hidden = await tx.ontology.get_object(o1.id, include_deleted=True)
        live = await tx.ontology.list_objects("Order")
        everything = await tx.ontology.list_objects("Order", include_deleted=True)
        restored = await tx.ontology.restore_object(before)
        assert (await tx.ontology.delete_relation(rel.id)).id == rel.id
        with pytest.raises(NotFound):
            await tx.ontology.get_relation(rel.id)
        gone = await tx.ontology.delete_object(o2.id, soft=False)
        recreated = await tx.ontology.restore_object(gone)
        with pytest.raises(Conflict):
            await tx.ontology.delete_type("Order")
    assert updated.version == 2
    assert updated.properties == {"sku": "A2"}
    assert before.deleted is False
    assert hidden.deleted is True
    assert [o.id for o in live] == [o2.id]
    assert len(everything) == 2
    assert restored.deleted is False
    assert restored.properties == {"sku": "A2"}
    assert restored.version == 4
    assert recreated.id == "order-b"
    assert recreated.properties == {"sku": "B"}


async def test_principals_and_api_keys(store: Store) -> None:
    async with store.transaction() as tx:
        alice = await tx.principals.create(NewPrincipal(id="alice", kind=PrincipalKind.USER, scopes=("*",),
                                                          display_name="Alice"))
        with pytest.raises(Conflict):
            await tx.principals.create(NewPrincipal(id="alice", kind=PrincipalKind.USER, scopes=()))
        banned = await tx.principals.set_status("alice", PrincipalStatus.BANNED, expected_version=1)
        with pytest.raises(Conflict):
            await tx.principals.set_status("alice", PrincipalStatus.ACTIVE, expected_version=1)
        assert [p.id for p in await tx.principals.query(status=PrincipalStatus.BANNED)] == ["alice"]
        new_key = NewApiKey(owner_id="alice", key_hash="sha256:abc", scopes=("automations:write",))
        key = await tx.api_keys.create(new_key)
        with pytest.raises(NotFound):
            await tx.api_keys.create(NewApiKey(owner_id="ghost", key_hash="sha256:def"))
        with pytest.raises(Conflict):
            await tx.api_keys.create(NewApiKey(owner_id="alice", key_hash="sha256:abc"))
        found = await tx.api_keys.by_hash("sha256:abc")
        assert await tx.api_keys.by_hash("sha256:zzz") is None
        revoked = await tx.api_keys.revoke(key.id)
        again = await tx.api_keys.revoke(key.id)
        owned = await tx.api_keys.for_owner("alice", include_dead=True)
        live = await tx.api_keys.for_owner("alice")
    assert alice.status is PrincipalStatus.ACTIVE
    assert banned.status is PrincipalStatus.BANNED
    assert banned.version == 2
    assert found == key
    assert key.scopes == ("automations:write",)
    assert "sha256:abc" not in repr(key)
    assert revoked.revoked
    assert again.revoked_at == revoked.revoked_at
    assert [k.id for k in owned] == [key.id]
    assert live == []  # a revoked key is dead


async def test_secrets_hold_ciphertext_and_rotate(store: Store) -> None:
    async with store.transaction() as tx:
        created = await tx.secrets.put("alice", "smtp", b"\x00cipher-1")
        with pytest.raises(Conflict):
            await tx.secrets.put("alice", "smtp", b"cipher-x")
        rotated = await tx.secrets.rotate("alice", "smtp", b"cipher-2", expected_version=1)
        with pytest.raises(Conflict):
            await tx.secrets.rotate("alice", "smtp", b"cipher-3", expected_version=1)
        await tx.secrets.put("alice", "api", b"c")
        names = await tx.secrets.names("alice")
        got = await tx.secrets.get("alice", "smtp")
        await tx.secrets.delete("alice", "api")
        with pytest.raises(NotFound):
            await tx.secrets.get("alice", "api")
        with pytest.raises(NotFound):
            await tx.secrets.delete("alice", "api")
    assert created.ciphertext == b"\x00cipher-1"
    assert rotated.version == 2
    assert rotated.rotated_at is not None
    assert got.ciphertext == b"cipher-2"
    assert names == ["api", "smtp"]
    assert "cipher" not in repr(got)


async def test_dead_letters(store: Store) -> None:
    async with store.transaction() as tx:
        letter = await tx.dead_letters.add(NewDeadLetter(source="compensation", ref_id="run-1",
                                                         reason="refund failed", payload={"step": 2}))
        await tx.dead_letters.add(NewDeadLetter(source="bus", reason="malformed"))
        assert (await tx.dead_letters.get(letter.id)).payload == {"step": 2}
        assert [d.id for d in await tx.dead_letters.query(source="compensation")] == [letter.id]
        assert len(await tx.dead_letters.query()) == 2
        await tx.dead_letters.delete(letter.id)
        with pytest.raises(NotFound):
            await tx.dead_letters.delete(letter.id)


async def test_partition_leases_acquire_renew_release_and_expire(store: Store, backend: Backend) -> None:
    async with store.transaction() as tx:
        assert await tx.partitions.acquire("node-a", [0, 1, 2], ttl_s=0.05) == [0, 1, 2]
        assert await tx.partitions.acquire("node-b", [2, 3], ttl_s=30) == [3]
        assert await tx.partitions.acquire("node-a", [0], ttl_s=0.05) == [0]  # ours already
        assert await tx.partitions.renew("node-b", [2, 3], ttl_s=30) == [3]
        assert await tx.partitions.release("node-a", [1]) == 1
    await backend.pass_time(store, 0.1)
    async with store.transaction() as tx:
        taken = await tx.partitions.acquire("node-b", [0, 1, 2], ttl_s=30)
        assert await tx.partitions.renew("node-a", [0, 2], ttl_s=30) == []
        leases = {lease.partition: lease for lease in await tx.partitions.all()}
    assert taken == [0, 1, 2]
    assert {p: lease.owner for p, lease in leases.items()} == {0: "node-b", 1: "node-b", 2: "node-b", 3: "node-b"}
    assert leases[0].epoch == 2  # changed hands
    assert leases[1].epoch == 1  # was free


async def test_tx_now_is_the_correctness_clock(store: Store, backend: Backend) -> None:
    now = await db_now(store)
    if backend.kind == "sqlite":
        assert now == backend.clock.now()
    backend.clock.advance(3600)
    later = await db_now(store)
    expected = timedelta(hours=1) if backend.kind == "sqlite" else timedelta(0)
    assert later - now >= expected
    assert later - now < expected + timedelta(seconds=5)  # PostgreSQL ignores the node's virtual clock
