"""The ops dashboard's JSON API (issue 13) over HTTP, on SQLite and PostgreSQL: history, bulk changes,
manual run transitions, dead letters, stats and filters, each with its scopes and owner isolation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from api_support import World, automation_body

from actwheel.storage.records import NewDeadLetter, NewRun, Origin, Run, RunOutcome, RunStatus


async def create(world: World, credential: str, **overrides: Any) -> dict[str, Any]:
    answer = await world.as_(credential, "POST", "/v1/automations", json=automation_body(**overrides))
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def run_in(world: World, owner: str, status: RunStatus, *, automation_id: str | None = None,
                 key: str = "k", scheduled_for: Any = None) -> Run:
    """A run of ``owner`` brought to ``status`` the way the router would (claim, then finish)."""
    async with world.store.transaction() as tx:
        inserted = await tx.runs.insert(NewRun(
            automation_id=automation_id, dedupe_key=key, owner_id=owner, action_type="simple.op",
            action_config={"op": "log", "message": "hi"}, origin=Origin.SCHEDULE if scheduled_for else Origin.REQUEST,
            scheduled_for=scheduled_for))
    if status is RunStatus.PENDING:
        return inserted.run
    async with world.store.transaction() as tx:
        claimed = await tx.runs.claim(inserted.run.id, "worker", 30)
        assert claimed is not None
        if status is not RunStatus.RUNNING:
            assert await tx.runs.finish(RunOutcome(run_id=claimed.id, owner="worker", epoch=claimed.lease_epoch,
                                                   status=status, reason="test"))
        return await tx.runs.get(claimed.id)


async def test_history_records_each_change_with_before_and_after_and_only_for_the_owner(world: World) -> None:
    automation = await create(world, "full_a", name="first")
    aid = automation["id"]
    edited = await world.as_("full_a", "PATCH", f"/v1/automations/{aid}", json={"name": "second", "version": 1})
    assert edited.status_code == 200, edited.text
    assert (await world.as_("full_a", "POST", f"/v1/automations/{aid}/disable")).status_code == 200
    assert (await world.as_("full_a", "POST", f"/v1/automations/{aid}/enable")).status_code == 200
    assert (await world.as_("full_a", "DELETE", f"/v1/automations/{aid}")).status_code == 200

    answer = await world.as_("readonly_a", "GET", f"/v1/automations/{aid}/history")
    assert answer.status_code == 200, answer.text
    items = answer.json()["items"]
    assert [i["change"] for i in items] == ["created", "updated", "disabled", "enabled", "deleted"]
    assert {i["actor_id"] for i in items} == {"alice"}
    assert {i["key_id"] for i in items} == {world.key_ids["full_a"]}
    created, updated, disabled, enabled, deleted = items
    assert created["before"] is None
    assert created["after"]["name"] == "first"
    assert updated["before"]["name"] == "first"
    assert updated["after"]["name"] == "second"
    assert "trigger" not in updated["after"]  # only the fields that changed
    assert (disabled["before"]["enabled"], disabled["after"]["enabled"]) == (True, False)
    assert (enabled["before"]["enabled"], enabled["after"]["enabled"]) == (False, True)
    assert deleted["after"] is None
    assert deleted["before"]["name"] == "second"
    assert (await world.as_("full_b", "GET", f"/v1/automations/{aid}/history")).status_code == 404
    assert (await world.as_("admin", "GET", f"/v1/automations/{aid}/history")).status_code == 200
    assert (await world.as_("none", "GET", f"/v1/automations/{aid}/history")).status_code == 401


async def test_bulk_by_filter_touches_only_the_callers_and_the_dry_run_counts_what_is_applied(world: World) -> None:
    mine = [await create(world, "full_a", name=f"nightly {i}", labels={"team": "ops"}) for i in range(3)]
    await create(world, "full_a", name="other", labels={"team": "web"})
    theirs = await create(world, "full_b", name="nightly b", labels={"team": "ops"})
    body = {"op": "disable", "filter": {"labels": {"team": "ops"}, "q": "NIGHTLY"}}

    dry = await world.as_("full_a", "POST", "/v1/automations/bulk", json={**body, "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json()["count"] == 3
    assert sorted(dry.json()["ids"]) == sorted(a["id"] for a in mine)
    assert all(a["enabled"] for a in (await world.as_("full_a", "GET", "/v1/automations")).json()["items"])

    applied = await world.as_("full_a", "POST", "/v1/automations/bulk", json={**body, "note": "maintenance"})
    assert applied.json()["count"] == dry.json()["count"]
    assert {i["status"] for i in applied.json()["items"]} == {"applied"}
    listed = await world.as_("full_a", "GET", "/v1/automations?enabled=false&label.team=ops")
    assert sorted(a["id"] for a in listed.json()["items"]) == sorted(a["id"] for a in mine)
    bob = await world.as_("full_b", "GET", f"/v1/automations/{theirs['id']}")
    assert bob.json()["enabled"] is True
    history = await world.as_("full_a", "GET", f"/v1/automations/{mine[0]['id']}/history")
    assert [i["change"] for i in history.json()["items"]] == ["created", "disabled"]


async def test_bulk_by_ids_answers_each_id_and_never_reaches_another_owner(world: World) -> None:
    mine = await create(world, "full_a")
    theirs = await create(world, "full_b")
    ids = [mine["id"], theirs["id"], "no-such-id"]
    dry = (await world.as_("full_a", "POST", "/v1/automations/bulk",
                           json={"op": "delete", "ids": ids, "dry_run": True})).json()
    applied = (await world.as_("full_a", "POST", "/v1/automations/bulk", json={"op": "delete", "ids": ids})).json()
    assert [i["status"] for i in dry["items"]] == ["would_apply", "not_found", "not_found"]
    assert [i["status"] for i in applied["items"]] == ["applied", "not_found", "not_found"]
    assert dry["count"] == applied["count"] == 1
    assert (await world.as_("full_b", "GET", f"/v1/automations/{theirs['id']}")).status_code == 200
    refused = await world.as_("full_a", "POST", "/v1/automations/bulk", json={"op": "pause", "ids": ids})
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "op"


async def test_bulk_enable_keeps_the_double_scope_rule(world: World) -> None:
    hook = await create(world, "full_a", action={"type": "webhook.call", "config": {"url": "https://example.com/h"}},
                        enabled=False)
    _, token = await world.mint("full_a", {"name": "no-webhook", "scopes": ["automation:read", "automation:write"]})
    world.tokens["narrow"] = token
    body = {"op": "enable", "ids": [hook["id"]]}
    dry = (await world.as_("narrow", "POST", "/v1/automations/bulk", json={**body, "dry_run": True})).json()
    applied = (await world.as_("narrow", "POST", "/v1/automations/bulk", json=body)).json()
    assert dry["items"][0]["status"] == applied["items"][0]["status"] == "forbidden"
    assert dry["count"] == applied["count"] == 0


async def test_resolve_an_unknown_run_both_ways_with_a_note_and_only_while_it_is_unknown(world: World) -> None:
    first = await run_in(world, "alice", RunStatus.UNKNOWN, key="a")
    second = await run_in(world, "alice", RunStatus.UNKNOWN, key="b")
    path = f"/v1/runs/{first.id}/resolve"
    no_note = await world.as_("ops_a", "POST", path, json={"outcome": "happened"})
    assert no_note.status_code == 422
    assert no_note.json()["error"]["field"] == "note"
    assert (await world.as_("full_a", "POST", path, json={"outcome": "happened", "note": "x"})).status_code == 403
    assert (await world.as_("ops_b", "POST", path, json={"outcome": "happened", "note": "x"})).status_code == 404

    happened = await world.as_("ops_a", "POST", path, json={"outcome": "happened", "note": "saw it in the ledger"})
    assert happened.status_code == 200, happened.text
    assert (happened.json()["status"], happened.json()["reason"]) == ("SUCCEEDED", "resolved_manually")
    again = await world.as_("ops_a", "POST", path, json={"outcome": "did_not_happen", "note": "second thoughts"})
    assert again.status_code == 409
    other = await world.as_("ops_a", "POST", f"/v1/runs/{second.id}/resolve",
                            json={"outcome": "did_not_happen", "note": "nothing sent"})
    assert other.json()["status"] == "FAILED"

    trail = (await world.as_("full_a", "GET", f"/v1/runs/{first.id}")).json()["audit"]
    resolution = [e for e in trail if e["phase"] == "MANUAL_RESOLVE"]
    assert len(resolution) == 1
    assert resolution[0]["details"]["note"] == "saw it in the ledger"
    assert resolution[0]["details"]["key_id"] == world.key_ids["ops_a"]
    assert resolution[0]["actor"] == "alice"


async def test_resolve_is_a_compare_and_set_against_the_store(world: World) -> None:
    run = await run_in(world, "alice", RunStatus.UNKNOWN)
    async with world.store.transaction() as tx:
        assert await tx.runs.resolve_unknown(run.id, RunStatus.FAILED, "elsewhere") is not None
        assert await tx.runs.resolve_unknown(run.id, RunStatus.SUCCEEDED, "late") is None
    answer = await world.as_("ops_a", "POST", f"/v1/runs/{run.id}/resolve", json={"outcome": "happened", "note": "n"})
    assert answer.status_code == 409


async def test_retry_makes_one_new_run_from_the_snapshot_and_a_repeat_answers_the_same(world: World) -> None:
    failed = await run_in(world, "alice", RunStatus.FAILED)
    first = await world.as_("ops_a", "POST", f"/v1/runs/{failed.id}/retry")
    assert first.status_code == 202, first.text
    run = first.json()["run"]
    assert (run["dedupe_key"], run["origin"], run["status"]) == (f"retry:{failed.id}", "manual", "PENDING")
    assert run["action_config"] == failed.action_config
    assert run["context"]["$owner"]["id"] == "alice"
    repeat = await world.as_("ops_a", "POST", f"/v1/runs/{failed.id}/retry")
    assert repeat.status_code == 200
    assert repeat.json()["run_id"] == run["id"]
    assert not repeat.json()["created"]
    assert (await world.as_("ops_b", "POST", f"/v1/runs/{failed.id}/retry")).status_code == 404
    succeeded = await run_in(world, "alice", RunStatus.SUCCEEDED, key="ok")
    assert (await world.as_("ops_a", "POST", f"/v1/runs/{succeeded.id}/retry")).status_code == 409


async def test_a_retry_refusal_names_run_write_and_the_actions_scopes_together(world: World) -> None:
    async with world.store.transaction() as tx:
        inserted = await tx.runs.insert(NewRun(
            automation_id=None, dedupe_key="hook", owner_id="alice", action_type="webhook.call", origin=Origin.REQUEST,
            action_config={"url": "https://example.com/hook"}))
        claimed = await tx.runs.claim(inserted.run.id, "worker", 30)
        assert claimed is not None
        assert await tx.runs.finish(RunOutcome(run_id=claimed.id, owner="worker", epoch=claimed.lease_epoch,
                                               status=RunStatus.FAILED, reason="test"))
    _, token = await world.mint("admin", {"name": "reader", "principal_id": "alice", "scopes": ["run:read"]})
    world.tokens["reader_a"] = token
    refused = await world.as_("reader_a", "POST", f"/v1/runs/{inserted.run.id}/retry")
    assert refused.status_code == 403, refused.text
    assert {"run:write", "webhook:call"} <= set(refused.json()["error"]["missing_scopes"])
    assert (await world.as_("ops_b", "POST", f"/v1/runs/{inserted.run.id}/retry")).status_code == 404


async def test_cancel_a_waiting_run_once(world: World) -> None:
    automation = await create(world, "full_a")
    run = (await world.as_("full_a", "POST", f"/v1/automations/{automation['id']}/run")).json()["run"]
    assert (await world.as_("ops_b", "POST", f"/v1/runs/{run['id']}/cancel")).status_code == 404
    canceled = await world.as_("ops_a", "POST", f"/v1/runs/{run['id']}/cancel", json={"note": "wrong day"})
    assert canceled.status_code == 200, canceled.text
    assert (canceled.json()["status"], canceled.json()["reason"]) == ("CANCELED", "canceled_manually")
    assert (await world.as_("ops_a", "POST", f"/v1/runs/{run['id']}/cancel")).status_code == 409


async def test_bulk_cancel_by_filter_counts_what_it_cancels_and_leaves_other_owners_alone(world: World) -> None:
    waiting = [await run_in(world, "alice", RunStatus.PENDING, key=f"w{i}") for i in range(3)]
    await run_in(world, "alice", RunStatus.SUCCEEDED, key="done")
    bobs = await run_in(world, "bob", RunStatus.PENDING, key="b")
    body = {"filter": {"action_type": "simple.op"}}
    dry = (await world.as_("ops_a", "POST", "/v1/runs/bulk-cancel", json={**body, "dry_run": True})).json()
    applied = (await world.as_("ops_a", "POST", "/v1/runs/bulk-cancel", json=body)).json()
    assert dry["count"] == applied["count"] == 3
    assert sorted(applied["ids"]) == sorted(r.id for r in waiting)
    async with world.store.transaction() as tx:
        assert (await tx.runs.get(bobs.id)).status is RunStatus.PENDING


async def test_dead_letters_list_requeue_and_discard_are_admin_only(world: World) -> None:
    dead = await run_in(world, "alice", RunStatus.DEAD)
    async with world.store.transaction() as tx:
        of_run = await tx.dead_letters.add(NewDeadLetter(source="run", reason="compensation_failed", ref_id=dead.id))
        other = await tx.dead_letters.add(NewDeadLetter(source="bus", reason="unroutable", ref_id="m1"))
    assert (await world.as_("full_a", "GET", "/v1/dead-letters")).status_code == 403
    listed = await world.as_("admin", "GET", "/v1/dead-letters")
    assert sorted(d["id"] for d in listed.json()["items"]) == sorted([of_run.id, other.id])
    assert (await world.as_("admin", "GET", f"/v1/dead-letters/{of_run.id}")).json()["ref_id"] == dead.id

    requeued = await world.as_("admin", "POST", f"/v1/dead-letters/{of_run.id}/requeue")
    assert requeued.status_code == 202, requeued.text
    assert requeued.json()["run"]["dedupe_key"] == f"retry:{dead.id}"
    assert (await world.as_("admin", "GET", f"/v1/dead-letters/{of_run.id}")).status_code == 404
    unsupported = await world.as_("admin", "POST", f"/v1/dead-letters/{other.id}/requeue")
    assert unsupported.status_code == 422
    assert (unsupported.json()["error"]["code"], unsupported.json()["error"]["value"]) == ("unsupported", "bus")
    assert (await world.as_("full_a", "DELETE", f"/v1/dead-letters/{other.id}")).status_code == 403
    assert (await world.as_("admin", "DELETE", f"/v1/dead-letters/{other.id}")).status_code == 200
    assert (await world.as_("admin", "GET", "/v1/dead-letters")).json()["items"] == []


async def test_stats_count_and_rank_a_known_data_set(world: World) -> None:
    async with world.store.transaction() as tx:
        now = await tx.now()
    # alice: 10 scheduled runs, 1..10 s late at creation; bob: one 100 s late, then claimed
    for late in range(1, 11):
        await run_in(world, "alice", RunStatus.PENDING, key=f"s{late}", scheduled_for=now - timedelta(seconds=late))
    await run_in(world, "alice", RunStatus.UNKNOWN, key="u")
    await run_in(world, "bob", RunStatus.RUNNING, key="b", scheduled_for=now - timedelta(seconds=100))
    async with world.store.transaction() as tx:
        await tx.dead_letters.add(NewDeadLetter(source="run", reason="x"))
        await tx.runs.insert(NewRun(automation_id=None, dedupe_key="skip", owner_id="alice", action_type="simple.op",
                                    status=RunStatus.SKIPPED, reason="overlap"))

    mine = (await world.as_("full_a", "GET", "/v1/stats?window=15m")).json()
    assert (mine["scope"], mine["owner_id"]) == ("owner", "alice")
    assert mine["by_status"] == {"PENDING": 10, "SKIPPED": 1, "UNKNOWN": 1}
    assert mine["skipped_by_reason"] == {"overlap": 1}
    assert mine["attention"] == {"unknown": 1, "dead": 0, "failed": 0}  # within the window
    assert mine["outbox"] is None
    assert mine["dead_letters"] is None
    fire = mine["fire_lateness_s"]
    assert fire["count"] == 10
    # nearest rank of 1..10 s (plus the time between reading now and inserting: 0 on the virtual clock)
    assert 5 <= fire["p50"] < 6
    assert 10 <= fire["p95"] < 11
    assert 10 <= fire["p99"] < 11
    assert mine["start_lateness_s"]["count"] == 0
    assert mine["runs_per_minute"]["last_5m"] == 12 / 5

    cluster = (await world.as_("admin", "GET", "/v1/stats?window=1h")).json()
    assert cluster["scope"] == "cluster"
    assert cluster["by_status"] == {"PENDING": 10, "RUNNING": 1, "SKIPPED": 1, "UNKNOWN": 1}
    assert cluster["fire_lateness_s"]["count"] == 11
    assert cluster["fire_lateness_s"]["p99"] >= 100
    assert cluster["start_lateness_s"]["count"] == 1
    assert cluster["start_lateness_s"]["p50"] >= 100
    assert cluster["dead_letters"] == {"run": 1}
    assert cluster["attention"]["dead_letters"] == 1
    assert cluster["outbox"]["backlog"] >= 0
    assert (await world.as_("full_a", "GET", "/v1/stats?window=9y")).status_code == 422


async def test_runs_filter_by_several_statuses_and_page_with_the_cursor(world: World) -> None:
    for i in range(5):
        await run_in(world, "alice", RunStatus.FAILED if i % 2 else RunStatus.DEAD, key=f"r{i}")
    await run_in(world, "alice", RunStatus.SUCCEEDED, key="ok")
    await run_in(world, "bob", RunStatus.DEAD, key="bob")
    first = (await world.as_("full_a", "GET", "/v1/runs?status=FAILED,DEAD&limit=3&origin=request")).json()
    assert len(first["items"]) == 3
    assert first["next"]
    rest = (await world.as_("full_a", "GET", f"/v1/runs?status=FAILED,DEAD&limit=3&before={first['next']}")).json()
    ids = [r["id"] for r in first["items"] + rest["items"]]
    assert len(ids) == len(set(ids)) == 5
    assert rest["next"] is None
    assert {r["owner_id"] for r in first["items"] + rest["items"]} == {"alice"}
    everyone = (await world.as_("admin", "GET", "/v1/runs?owner_id=*&status=DEAD")).json()["items"]
    assert {r["owner_id"] for r in everyone} == {"alice", "bob"}
    assert (await world.as_("full_a", "GET", "/v1/runs?owner_id=*")).status_code == 403
    assert (await world.as_("full_a", "GET", "/v1/runs?before=nonsense")).status_code == 422


async def test_system_lists_the_heartbeats_and_needs_admin(world: World) -> None:
    await world.engine.control.stats.beat()
    assert (await world.as_("full_a", "GET", "/v1/system")).status_code == 403
    system = (await world.as_("admin", "GET", "/v1/system")).json()
    assert [i["id"] for i in system["instances"]] == ["t"]
    assert system["instances"][0]["alive"]
    assert system["this_instance"]["bus"]["published"] >= 0
    assert system["this_instance"]["bus_scope"] == "this instance"
