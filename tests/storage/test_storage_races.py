"""Contract: the invariants hold under real concurrency — many tasks, several stores
(each with its own connections: a pool per store on PostgreSQL, a connection per store on SQLite)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import TypeVar

from storage_harness import T0, Backend, make_automation, make_run, new_run

from actwheel.storage import Store
from actwheel.storage.records import RunOutcome, RunStatus

CONTENDERS = 50
STORES = 5
_T = TypeVar("_T")


@asynccontextmanager
async def stores(backend: Backend) -> AsyncIterator[list[Store]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(backend.opened()) for _ in range(STORES)]


async def race(stores_: list[Store], attempt: Callable[[Store, int], Awaitable[_T]]) -> list[_T]:
    """Run CONTENDERS attempts (numbered 0..49) at once, spread over the stores, released by one gate."""
    gate = asyncio.Event()

    async def contender(i: int) -> _T:
        await gate.wait()
        return await attempt(stores_[i % len(stores_)], i)

    tasks = [asyncio.create_task(contender(i)) for i in range(CONTENDERS)]
    await asyncio.sleep(0)  # let every contender reach the gate
    gate.set()
    return await asyncio.gather(*tasks)


async def test_50_concurrent_inserts_of_one_run_make_one_row(store: Store, backend: Backend) -> None:
    a = await make_automation(store)

    async def insert(s: Store, i: int) -> tuple[str, bool]:
        async with s.transaction() as tx:
            result = await tx.runs.insert(new_run(a, "schedule:2030-01-01T09:00:00Z"))
        return result.run.id, result.created

    async with stores(backend) as many:
        results = await race(many, insert)
    assert sum(created for _, created in results) == 1
    assert len({run_id for run_id, _ in results}) == 1
    async with store.transaction() as tx:
        assert len(await tx.runs.query(automation_id=a.id)) == 1


async def test_50_concurrent_batched_inserts_make_one_row_per_key(store: Store, backend: Backend) -> None:
    a = await make_automation(store)
    keys = [f"schedule:{i}" for i in range(10)]

    async def insert(s: Store, i: int) -> int:
        async with s.transaction() as tx:
            results = await tx.runs.insert_many([new_run(a, k) for k in keys])
        return sum(r.created for r in results)

    async with stores(backend) as many:
        created = await race(many, insert)
    assert sum(created) == len(keys)
    async with store.transaction() as tx:
        assert len(await tx.runs.query(automation_id=a.id)) == len(keys)


async def test_50_concurrent_cursor_advances_have_one_winner(store: Store, backend: Backend) -> None:
    a = await make_automation(store)

    async def advance(s: Store, i: int) -> bool:
        async with s.transaction() as tx:
            return await tx.automations.advance_cursor(a.id, 1, T0, T0 + timedelta(days=1))

    async with stores(backend) as many:
        results = await race(many, advance)
    assert results.count(True) == 1


async def test_50_concurrent_fires_insert_exactly_one_run(store: Store, backend: Backend) -> None:
    """The planner's unit of work: CAS the cursor, and only the winner inserts the run."""
    a = await make_automation(store)

    async def fire(s: Store, i: int) -> bool:
        async with s.transaction() as tx:
            if not await tx.automations.advance_cursor(a.id, 1, T0, T0 + timedelta(days=1)):
                return False
            return (await tx.runs.insert(new_run(a, "schedule:t0"))).created

    async with stores(backend) as many:
        results = await race(many, fire)
    assert results.count(True) == 1


async def test_50_concurrent_claims_have_one_owner(store: Store, backend: Backend) -> None:
    run = await make_run(store, await make_automation(store))

    async def claim(s: Store, i: int) -> str | None:
        owner = f"worker-{i}"
        async with s.transaction() as tx:
            claimed = await tx.runs.claim(run.id, owner, 30)
        return None if claimed is None else owner

    async with stores(backend) as many:
        owners = [o for o in await race(many, claim) if o is not None]
    assert len(owners) == 1
    async with store.transaction() as tx:
        current = await tx.runs.get(run.id)
    assert current.lease_owner == owners[0]
    assert current.lease_epoch == 1


async def test_50_concurrent_batched_claims_split_runs_without_overlap(store: Store, backend: Backend) -> None:
    a = await make_automation(store)
    async with store.transaction() as tx:
        runs = [r.run for r in await tx.runs.insert_many([new_run(a, f"k{i}") for i in range(40)])]
    ids = [r.id for r in runs]

    async def claim(s: Store, i: int) -> list[str]:
        async with s.transaction() as tx:
            return [r.id for r in await tx.runs.claim_many(ids, f"w{i}", 30)]

    async with stores(backend) as many:
        won = [run_id for batch in await race(many, claim) for run_id in batch]
    assert len(won) == len(set(won))  # no run claimed twice
    async with store.transaction() as tx:
        leftovers = await tx.runs.claim_many(ids, "sweeper", 30)
    assert sorted(won + [r.id for r in leftovers]) == sorted(ids)  # a skipped (locked) run stays claimable


async def test_zombie_and_successor_finishing_at_once_one_wins(store: Store, backend: Backend) -> None:
    run = await make_run(store, await make_automation(store))
    async with store.transaction() as tx:
        zombie = await tx.runs.claim(run.id, "zombie", 0.05)
    assert zombie is not None
    await backend.pass_time(store, 0.1)
    async with store.transaction() as tx:
        assert await tx.runs.recover_expired(run.id, zombie.lease_epoch, RunStatus.PENDING)
        successor = await tx.runs.claim(run.id, "successor", 30)
    assert successor is not None

    async def finish(s: Store, i: int) -> bool:
        mine = successor if i % 2 else zombie
        async with s.transaction() as tx:
            return await tx.runs.finish(RunOutcome(run_id=run.id, owner=mine.lease_owner or "",
                                                   epoch=mine.lease_epoch, status=RunStatus.SUCCEEDED))

    async with stores(backend) as many:
        results = await race(many, finish)
    assert results.count(True) == 1  # the successor, once
    assert all(not won for i, won in enumerate(results) if i % 2 == 0)  # never the zombie
    async with store.transaction() as tx:
        assert (await tx.runs.get(run.id)).status is RunStatus.SUCCEEDED


async def test_disable_racing_claims_leaves_no_run_both_canceled_and_running(store: Store, backend: Backend) -> None:
    a = await make_automation(store)
    async with store.transaction() as tx:
        runs = [r.run for r in await tx.runs.insert_many([new_run(a, f"k{i}") for i in range(20)])]

    async def claim_or_disable(s: Store, i: int) -> None:
        async with s.transaction() as tx:
            if i % 5 == 0:
                await tx.automations.set_enabled(a.id, False)
            else:
                await tx.runs.claim_many([r.id for r in runs], "w", 30)

    async with stores(backend) as many:
        await race(many, claim_or_disable)
        async with many[0].transaction() as tx:
            await tx.automations.set_enabled(a.id, False)  # at least once
    async with store.transaction() as tx:
        final = await tx.runs.query(automation_id=a.id)
    assert {r.status for r in final} <= {RunStatus.RUNNING, RunStatus.CANCELED}
    assert all((r.status is RunStatus.RUNNING) == (r.lease_owner == "w") for r in final)
