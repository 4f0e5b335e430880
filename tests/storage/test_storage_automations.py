"""Contract: automations and their cursors, on every backend."""

from __future__ import annotations

from datetime import timedelta

import pytest
from storage_harness import T0, aborted, in_transaction, make_automation, make_run, new_automation

from actwheel.errors import Conflict, InvalidInput, NotFound
from actwheel.storage import Store, Transaction
from actwheel.storage.records import AutomationChanges, AutomationStatus, CursorAdvance, RunStatus


async def test_create_then_get_round_trips_every_field(store: Store) -> None:
    created = await make_automation(store, end_at=T0 + timedelta(days=30), durable=False)
    async with store.transaction() as tx:
        got = await tx.automations.get(created.id)
    assert got == created
    assert got.version == 1
    assert got.trigger["expression"] == "0 30 18 ? * MON-FRI"
    assert got.session_id == "s-1"
    assert got.agent_id == "a-1"
    assert got.durable is False
    assert got.enabled is True
    assert got.next_run_at == T0
    assert got.end_at == T0 + timedelta(days=30)
    assert 0 <= got.partition < 64


async def test_partition_is_stable_for_an_id(store: Store) -> None:
    a = await make_automation(store, id="fixed-id-1")
    b_partition = (await make_automation(store, id="fixed-id-2")).partition
    from actwheel.storage._codec import partition_of

    assert a.partition == partition_of("fixed-id-1", 64)
    assert b_partition == partition_of("fixed-id-2", 64)


