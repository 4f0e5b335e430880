"""Issue 13's speed fixes over HTTP, on SQLite and PostgreSQL: the needs-attention counts keep every UNKNOWN
and DEAD run however old (FAILED: since ``attention``), and a bulk cancel's dry run by filter is one
statement, not a transaction per run, with the same count as the cancel it previews."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from api_support import World

from actwheel.service import operations
from actwheel.storage.base import Transaction
from actwheel.storage.records import NewRun, Origin, Run, RunOutcome, RunStatus
from actwheel.storage.sqlite import SqliteStore


async def run_in(world: World, owner: str, status: RunStatus, key: str) -> Run:
    """A run of ``owner`` brought to ``status`` as the router would (claim, then finish)."""
    async with world.store.transaction() as tx:
        inserted = await tx.runs.insert(NewRun(automation_id=None, dedupe_key=key, owner_id=owner,
                                               action_type="simple.op", origin=Origin.REQUEST,
                                               action_config={"op": "log", "message": "hi"}))
    if status is RunStatus.PENDING:
        return inserted.run
    async with world.store.transaction() as tx:
        claimed = await tx.runs.claim(inserted.run.id, "worker", 30)
        assert claimed is not None
        assert await tx.runs.finish(RunOutcome(run_id=claimed.id, owner="worker", epoch=claimed.lease_epoch,
                                               status=status, reason="test"))
        return await tx.runs.get(claimed.id)


async def pass_window(world: World, seconds: float) -> None:
    """Let ``seconds`` pass on the clock the stats read: the virtual one (SQLite) or the database's."""
    if isinstance(world.store, SqliteStore):
        world.clock.advance(seconds)
    else:
        await asyncio.sleep(seconds)


async def test_unknown_and_dead_runs_older_than_the_window_are_still_counted(world: World) -> None:
    unknown = await run_in(world, "alice", RunStatus.UNKNOWN, "u")
    await run_in(world, "alice", RunStatus.DEAD, "d")
    await run_in(world, "alice", RunStatus.FAILED, "f")
    await run_in(world, "bob", RunStatus.UNKNOWN, "bu")
    await pass_window(world, 1.2)

    mine = (await world.as_("full_a", "GET", "/v1/stats?window=1s")).json()
    assert mine["by_status"] == {}
    assert mine["attention"] == {"unknown": 1, "dead": 1, "failed": 0}  # FAILED: created within the window only
    assert mine["attention_in_window"] == {"unknown": 0, "dead": 0, "failed": 0}
    wider = (await world.as_("full_a", "GET", "/v1/stats?window=1s&attention=1h")).json()
    assert wider["attention"] == {"unknown": 1, "dead": 1, "failed": 1}
    cluster = (await world.as_("admin", "GET", "/v1/stats?window=1s")).json()
    assert (cluster["attention"]["unknown"], cluster["attention"]["dead"]) == (2, 1)

    resolved = await world.as_("ops_a", "POST", f"/v1/runs/{unknown.id}/resolve",
                               json={"outcome": "did_not_happen", "note": "checked the far side"})
    assert resolved.status_code == 200, resolved.text
    after = (await world.as_("full_a", "GET", "/v1/stats?window=1s&attention=1h")).json()
    assert after["attention"] == {"unknown": 0, "dead": 1, "failed": 2}


def count_transactions(world: World, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the transactions the engine's store opens from now on (a one-element list)."""
    opened = [0]
    original: Callable[[], AbstractAsyncContextManager[Transaction]] = world.store.transaction

    def counting() -> AbstractAsyncContextManager[Transaction]:
        opened[0] += 1
        return original()

    monkeypatch.setattr(world.store, "transaction", counting)
    return opened


async def test_a_dry_run_by_filter_counts_in_one_statement_what_the_cancel_then_cancels(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    waiting = [await run_in(world, "alice", RunStatus.PENDING, f"w{i}") for i in range(12)]
    await run_in(world, "alice", RunStatus.SUCCEEDED, "done")
    await run_in(world, "bob", RunStatus.PENDING, "bobs")
    opened = count_transactions(world, monkeypatch)
    body: dict[str, Any] = {"filter": {"action_type": "simple.op"}}

    dry = (await world.as_("ops_a", "POST", "/v1/runs/bulk-cancel", json={**body, "dry_run": True})).json()
    assert opened[0] <= 3  # the key's authentication, the filter's one statement: never one per run
    assert (dry["count"], dry["truncated"]) == (12, False)
    assert sorted(dry["ids"]) == sorted(r.id for r in waiting)
    assert {i["status"] for i in dry["items"]} == {"would_apply"}
    applied = (await world.as_("ops_a", "POST", "/v1/runs/bulk-cancel", json=body)).json()
    assert applied["count"] == 12
    assert sorted(applied["ids"]) == sorted(dry["ids"])
    again = (await world.as_("ops_a", "POST", "/v1/runs/bulk-cancel", json={**body, "dry_run": True})).json()
    assert again["count"] == 0


async def test_a_dry_run_by_filter_says_when_the_filter_matches_more_than_one_call_takes(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(operations, "BULK_MAX", 3)
    for i in range(5):
        await run_in(world, "alice", RunStatus.PENDING, f"w{i}")
    dry = (await world.as_("ops_a", "POST", "/v1/runs/bulk-cancel",
                           json={"filter": {"statuses": ["PENDING"]}, "dry_run": True})).json()
    assert (dry["count"], dry["truncated"]) == (3, True)
    forbidden = await world.as_("ops_a", "POST", "/v1/runs/bulk-cancel",
                                json={"filter": {"owner_id": "bob"}, "dry_run": True})
    assert forbidden.status_code == 403
