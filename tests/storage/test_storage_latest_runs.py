"""Contract: the newest run of each of many automations in one statement (the automations page's "last
run"), owner-filtered, through ``runs_automation_time`` on both dialects."""

from __future__ import annotations

import json
import sqlite3

import pytest
from storage_harness import Backend, make_automation, make_run, new_run

from actwheel.errors import InvalidInput
from actwheel.storage import Store
from actwheel.storage._sql import load_queries
from actwheel.storage.records import RunOutcome, RunStatus


async def test_latest_of_is_the_newest_run_of_each_automation_and_omits_those_without(
        store: Store, backend: Backend) -> None:
    busy = await make_automation(store, name="busy")
    once = await make_automation(store, name="once")
    idle = await make_automation(store, name="idle")
    runs = []
    for i in range(3):
        runs.append(await make_run(store, busy, f"k{i}"))
        await backend.pass_time(store, 0.01)
    single = await make_run(store, once, "k0")
    async with store.transaction() as tx:
        claimed = await tx.runs.claim(runs[2].id, "w", 30)
        assert claimed is not None
        await tx.runs.finish(RunOutcome(run_id=claimed.id, owner="w", epoch=claimed.lease_epoch,
                                        status=RunStatus.SUCCEEDED))
        latest = await tx.runs.latest_of([busy.id, once.id, idle.id, busy.id, "no-such-automation"])
        assert await tx.runs.latest_of([]) == {}
    assert set(latest) == {busy.id, once.id}
    assert latest[busy.id].id == runs[2].id
    assert latest[busy.id].status is RunStatus.SUCCEEDED  # the row as it is now, not as it was inserted
    assert latest[once.id] == single


async def test_latest_of_with_an_owner_leaves_out_another_owners_automations(store: Store) -> None:
    alices = await make_automation(store, owner_id="alice")
    bobs = await make_automation(store, owner_id="bob")
    mine = await make_run(store, alices, "a")
    theirs = await make_run(store, bobs, "b")
    async with store.transaction() as tx:
        assert {k: r.id for k, r in (await tx.runs.latest_of([alices.id, bobs.id], owner_id="alice")).items()} == {
            alices.id: mine.id}
        assert {k: r.id for k, r in (await tx.runs.latest_of([alices.id, bobs.id])).items()} == {
            alices.id: mine.id, bobs.id: theirs.id}


async def test_latest_of_refuses_one_string_or_an_empty_id_naming_the_field(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as one_string:
            await tx.runs.latest_of("au_1")
        with pytest.raises(InvalidInput) as empty:
            await tx.runs.latest_of(["au_1", ""])
    assert one_string.value.field == "automation_ids"
    assert empty.value.field == "automation_ids[1]"


async def test_latest_of_probes_runs_automation_time_once_per_id(backend: Backend, store: Store) -> None:
    """Never an automation's whole history: one top-1 read of the (automation_id, created_at) index per id,
    even when many runs share their creation time (one transaction's), where ordering by ``(created_at, id)``
    made PostgreSQL walk runs_created backward and filter."""
    automations = [await make_automation(store, name=f"a{i}") for i in range(20)]
    async with store.transaction() as tx:
        await tx.runs.insert_many([new_run(a, f"k{j}") for a in automations for j in range(20)])
    ids = [a.id for a in automations[:5]]
    if backend.kind == "sqlite":
        query = load_queries("sqlite")["latest_runs_of"]
        with sqlite3.connect(backend.url.removeprefix("sqlite:///")) as conn:
            plan = " | ".join(str(row[-1]) for row in conn.execute(
                "EXPLAIN QUERY PLAN " + query.sql, {"ids": json.dumps(ids), "owner_id": None}))
        assert "USING INDEX runs_automation_time (automation_id=?)" in plan, plan
        return
    import asyncpg  # only here: the tests of the port itself may read the plan

    query = load_queries("postgres")["latest_runs_of"]
    dsn, _, options = backend.url.partition("?")
    conn = await asyncpg.connect(dsn, server_settings={"search_path": options.rsplit("search_path=", 1)[-1]})
    try:
        await conn.execute("ANALYZE runs")
        await conn.execute("SET enable_seqscan = off")  # a tiny table: ask which index the statement's shape takes
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + query.sql, ids, None))
    finally:
        await conn.close()
    assert "Index Scan Backward using runs_automation_time" in plan, plan
    assert "runs_created" not in plan, plan