async def test_get_missing_raises_not_found(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(NotFound) as info:
            await tx.automations.get("nope")
    assert info.value.key == "nope"


async def test_duplicate_id_is_a_conflict(store: Store) -> None:
    await make_automation(store, id="dup")
    with pytest.raises(Conflict):
        await make_automation(store, id="dup")


async def test_query_filters_by_owner_labels_status_due_and_partition(store: Store) -> None:
    a = await make_automation(store, owner_id="alice", labels={"session_id": "s1"})
    b = await make_automation(store, owner_id="bob", labels={"agent_id": "g1"}, next_run_at=T0 + timedelta(hours=2))
    c = await make_automation(store, owner_id="bob", status=AutomationStatus.PAUSED, enabled=False)
    async with store.transaction() as tx:
        q = tx.automations.query
        assert {x.id for x in await q(owner_id="bob")} == {b.id, c.id}
        assert [x.id for x in await q(session_id="s1")] == [a.id]
        assert [x.id for x in await q(agent_id="g1")] == [b.id]
        assert [x.id for x in await q(status=AutomationStatus.PAUSED)] == [c.id]
        assert {x.id for x in await q(enabled=True)} == {a.id, b.id}
        assert {x.id for x in await q(due_before=T0 + timedelta(minutes=1))} == {a.id, c.id}
        assert {x.id for x in await q(partitions=[b.partition])} >= {b.id}
        everything = await q(limit=2)
        rest = await q(after_id=everything[-1].id)
    assert len(everything) == 2
    assert len(rest) == 1
    assert sorted(x.id for x in everything + rest) == sorted([a.id, b.id, c.id])


async def test_due_returns_only_enabled_active_in_time_order(store: Store) -> None:
    late = await make_automation(store, next_run_at=T0 + timedelta(minutes=5))
    early = await make_automation(store, next_run_at=T0)
    await make_automation(store, enabled=False, next_run_at=T0)
    await make_automation(store, status=AutomationStatus.PAUSED, next_run_at=T0)
    await make_automation(store, next_run_at=None)
    await make_automation(store, next_run_at=T0 + timedelta(hours=1))
    async with store.transaction() as tx:
        due = await tx.automations.due(T0 + timedelta(minutes=5))
        in_partition = await tx.automations.due(T0 + timedelta(minutes=5), partitions=[late.partition])
        limited = await tx.automations.due(T0 + timedelta(minutes=5), limit=1)
    assert [a.id for a in due] == [early.id, late.id]
    assert late.id in {a.id for a in in_partition}
    assert all(a.partition == late.partition for a in in_partition)
    assert [a.id for a in limited] == [early.id]


async def test_due_schedule_pages_the_due_timers_by_id(store: Store) -> None:
    due = [await make_automation(store, next_run_at=T0 + timedelta(minutes=i)) for i in range(5)]
    await make_automation(store, enabled=False, next_run_at=T0)
    await make_automation(store, status=AutomationStatus.PAUSED, next_run_at=T0)
    await make_automation(store, next_run_at=None)
    await make_automation(store, next_run_at=T0 + timedelta(hours=2))
    before = T0 + timedelta(hours=1)
    pages: list[list[str]] = []
    after_id = ""
    async with store.transaction() as tx:
        while True:
            page = await tx.automations.due_schedule(before, after_id=after_id, limit=2)
            pages.append([d.id for d in page])
            if len(page) < 2:
                break
            after_id = page[-1].id
        everything = {d.id: d for d in await tx.automations.due_schedule(before)}
        partition = due[0].partition
        in_partition = await tx.automations.due_schedule(before, partitions=[partition])
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [i for p in pages for i in p] == sorted(a.id for a in due)
    for a in due:
        assert (everything[a.id].next_run_at, everything[a.id].trigger, everything[a.id].partition) == (
            a.next_run_at, a.trigger, a.partition)
    assert {d.id for d in in_partition} == {a.id for a in due if a.partition == partition}


async def test_due_schedule_refuses_bad_paging(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as caught:
            await tx.automations.due_schedule(T0, after_id=None)  # type: ignore[arg-type]
        assert caught.value.field == "after_id"
        with pytest.raises(InvalidInput) as caught:
            await tx.automations.due_schedule(T0, limit=0)
        assert caught.value.field == "limit"


async def test_update_with_expected_version_bumps_version(store: Store) -> None:
    a = await make_automation(store)
    changes = AutomationChanges(
        name="renamed",
        action_config={"url": "https://example.test/v2"},
        labels={"session_id": "s-9"},
        clear_next_run_at=True,
    )
    async with store.transaction() as tx:
        updated = await tx.automations.update(a.id, 1, changes)
        by_new_session = await tx.automations.query(session_id="s-9")
        by_old_session = await tx.automations.query(session_id="s-1")
    assert updated.version == 2
    assert updated.name == "renamed"
    assert updated.action_config == {"url": "https://example.test/v2"}
    assert updated.next_run_at is None
    assert updated.trigger == a.trigger  # untouched fields stay
    assert [x.id for x in by_new_session] == [a.id]
    assert by_old_session == []


async def test_update_with_stale_version_is_a_conflict_and_changes_nothing(store: Store) -> None:
    a = await make_automation(store)
    async with store.transaction() as tx:
        await tx.automations.update(a.id, 1, AutomationChanges(name="first"))
    async with store.transaction() as tx:
        with pytest.raises(Conflict) as info:
            await tx.automations.update(a.id, 1, AutomationChanges(name="second"))
        current = await tx.automations.get(a.id)
    assert "version is 2" in str(info.value)
    assert current.name == "first"
    assert current.version == 2


async def test_update_missing_is_not_found(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(NotFound):
            await tx.automations.update("ghost", 1, AutomationChanges(name="x"))


async def test_disabling_cancels_pending_and_retry_wait_runs_in_the_same_transaction(store: Store) -> None:
    a = await make_automation(store)
    pending = await make_run(store, a, "p")
    waiting = await make_run(store, a, "w", status=RunStatus.RETRY_WAIT, not_before=T0)
    running = await make_run(store, a, "r")
    async with store.transaction() as tx:
        assert await tx.runs.claim(running.id, "worker", 30) is not None
    async with store.transaction() as tx:
        disabled, canceled = await tx.automations.set_enabled(a.id, False)
    assert disabled.enabled is False
    assert disabled.version == 2
    assert set(canceled) == {pending.id, waiting.id}
    async with store.transaction() as tx:
        statuses = {r.id: (r.status, r.reason) for r in await tx.runs.query(automation_id=a.id)}
    assert statuses[pending.id] == (RunStatus.CANCELED, "automation_disabled")
    assert statuses[waiting.id] == (RunStatus.CANCELED, "automation_disabled")
    assert statuses[running.id][0] is RunStatus.RUNNING


async def test_disabling_rolls_back_with_its_transaction(store: Store) -> None:
    a = await make_automation(store)
    pending = await make_run(store, a, "p")
    await aborted(store, lambda tx: tx.automations.set_enabled(a.id, False))
    async with store.transaction() as tx:
        assert (await tx.automations.get(a.id)).enabled is True
        assert (await tx.runs.get(pending.id)).status is RunStatus.PENDING


async def test_enabling_cancels_nothing_and_expected_version_is_checked(store: Store) -> None:
    a = await make_automation(store, enabled=False)
    await make_run(store, a, "p")
    async with store.transaction() as tx:
        with pytest.raises(Conflict):
            await tx.automations.set_enabled(a.id, True, expected_version=7)
    async with store.transaction() as tx:
        enabled, canceled = await tx.automations.set_enabled(a.id, True, expected_version=1)
    assert enabled.enabled
    assert canceled == []


async def test_delete_cancels_pending_runs_and_keeps_history(store: Store) -> None:
    a = await make_automation(store)
    pending = await make_run(store, a, "p")
    async with store.transaction() as tx:
        deleted = await tx.automations.delete(a.id)
    assert deleted.automation_ids == (a.id,)
    assert deleted.canceled_run_ids == (pending.id,)
    async with store.transaction() as tx:
        with pytest.raises(NotFound):
            await tx.automations.get(a.id)
        run = await tx.runs.get(pending.id)
        with pytest.raises(NotFound):
            await tx.automations.delete(a.id)
    assert run.status is RunStatus.CANCELED
    assert run.reason == "automation_deleted"


async def test_delete_by_session_agent_and_owner_cascade(store: Store) -> None:
    s1 = await make_automation(store, labels={"session_id": "S"})
    s2 = await make_automation(store, labels={"session_id": "S", "agent_id": "G"})
    g1 = await make_automation(store, labels={"agent_id": "G"})
    o1 = await make_automation(store, owner_id="carol", labels={})
    keep = await make_automation(store, labels={"session_id": "other"})
    run = await make_run(store, s1, "p")
    async with store.transaction() as tx:
        by_session = await tx.automations.delete_by_session("S")
        by_agent = await tx.automations.delete_by_agent("G")
        by_owner = await tx.automations.delete_by_owner("carol")
        nothing = await tx.automations.delete_by_owner("nobody")
        remaining = await tx.automations.query()
    assert set(by_session.automation_ids) == {s1.id, s2.id}
    assert by_session.canceled_run_ids == (run.id,)
    assert by_agent.automation_ids == (g1.id,)
    assert by_owner.automation_ids == (o1.id,)
    assert nothing.automation_ids == ()
    assert [a.id for a in remaining] == [keep.id]


async def test_advance_cursor_is_a_compare_and_set(store: Store) -> None:
    a = await make_automation(store)
    nxt = T0 + timedelta(days=1)
    async with store.transaction() as tx:
        assert await tx.automations.advance_cursor(a.id, 1, T0, nxt) is True
        assert await tx.automations.advance_cursor(a.id, 1, T0, nxt) is False  # already moved
        assert await tx.automations.advance_cursor(a.id, 2, nxt, nxt + timedelta(days=1)) is False  # version
        moved = await tx.automations.get(a.id)
    assert moved.next_run_at == nxt
    assert moved.version == 1


async def test_advance_cursor_fails_after_an_edit(store: Store) -> None:
    a = await make_automation(store)
    async with store.transaction() as tx:
        await tx.automations.update(a.id, 1, AutomationChanges(name="edited"))
        assert await tx.automations.advance_cursor(a.id, 1, T0, T0 + timedelta(days=1)) is False


async def test_advance_cursor_to_none_completes_the_automation(store: Store) -> None:
    a = await make_automation(store)
    async with store.transaction() as tx:
        assert await tx.automations.advance_cursor(a.id, 1, T0, None)
        done = await tx.automations.get(a.id)
        due = await tx.automations.due(T0 + timedelta(days=999))
    assert done.status is AutomationStatus.COMPLETED
    assert done.next_run_at is None
    assert due == []


async def test_advance_cursor_from_null(store: Store) -> None:
    a = await make_automation(store, next_run_at=None)
    async with store.transaction() as tx:
        assert await tx.automations.advance_cursor(a.id, 1, None, T0)
        assert (await tx.automations.get(a.id)).next_run_at == T0


async def test_advance_cursors_returns_the_winners(store: Store) -> None:
    autos = [await make_automation(store) for _ in range(5)]
    nxt = T0 + timedelta(minutes=1)
    advances = [CursorAdvance(automation_id=a.id, version=1, expected_next_run_at=T0, new_next_run_at=nxt)
                for a in autos]
    stale = CursorAdvance(automation_id=autos[0].id, version=9, expected_next_run_at=T0, new_next_run_at=nxt)
    async with store.transaction() as tx:
        won = await tx.automations.advance_cursors([*advances[1:], stale])
        again = await tx.automations.advance_cursors(advances)
        empty = await tx.automations.advance_cursors([])
    assert won == {a.id for a in autos[1:]}
    assert again == {autos[0].id}
    assert empty == set()


async def test_repository_error_rolls_back_the_whole_transaction(store: Store) -> None:
    await make_automation(store, id="taken")

    async def create_both(tx: Transaction) -> None:
        await tx.automations.create(new_automation(id="fresh"))
        await tx.automations.create(new_automation(id="taken"))

    with pytest.raises(Conflict):
        await in_transaction(store, create_both)
    async with store.transaction() as tx:
        with pytest.raises(NotFound):
            await tx.automations.get("fresh")
