"""Contract: runs — idempotent insert, leases with fencing, retries, recovery."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import asyncpg
import pytest
from storage_harness import T0, Backend, aborted, db_now, make_automation, make_run, new_run

from actwheel.errors import InvalidInput, NotFound
from actwheel.storage import Store, Transaction
from actwheel.storage.records import Origin, RunOutcome, RunStatus


async def test_insert_returns_created_then_the_existing_run(store: Store) -> None:
    a = await make_automation(store)
    async with store.transaction() as tx:
        first = await tx.runs.insert(new_run(a, "schedule:x", context={"event": {"id": "e1"}}))
        second = await tx.runs.insert(new_run(a, "schedule:x", context={"event": {"id": "e2"}}))
    assert first.created
    assert not second.created
    assert second.run == first.run
    run = first.run
    assert run.status is RunStatus.PENDING
    assert run.attempt == 0
    assert run.lease_epoch == 0
    assert run.context == {"event": {"id": "e1"}}
    assert run.action_config == a.action_config
    assert run.policy == a.policy
    assert run.origin is Origin.SCHEDULE
    assert run.scheduled_for == T0


async def test_snapshot_does_not_follow_later_edits(store: Store) -> None:
    from actwheel.storage.records import AutomationChanges

    a = await make_automation(store)
    run = await make_run(store, a)
    async with store.transaction() as tx:
        await tx.automations.update(a.id, 1, AutomationChanges(action_config={"url": "https://changed.test"}))
        assert (await tx.runs.get(run.id)).action_config == a.action_config


async def test_adhoc_runs_are_unique_per_owner_and_key(store: Store) -> None:
    async with store.transaction() as tx:
        one = await tx.runs.insert(new_run(None, "request:k", owner_id="alice"))
        same = await tx.runs.insert(new_run(None, "request:k", owner_id="alice"))
        other_owner = await tx.runs.insert(new_run(None, "request:k", owner_id="bob"))
    assert one.created
    assert not same.created
    assert other_owner.created
    assert same.run.id == one.run.id
    assert other_owner.run.id != one.run.id


async def test_insert_many_keeps_input_order_and_flags(store: Store) -> None:
    a = await make_automation(store)
    existing = await make_run(store, a, "k2")
    news = [new_run(a, "k3"), new_run(a, "k2"), new_run(a, "k1"), new_run(a, "k3"), new_run(None, "request:z")]
    async with store.transaction() as tx:
        results = await tx.runs.insert_many(news)
        assert await tx.runs.insert_many([]) == []
        count = len(await tx.runs.query(limit=100))
    assert [r.run.dedupe_key for r in results] == ["k3", "k2", "k1", "k3", "request:z"]
    assert [r.created for r in results] == [True, False, True, False, True]
    assert results[1].run.id == existing.id
    assert results[3].run.id == results[0].run.id
    assert count == 4
    # The rows this (slow, ON CONFLICT) path wrote keep their snapshots as JSON documents.
    async with store.transaction() as tx:
        stored = await tx.runs.get(results[2].run.id)
    assert (stored.action_config, stored.policy, stored.context) == (news[2].action_config, news[2].policy,
                                                                     news[2].context)


async def test_insert_skipped_and_retry_wait_runs(store: Store) -> None:
    a = await make_automation(store)
    async with store.transaction() as tx:
        skipped = (await tx.runs.insert(new_run(a, "s", status=RunStatus.SKIPPED, reason="overlap"))).run
        waiting = (await tx.runs.insert(new_run(a, "w", status=RunStatus.RETRY_WAIT, not_before=T0))).run
    assert skipped.status is RunStatus.SKIPPED
    assert skipped.reason == "overlap"
    assert skipped.finished_at
    assert waiting.status is RunStatus.RETRY_WAIT
    assert waiting.not_before == T0
    assert waiting.finished_at is None


async def test_get_missing_run_is_not_found(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(NotFound):
            await tx.runs.get("ghost")


async def test_claim_sets_lease_epoch_and_attempt(store: Store) -> None:
    run = await make_run(store, await make_automation(store))
    async with store.transaction() as tx:
        now = await tx.now()
        claimed = await tx.runs.claim(run.id, "worker-1", 30)
        again = await tx.runs.claim(run.id, "worker-2", 30)
    assert again is None
    assert claimed is not None
    assert claimed.status is RunStatus.RUNNING
    assert claimed.lease_owner == "worker-1"
    assert claimed.lease_epoch == 1
    assert claimed.attempt == 1
    assert claimed.lease_expires_at is not None
    assert abs((claimed.lease_expires_at - now).total_seconds() - 30) < 1
    assert claimed.started_at is not None


async def test_claim_respects_not_before(store: Store, backend: Backend) -> None:
    later = await db_now(store) + timedelta(seconds=0.2)
    run = await make_run(store, await make_automation(store), not_before=later)
    async with store.transaction() as tx:
        assert await tx.runs.claim(run.id, "w", 30) is None
        assert await tx.runs.claim_many([run.id], "w", 30) == []
        assert await tx.runs.claim_next("w", 30, 10) == []
    await backend.pass_time(store, 0.25)
    async with store.transaction() as tx:
        assert await tx.runs.claim(run.id, "w", 30) is not None


async def test_renew_and_finish_only_for_current_owner_and_epoch(store: Store) -> None:
    run = await make_run(store, await make_automation(store))
    async with store.transaction() as tx:
        claimed = await tx.runs.claim(run.id, "w1", 30)
        assert claimed is not None
        assert await tx.runs.renew(run.id, "w1", claimed.lease_epoch, 60)
        assert not await tx.runs.renew(run.id, "w2", claimed.lease_epoch, 60)
        assert not await tx.runs.renew(run.id, "w1", claimed.lease_epoch + 1, 60)
        wrong = RunOutcome(run_id=run.id, owner="w2", epoch=claimed.lease_epoch, status=RunStatus.SUCCEEDED)
        assert not await tx.runs.finish(wrong)
        right = RunOutcome(run_id=run.id, owner="w1", epoch=claimed.lease_epoch, status=RunStatus.SUCCEEDED,
                           result={"status_code": 200})
        assert await tx.runs.finish(right)
        assert not await tx.runs.finish(right)  # once
        done = await tx.runs.get(run.id)
    assert done.status is RunStatus.SUCCEEDED
    assert done.result == {"status_code": 200}
    assert done.lease_owner is None
    assert done.lease_expires_at is None
    assert done.finished_at is not None


async def test_fenced_out_zombie_cannot_renew_or_finish(store: Store, backend: Backend) -> None:
    run = await make_run(store, await make_automation(store))
    async with store.transaction() as tx:
        zombie = await tx.runs.claim(run.id, "zombie", 0.05)
    assert zombie is not None
    await backend.pass_time(store, 0.1)
    async with store.transaction() as tx:
        expired = await tx.runs.expired_leases()
        assert [r.id for r in expired] == [run.id]
        recovered = await tx.runs.recover_expired(run.id, zombie.lease_epoch, RunStatus.PENDING, reason="lease_expired")
        assert recovered is not None
        assert recovered.lease_epoch == zombie.lease_epoch + 1
        assert await tx.runs.recover_expired(run.id, zombie.lease_epoch, RunStatus.PENDING) is None
        successor = await tx.runs.claim(run.id, "successor", 30)
    assert successor is not None
    assert successor.lease_epoch == zombie.lease_epoch + 2
    assert successor.attempt == 2
    outcome = RunOutcome(run_id=run.id, owner="zombie", epoch=zombie.lease_epoch, status=RunStatus.SUCCEEDED)
    async with store.transaction() as tx:
        assert not await tx.runs.renew(run.id, "zombie", zombie.lease_epoch, 30)
        assert not await tx.runs.finish(outcome)
        assert (await tx.runs.get(run.id)).lease_owner == "successor"


async def test_recover_expired_refuses_live_leases_and_bad_statuses(store: Store) -> None:
    from actwheel.errors import InvalidInput

    run = await make_run(store, await make_automation(store))
    async with store.transaction() as tx:
        claimed = await tx.runs.claim(run.id, "w", 30)
        assert claimed is not None
        assert await tx.runs.expired_leases() == []
        assert await tx.runs.recover_expired(run.id, claimed.lease_epoch, RunStatus.UNKNOWN) is None
        with pytest.raises(InvalidInput):
            await tx.runs.recover_expired(run.id, claimed.lease_epoch, RunStatus.SUCCEEDED)


async def test_recover_to_unknown_ends_the_run(store: Store, backend: Backend) -> None:
    run = await make_run(store, await make_automation(store))
    async with store.transaction() as tx:
        claimed = await tx.runs.claim(run.id, "w", 0.05)
    assert claimed is not None
    await backend.pass_time(store, 0.1)
    async with store.transaction() as tx:
        unknown = await tx.runs.recover_expired(run.id, claimed.lease_epoch, RunStatus.UNKNOWN, reason="none")
        assert await tx.runs.claim(run.id, "w", 30) is None  # UNKNOWN is never retried automatically
    assert unknown is not None
    assert unknown.status is RunStatus.UNKNOWN
    assert unknown.finished_at is not None


async def test_compensating_keeps_the_lease_until_finished(store: Store) -> None:
    run = await make_run(store, await make_automation(store))
    async with store.transaction() as tx:
        c = await tx.runs.claim(run.id, "w", 30)
        assert c is not None
        step = RunOutcome(run_id=run.id, owner="w", epoch=c.lease_epoch, status=RunStatus.COMPENSATING)
        assert await tx.runs.finish(step)
        mid = await tx.runs.get(run.id)
        assert await tx.runs.renew(run.id, "w", c.lease_epoch, 30)
        end = RunOutcome(run_id=run.id, owner="w", epoch=c.lease_epoch, status=RunStatus.ROLLED_BACK)
        assert await tx.runs.finish(end)
        last = await tx.runs.get(run.id)
    assert mid.status is RunStatus.COMPENSATING
    assert mid.lease_owner == "w"
    assert mid.finished_at is None
    assert last.status is RunStatus.ROLLED_BACK
    assert last.lease_owner is None


async def test_retry_wait_then_promotion_then_claim(store: Store, backend: Backend) -> None:
    run = await make_run(store, await make_automation(store))
    async with store.transaction() as tx:
        c = await tx.runs.claim(run.id, "w", 30)
        assert c is not None
        retry_at = await tx.now() + timedelta(seconds=0.1)
        outcome = RunOutcome(run_id=run.id, owner="w", epoch=c.lease_epoch, status=RunStatus.RETRY_WAIT,
                             reason="timeout", error={"message": "took too long"}, not_before=retry_at)
        assert await tx.runs.finish(outcome)
        assert await tx.runs.promote_due_retries() == []
    await backend.pass_time(store, 0.15)
    async with store.transaction() as tx:
        promoted = await tx.runs.promote_due_retries()
        assert [r.status for r in promoted] == [RunStatus.PENDING]
        again = await tx.runs.claim(run.id, "w2", 30)
    assert again is not None
    assert again.attempt == 2
    assert again.error == {"message": "took too long"}


async def test_finish_many_applies_only_held_leases(store: Store) -> None:
    a = await make_automation(store)
    runs = [await make_run(store, a, f"k{i}") for i in range(4)]
    async with store.transaction() as tx:
        claimed = await tx.runs.claim_many([r.id for r in runs], "w", 30)
        outcomes = [RunOutcome(run_id=r.id, owner="w", epoch=r.lease_epoch, status=RunStatus.SUCCEEDED)
                    for r in claimed[:3]]
        outcomes.append(RunOutcome(run_id=claimed[3].id, owner="w", epoch=99, status=RunStatus.FAILED))
        applied = await tx.runs.finish_many(outcomes)
        assert await tx.runs.finish_many([]) == set()
    assert len(claimed) == 4
    assert applied == {r.id for r in claimed[:3]}


async def test_claim_many_and_claim_next(store: Store) -> None:
    a = await make_automation(store)
    runs = [await make_run(store, a, f"k{i}") for i in range(5)]
    async with store.transaction() as tx:
        first = await tx.runs.claim_many([runs[0].id, runs[1].id, "ghost"], "w1", 30)
        second = await tx.runs.claim_many([runs[1].id, runs[2].id], "w2", 30)
        rest = await tx.runs.claim_next("w3", 30, 10)
        assert await tx.runs.claim_many([], "w", 30) == []
    assert {r.id for r in first} == {runs[0].id, runs[1].id}
    assert [r.id for r in second] == [runs[2].id]
    assert {r.id for r in rest} == {runs[3].id, runs[4].id}
    assert all(r.lease_owner == "w3" for r in rest)


async def test_query_by_automation_status_owner_and_time(store: Store, backend: Backend) -> None:
    a = await make_automation(store)
    b = await make_automation(store, owner_id="bob")
    r1 = await make_run(store, a, "1")
    await backend.pass_time(store, 0.01)
    middle = await db_now(store)
    r2 = await make_run(store, a, "2")
    r3 = await make_run(store, b, "3")
    async with store.transaction() as tx:
        await tx.runs.claim(r2.id, "w", 30)
        q = tx.runs.query
        assert [r.id for r in await q(automation_id=a.id)] == [r2.id, r1.id]  # newest first
        assert [r.id for r in await q(statuses=[RunStatus.RUNNING])] == [r2.id]
        assert [r.id for r in await q(owner_id="bob")] == [r3.id]
        assert {r.id for r in await q(created_after=middle)} == {r2.id, r3.id}
        assert [r.id for r in await q(created_before=middle)] == [r1.id]
        assert len(await q(limit=1)) == 1


async def test_stale_pending_finds_runs_nobody_claimed(store: Store, backend: Backend) -> None:
    a = await make_automation(store)
    old = await make_run(store, a, "old")
    await backend.pass_time(store, 0.2)
    fresh = await make_run(store, a, "fresh")
    async with store.transaction() as tx:
        stale = await tx.runs.stale_pending(0.1)
    assert [r.id for r in stale] == [old.id]
    assert fresh.id not in {r.id for r in stale}


async def test_cancel_only_waiting_runs(store: Store) -> None:
    a = await make_automation(store)
    pending = await make_run(store, a, "p")
    running = await make_run(store, a, "r")
    async with store.transaction() as tx:
        await tx.runs.claim(running.id, "w", 30)
        assert await tx.runs.cancel(pending.id, "user_request")
        assert not await tx.runs.cancel(running.id, "user_request")
        assert (await tx.runs.get(pending.id)).reason == "user_request"


async def test_cancel_waiting_cancels_only_the_waiting_runs_of_that_automation(store: Store) -> None:
    a = await make_automation(store)
    other = await make_automation(store)
    pending = await make_run(store, a, "p")
    retrying = await make_run(store, a, "w", status=RunStatus.RETRY_WAIT, not_before=T0 + timedelta(hours=1))
    running = await make_run(store, a, "r")
    skipped = await make_run(store, a, "s", status=RunStatus.SKIPPED, reason="overlap")
    elsewhere = await make_run(store, other, "p")
    async with store.transaction() as tx:
        await tx.runs.claim(running.id, "w", 30)
        canceled = await tx.runs.cancel_waiting(a.id, "automation_disabled")
        runs = {r.id: r for r in await tx.runs.query(limit=10)}
    assert canceled == sorted([pending.id, retrying.id])
    for run_id in canceled:
        assert runs[run_id].status is RunStatus.CANCELED
        assert runs[run_id].reason == "automation_disabled"
        assert runs[run_id].not_before is None
        assert runs[run_id].finished_at is not None
    assert runs[running.id].status is RunStatus.RUNNING
    assert runs[skipped.id].status is RunStatus.SKIPPED
    assert runs[elsewhere.id].status is RunStatus.PENDING


async def test_cancel_waiting_twice_or_for_an_unknown_automation_cancels_nothing(store: Store) -> None:
    a = await make_automation(store)
    await make_run(store, a, "p")
    async with store.transaction() as tx:
        assert len(await tx.runs.cancel_waiting(a.id, "automation_deleted")) == 1
        assert await tx.runs.cancel_waiting(a.id, "automation_deleted") == []
        assert await tx.runs.cancel_waiting("no-such-automation", "automation_deleted") == []


@pytest.mark.parametrize(("automation_id", "reason", "field"), [
    ("", "why", "automation_id"), (None, "why", "automation_id"), ("a", "", "reason"), ("a", 3, "reason")])
async def test_cancel_waiting_refuses_bad_input_naming_the_field(
        store: Store, automation_id: object, reason: object, field: str) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as caught:
            await tx.runs.cancel_waiting(automation_id, reason)  # type: ignore[arg-type]
    assert caught.value.field == field


async def test_active_automation_ids_is_the_overlap_check(store: Store) -> None:
    busy = await make_automation(store)
    idle = await make_automation(store)
    done = await make_automation(store)
    await make_run(store, busy, "p")
    finished = await make_run(store, done, "d")
    async with store.transaction() as tx:
        c = await tx.runs.claim(finished.id, "w", 30)
        assert c is not None
        await tx.runs.finish(RunOutcome(run_id=c.id, owner="w", epoch=c.lease_epoch, status=RunStatus.FAILED))
        active = await tx.runs.active_automation_ids([busy.id, idle.id, done.id])
        assert await tx.runs.active_automation_ids([]) == set()
    assert active == {busy.id}


async def test_planner_unit_of_work_commits_or_rolls_back_together(store: Store) -> None:
    from actwheel.storage.records import NewOutboxMessage

    a = await make_automation(store)
    msg = NewOutboxMessage(exchange="actwheel", routing_key="run.ready", body=b'{"id":"1"}')

    async def fire(tx: Transaction) -> None:
        assert await tx.automations.advance_cursor(a.id, 1, T0, T0 + timedelta(days=1))
        await tx.runs.insert(new_run(a, "schedule:1"))
        await tx.outbox.append(msg)

    await aborted(store, fire)
    async with store.transaction() as tx:
        assert (await tx.automations.get(a.id)).next_run_at == T0
        assert await tx.runs.query() == []
        assert await tx.outbox.take_batch() == []


_OPEN = {RunStatus.PENDING, RunStatus.RUNNING, RunStatus.RETRY_WAIT, RunStatus.COMPENSATING}


@pytest.mark.parametrize("status", [s for s in RunStatus if s is not RunStatus.RUNNING])
async def test_finished_at_is_set_exactly_when_a_finish_closes_the_run(store: Store, status: RunStatus) -> None:
    # The open-runs index (runs_open) and every sweep read `finished_at IS NULL` as "in flight".
    run = await make_run(store, await make_automation(store))
    async with store.transaction() as tx:
        claimed = await tx.runs.claim(run.id, "w", 30)
        assert claimed is not None
        assert claimed.finished_at is None
        not_before = await tx.now() + timedelta(seconds=60) if status is RunStatus.RETRY_WAIT else None
        assert await tx.runs.finish(RunOutcome(run_id=run.id, owner="w", epoch=claimed.lease_epoch,
                                               status=status, not_before=not_before))
        finished = await tx.runs.get(run.id)
        active = await tx.runs.active_automation_ids([run.automation_id or ""])
    assert finished.status is status
    assert (finished.finished_at is None) == (status in _OPEN)
    assert active == ({run.automation_id} if status in _OPEN else set())


async def test_the_database_refuses_a_run_whose_finished_at_disagrees_with_its_status(
    store: Store, backend: Backend
) -> None:
    run = await make_run(store, await make_automation(store))
    statement = "UPDATE runs SET status = 'SUCCEEDED' WHERE id = $1"  # finished_at stays NULL
    if backend.kind == "sqlite":
        path = backend.url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as conn, pytest.raises(sqlite3.IntegrityError, match="runs_finished_shape"):
            conn.execute(statement.replace("$1", "?"), (run.id,))
    else:
        conn = await asyncpg.connect(backend.url)  # the URL's search_path is the test's schema
        try:
            with pytest.raises(asyncpg.CheckViolationError, match="runs_finished_shape"):
                await conn.execute(statement, run.id)
        finally:
            await conn.close()
    async with store.transaction() as tx:
        assert (await tx.runs.get(run.id)).status is RunStatus.PENDING
