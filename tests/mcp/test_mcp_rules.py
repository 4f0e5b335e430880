"""The rules the MCP server enforces (issue 12), each with a test that could fail: preview first, named
zones, run now confirmed this turn (elicitation or a single-use token), UNKNOWN never retried."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from mcp_world import DAILY_9, LOG, ZONE, World, answering, error_text, structured

from actwheel.storage.records import NewRun, Origin, Run, RunOutcome, RunStatus


async def _automation(world: World, credential: str = "full_a") -> dict[str, Any]:
    async with world.client(credential) as client:
        digest = structured(await client.call_tool("preview_trigger", {"trigger": DAILY_9}))["preview_digest"]
        created = await client.call_tool("create_automation", {"name": "morning", "trigger": DAILY_9,
                                                               "action": LOG, "preview_digest": digest})
    return dict(structured(created)["automation"])


async def _runs(world: World) -> list[Run]:
    async with world.engine.store.transaction() as tx:
        return await tx.runs.query(limit=100)


# --- rule 1: preview first ---------------------------------------------------------------------------------


async def test_create_without_a_digest_or_with_another_triggers_digest_is_refused(world: World) -> None:
    other = {**DAILY_9, "expression": "0 0 10 * * ?"}
    async with world.client("full_a") as client:
        stale = structured(await client.call_tool("preview_trigger", {"trigger": other}))["preview_digest"]
        missing = await client.call_tool("create_automation", {"name": "x", "trigger": DAILY_9, "action": LOG})
        mismatched = await client.call_tool("create_automation", {"name": "x", "trigger": DAILY_9, "action": LOG,
                                                                  "preview_digest": stale})
        forged = await client.call_tool("create_automation", {"name": "x", "trigger": DAILY_9, "action": LOG,
                                                               "preview_digest": "0" * 64})
        listed = structured(await client.call_tool("list_automations"))
    assert missing.is_error
    assert "preview_trigger" in error_text(mismatched)
    assert "show the user the fire times" in error_text(mismatched)
    assert "preview_trigger" in error_text(forged)
    assert listed["items"] == []


async def test_a_digest_covers_the_canonical_trigger_and_verifies_on_another_server(world: World) -> None:
    async with world.client("readonly_a") as client:
        digest = structured(await client.call_tool("preview_trigger", {"trigger": DAILY_9}))["preview_digest"]
    reordered = {"timezone": ZONE, "expression": "0 0 9 * * ?", "type": "cron"}
    async with world.client("full_a") as client:  # a server built anew: the key comes from the database
        created = await client.call_tool("create_automation", {"name": "x", "trigger": reordered, "action": LOG,
                                                               "preview_digest": digest})
    assert structured(created)["automation"]["trigger"]["expression"] == "0 0 9 * * ?"


async def test_an_update_changing_the_trigger_needs_that_triggers_digest(world: World) -> None:
    automation = await _automation(world)
    new_trigger = {**DAILY_9, "expression": "0 30 7 * * ?"}
    base = {"automation_id": automation["id"], "version": automation["version"]}
    async with world.client("full_a") as client:
        old_digest = structured(await client.call_tool("preview_trigger", {"trigger": DAILY_9}))["preview_digest"]
        refused = await client.call_tool("update_automation", {**base, "changes": {"trigger": new_trigger},
                                                               "preview_digest": old_digest})
        digest = structured(await client.call_tool("preview_trigger", {"trigger": new_trigger}))["preview_digest"]
        updated = structured(await client.call_tool("update_automation", {
            **base, "changes": {"trigger": new_trigger}, "preview_digest": digest}))
    assert "preview_trigger" in error_text(refused)
    assert updated["automation"]["trigger"]["expression"] == "0 30 7 * * ?"
    assert "07:30:00" in updated["summary"]


# --- rule 2: no guessed time zones -------------------------------------------------------------------------


@pytest.mark.parametrize("trigger", [
    {"type": "cron", "expression": "0 0 9 * * ?"},
    {"type": "once", "at": "2031-01-01T09:00:00+01:00"},
    {"type": "repeat", "repeat": "DAILY", "execute_time": "09:00"},
])
async def test_a_time_based_trigger_without_a_zone_is_refused_by_preview_and_create(
        world: World, trigger: dict[str, Any]) -> None:
    async with world.client("full_a") as client:
        preview = await client.call_tool("preview_trigger", {"trigger": trigger})
        create = await client.call_tool("create_automation", {"name": "x", "trigger": trigger, "action": LOG,
                                                              "preview_digest": "0" * 64})
    assert "trigger.timezone" in error_text(preview)
    assert "never guess" in error_text(preview)
    assert "trigger.timezone" in error_text(create)


async def test_a_naive_instant_is_refused_even_with_a_zone(world: World) -> None:
    async with world.client("full_a") as client:
        naive = await client.call_tool("preview_trigger", {"trigger": {"type": "once", "at": "2031-01-01T09:00:00",
                                                                       "timezone": ZONE}})
    assert "at" in error_text(naive)


# --- rule 4: run now needs this turn's confirmation ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_run_now_asks_the_user_and_runs_once_when_accepted(world: World, mode: str) -> None:
    automation = await _automation(world)
    asked: list[str] = []
    async with world.client("full_a", elicit=answering("accept", asked), mode=mode) as client:
        out = structured(await client.call_tool("run_automation_now", {"automation_id": automation["id"]}))
    assert out["status"] == "started"
    assert len(asked) == 1
    assert "“morning”" in asked[0]
    assert "simple.op" in asked[0]
    assert [r.id for r in await _runs(world)] == [out["run_id"]]
    assert out["run"]["origin"] == "manual"


@pytest.mark.parametrize("answer", ["decline", "cancel"])
async def test_run_now_declined_or_cancelled_creates_nothing(world: World, answer: str) -> None:
    automation = await _automation(world)
    async with world.client("full_a", elicit=answering(answer)) as client:
        out = structured(await client.call_tool("run_automation_now", {"automation_id": automation["id"]}))
    assert out["status"] == ("declined" if answer == "decline" else "cancelled")
    assert set(out) == {"status", "summary"}
    assert await _runs(world) == []


async def test_without_elicitation_the_first_call_only_answers_a_token(world: World) -> None:
    automation = await _automation(world)
    async with world.client("full_a") as client:
        out = structured(await client.call_tool("run_automation_now", {"automation_id": automation["id"]}))
    assert out["status"] == "confirmation_required"
    assert "“morning”" in out["summary"]
    assert out["confirmation_token"].startswith("awc_")
    assert set(out) == {"status", "summary", "confirmation_token", "expires_at"}  # the exact shape (rule 4)
    assert out["expires_at"] == (world.clock.now() + timedelta(minutes=2)).isoformat()
    assert await _runs(world) == []


async def test_the_token_starts_one_run_and_a_retry_returns_the_same_one(world: World) -> None:
    automation = await _automation(world)
    args = {"automation_id": automation["id"]}
    async with world.client("full_a") as client:
        token = structured(await client.call_tool("run_automation_now", args))["confirmation_token"]
        first = structured(await client.call_tool("run_automation_now", {**args, "confirmation_token": token}))
        world.clock.advance(300)  # a retry after the expiry still answers the same run
        again = structured(await client.call_tool("run_automation_now", {**args, "confirmation_token": token}))
    runs = await _runs(world)
    assert first["status"] == "started"
    assert set(first) == {"status", "summary", "run_id", "run"}  # the exact shape, with the restatement
    assert again["run_id"] == first["run_id"]
    assert [r.id for r in runs] == [first["run_id"]]
    assert runs[0].dedupe_key.startswith("manual:")
    assert runs[0].dedupe_key.removeprefix("manual:") in token


async def test_an_expired_token_starts_nothing(world: World) -> None:
    automation = await _automation(world)
    args = {"automation_id": automation["id"]}
    async with world.client("full_a") as client:
        token = structured(await client.call_tool("run_automation_now", args))["confirmation_token"]
        world.clock.advance(121)
        late = await client.call_tool("run_automation_now", {**args, "confirmation_token": token})
    assert "expired" in error_text(late)
    assert await _runs(world) == []


async def test_a_token_is_bound_to_its_key_automation_and_version(world: World) -> None:
    automation = await _automation(world)
    other = await _automation(world)
    args = {"automation_id": automation["id"]}
    async with world.client("full_a") as client:
        token = structured(await client.call_tool("run_automation_now", args))["confirmation_token"]
    async with world.client("full_a2") as client:  # the same owner, another key
        other_key = await client.call_tool("run_automation_now", {**args, "confirmation_token": token})
    async with world.client("full_b") as client:  # another owner
        other_owner = await client.call_tool("run_automation_now", {**args, "confirmation_token": token})
    async with world.client("full_a") as client:
        other_automation = await client.call_tool("run_automation_now", {"automation_id": other["id"],
                                                                         "confirmation_token": token})
        await client.call_tool("update_automation", {"automation_id": automation["id"],
                                                     "version": automation["version"], "changes": {"name": "new"}})
        changed = await client.call_tool("run_automation_now", {**args, "confirmation_token": token})
    for refused in (other_key, other_owner, other_automation):
        assert "confirmation_token" in error_text(refused)
    assert "version" in error_text(changed)
    assert await _runs(world) == []


async def test_run_now_modes_token_elicit_and_deny(world: World) -> None:
    automation = await _automation(world)
    args = {"automation_id": automation["id"]}
    async with world.client("full_a", elicit=answering("accept"), run_now="token") as client:
        token_mode = structured(await client.call_tool("run_automation_now", args))
    async with world.client("full_a", run_now="elicit") as client:
        elicit_only = await client.call_tool("run_automation_now", args)
    async with world.client("full_a", run_now="deny") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        denied = await client.call_tool("run_automation_now", args)
    assert token_mode["status"] == "confirmation_required"
    assert "elicitation" in error_text(elicit_only)
    assert "run_automation_now" not in names
    assert "deny" in error_text(denied)
    assert await _runs(world) == []


# --- rule 5: UNKNOWN is never retried -----------------------------------------------------------------------


async def _unknown_run(world: World, automation_id: str) -> str:
    async with world.engine.store.transaction() as tx:
        inserted = await tx.runs.insert(NewRun(automation_id=automation_id, dedupe_key="schedule:x",
                                               owner_id="alice", action_type="simple.op",
                                               action_config=LOG["config"], origin=Origin.SCHEDULE))
        claimed = await tx.runs.claim(inserted.run.id, "test", 30.0)
        assert claimed is not None
        assert await tx.runs.finish(RunOutcome(run_id=claimed.id, owner="test", epoch=claimed.lease_epoch,
                                               status=RunStatus.UNKNOWN, reason="lease_lost"))
    return inserted.run.id


async def test_an_unknown_run_comes_back_with_duplicate_risk_and_no_retry(world: World) -> None:
    automation = await _automation(world)
    run_id = await _unknown_run(world, automation["id"])
    async with world.client("readonly_a") as client:
        got = structured(await client.call_tool("get_run", {"run_id": run_id}))
        listed = structured(await client.call_tool("list_runs", {"status": "UNKNOWN"}))
    assert got["run"]["status"] == "UNKNOWN"
    assert (got["run"]["duplicate_risk"], got["run"]["retry_allowed"]) == (True, False)
    assert "may duplicate" in got["run"]["note"]
    assert [(r["id"], r["duplicate_risk"], r["retry_allowed"]) for r in listed["items"]] == [(run_id, True, False)]
    assert "lease_owner" not in got["run"]


async def test_run_now_after_an_unknown_run_warns_that_it_may_duplicate(world: World) -> None:
    automation = await _automation(world)
    await _unknown_run(world, automation["id"])
    asked: list[str] = []
    async with world.client("full_a") as client:
        token_answer = structured(await client.call_tool("run_automation_now", {"automation_id": automation["id"]}))
    async with world.client("full_a", elicit=answering("decline", asked)) as client:
        await client.call_tool("run_automation_now", {"automation_id": automation["id"]})
    assert "may duplicate" in token_answer["warning"]
    assert "may duplicate" in asked[0]
