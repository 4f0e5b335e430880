"""Issue 15's statements on both dialects: renewals of every run in flight in one statement, and the
planner's bounded backlog count."""

from __future__ import annotations

import dataclasses
from datetime import timedelta, timezone
from typing import Any

from storage_harness import T0, make_automation, make_run, new_automation

from actwheel.storage import Store
from actwheel.storage.records import Automation, AutomationStatus, RunOutcome, RunStatus


async def test_renew_many_renews_only_what_the_owner_holds_at_its_epoch(store: Store) -> None:
    automation = await make_automation(store)
    runs = [await make_run(store, automation, f"k{i}") for i in range(4)]
    async with store.transaction() as tx:
        mine = await tx.runs.claim_many([r.id for r in runs[:3]], "w1", 30)
        theirs = await tx.runs.claim_many([runs[3].id], "w2", 30)
    by_id = {r.id: r for r in mine}
    leases = [(r.id, r.lease_epoch) for r in mine]
    leases[1] = (leases[1][0], leases[1][1] + 1)  # a stale epoch
    async with store.transaction() as tx:
        renewed = await tx.runs.renew_many([*leases, (theirs[0].id, theirs[0].lease_epoch)], "w1", 60)
        assert renewed == {mine[0].id, mine[2].id}
        assert await tx.runs.renew_many([], "w1", 60) == set()
        after = await tx.runs.get(mine[0].id)
    assert after.lease_expires_at is not None
    assert by_id[mine[0].id].lease_expires_at is not None
    assert after.lease_expires_at > by_id[mine[0].id].lease_expires_at


async def test_count_backlog_counts_pending_and_leased_runs_up_to_the_limit(store: Store) -> None:
    automation = await make_automation(store)
    runs = [await make_run(store, automation, f"k{i}") for i in range(7)]
    async with store.transaction() as tx:
        assert await tx.runs.count_backlog(100) == 7
        claimed = await tx.runs.claim_many([r.id for r in runs[:3]], "w", 30)
        assert await tx.runs.count_backlog(100) == 7
        await tx.runs.finish_many([RunOutcome(run_id=claimed[0].id, owner="w", epoch=claimed[0].lease_epoch,
                                              status=RunStatus.SUCCEEDED)])
        assert await tx.runs.count_backlog(100) == 6
        assert await tx.runs.count_backlog(2) == 4  # 2 of the 4 PENDING + 2 of the 2 RUNNING


async def test_create_many_stores_what_create_would_in_the_order_given(store: Store) -> None:
    news = [new_automation(name=f"n{i}", labels={"session_id": f"s{i}", "tag": "x"}, enabled=i % 2 == 0,
                           next_run_at=T0 + timedelta(minutes=i), end_at=T0 + timedelta(days=1) if i == 1 else None,
                           created_by="alice", created_by_key="k1")
            for i in range(5)]
    async with store.transaction() as tx:
        created = await tx.automations.create_many(news)
        assert await tx.automations.create_many([]) == []
        one = await tx.automations.create(new_automation(name="single"))
    assert [a.name for a in created] == [f"n{i}" for i in range(5)]
    async with store.transaction() as tx:
        stored = await tx.automations.get_many([a.id for a in created])
    for automation in created:
        assert stored[automation.id] == automation
    assert created[1].end_at == T0 + timedelta(days=1)
    assert created[3].enabled is False
    assert created[2].session_id == "s2"
    assert created[0].labels == {"session_id": "s0", "tag": "x"}
    assert created[0].version == one.version == 1
    assert {a.partition for a in created} <= set(range(64))
    assert created[4].next_run_at == T0 + timedelta(minutes=4)


async def test_create_many_returns_each_record_as_a_read_back_would(store: Store) -> None:
    """What ``create_many`` returns is what ``get`` reads back, field by field and type by type: JSON as
    stored (a tuple comes back a list), instants in UTC, the database's stamps and version, and none of
    the caller's objects (guards any cheaper way of building these records; issue 15, round 3)."""
    shanghai = timezone(timedelta(hours=8))
    config: dict[str, Any] = {"url": "https://example.test/hook", "headers": {"x": ("a", "b")}, "n": 1.5}
    news = [new_automation(name="tuples", trigger={"type": "cron", "expression": "0 0 3 * * ?", "steps": (1, 2)},
                           action_config=config, policy={"retry": {"max_attempts": 5}, "timeout_s": 30},
                           next_run_at=(T0 + timedelta(hours=1)).astimezone(shanghai),
                           end_at=(T0 + timedelta(days=2)).astimezone(shanghai), status="PAUSED", enabled=False,
                           durable=False),
            new_automation(name="plain", labels={}, created_by="bob", created_by_key=None)]
    async with store.transaction() as tx:
        now = await tx.now()
        created = await tx.automations.create_many(news)
    async with store.transaction() as tx:
        stored = await tx.automations.get_many([a.id for a in created])
    for automation in created:
        read = stored[automation.id]
        for f in dataclasses.fields(Automation):
            assert getattr(automation, f.name) == getattr(read, f.name), f.name
            assert type(getattr(automation, f.name)) is type(getattr(read, f.name)), f.name
    first = created[0]
    assert first.trigger["steps"] == [1, 2]
    assert first.action_config["headers"] == {"x": ["a", "b"]}
    assert first.action_config is not config
    assert first.action_config["headers"] is not config["headers"]
    assert first.next_run_at == T0 + timedelta(hours=1)
    assert first.next_run_at.utcoffset() == timedelta(0)
    assert first.end_at is not None
    assert first.end_at.utcoffset() == timedelta(0)
    assert (first.status, first.enabled, first.durable) == (AutomationStatus.PAUSED, False, False)
    assert first.version == created[1].version == 1
    assert first.created_at == first.updated_at == now
    assert (created[1].labels, created[1].created_by, created[1].created_by_key) == ({}, "bob", None)
