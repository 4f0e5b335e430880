"""Object level: bob (a full key) reaches none of alice's automations (durable or not), runs, secrets or
keys — by id each answers exactly what a missing id answers, by filter an own-only list — and a
cascade by session or agent touches only the caller's. An agent key reaches only its agent's
automations, runs and keys, and mints keys of its agent only. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from api_support import World, automation_body, bearer

from actwheel.actions.secrets import KEY_ENV, SecretCipher
from actwheel.auth.authenticator import CACHE_TTL_S
from actwheel.errors import InvalidInput, NotFound
from actwheel.service import Caller

MISSING = "au_doesnotexist0000"
LABELS = {"session_id": "s1", "agent_id": "alice-bot"}


def same_as_missing(answer: httpx.Response, missing: httpx.Response, real_id: str, missing_id: str) -> bool:
    return (answer.status_code, answer.text.replace(real_id, missing_id)) == (missing.status_code, missing.text)


async def create(world: World, credential: str, **overrides: Any) -> dict[str, Any]:
    answer = await world.as_(credential, "POST", "/v1/automations", json=automation_body(**overrides))
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


ATTEMPTS = [("GET", "", None), ("PATCH", "", {"version": 1, "name": "mine now"}), ("POST", "/enable", None),
            ("POST", "/disable", None), ("POST", "/run", None), ("DELETE", "", None)]


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "transient"])
async def test_bob_reaches_none_of_alices_automations(world: World, durable: bool) -> None:
    alices = await create(world, "full_a", labels=LABELS, durable=durable)
    assert alices["id"].startswith("tr_") is not durable
    bobs = await create(world, "full_b", labels=LABELS, durable=durable)
    missing_id = "tr_doesnotexist0000" if not durable else MISSING
    for method, suffix, body in ATTEMPTS:
        kwargs = {"json": body} if body is not None else {}
        answer = await world.as_("full_b", method, f"/v1/automations/{alices['id']}{suffix}", **kwargs)
        missing = await world.as_("full_b", method, f"/v1/automations/{missing_id}{suffix}", **kwargs)
        assert answer.status_code == 404, (method, suffix, answer.text)
        assert same_as_missing(answer, missing, alices["id"], missing_id), (method, suffix)
    for query in ("", "?session_id=s1", "?agent_id=alice-bot", f"?after_id={alices['id'][:3]}"):
        listed = await world.as_("full_b", "GET", f"/v1/automations{query}")
        assert [a["id"] for a in listed.json()["items"]] == [bobs["id"]], query
    untouched = await world.as_("full_a", "GET", f"/v1/automations/{alices['id']}")
    assert (untouched.status_code, untouched.json()["version"], untouched.json()["enabled"]) == (200, 1, True)
    assert untouched.json()["name"] == "minutely"
    async with world.store.transaction() as tx:
        assert await tx.runs.query(owner_id="alice", limit=10) == []


async def test_bob_reads_none_of_alices_runs_or_their_trails(world: World) -> None:
    alices = await create(world, "full_a")
    ran = await world.as_("full_a", "POST", f"/v1/automations/{alices['id']}/run")
    assert ran.status_code == 202
    run_id = ran.json()["run_id"]
    mine = await world.as_("full_a", "GET", f"/v1/runs/{run_id}")
    assert (mine.status_code, mine.json()["id"]) == (200, run_id)
    answer = await world.as_("full_b", "GET", f"/v1/runs/{run_id}")
    missing = await world.as_("full_b", "GET", "/v1/runs/ru_doesnotexist0000")
    assert answer.status_code == 404
    assert same_as_missing(answer, missing, run_id, "ru_doesnotexist0000")
    for query in (f"?automation_id={alices['id']}", "", "?status=PENDING"):
        listed = await world.as_("full_b", "GET", f"/v1/runs{query}")
        assert (listed.status_code, listed.json()["items"]) == (200, []), query
    assert [r["id"] for r in (await world.as_("full_a", "GET", "/v1/runs")).json()["items"]] == [run_id]


async def test_another_owner_by_filter_needs_admin_read(world: World) -> None:
    alices = await create(world, "full_a")
    await world.engine.control.automations.run_now(world.callers["full_a"], alices["id"])
    for path in ("/v1/automations?owner_id=alice", "/v1/runs?owner_id=alice"):
        refused = await world.as_("full_b", "GET", path)
        assert refused.status_code == 403, path
        assert refused.json()["error"]["missing_scopes"] == ["admin:read"]
        seen = await world.as_("admin", "GET", path)
        assert seen.status_code == 200
        assert {item["owner_id"] for item in seen.json()["items"]} == {"alice"}, path
        assert len(seen.json()["items"]) == 1
    own = await world.as_("full_b", "GET", "/v1/automations?owner_id=bob")
    assert (own.status_code, own.json()["items"]) == (200, [])
    keys = await world.as_("full_b", "GET", "/v1/keys?principal_id=alice")
    assert (keys.status_code, keys.json()["error"]["missing_scopes"]) == (403, ["admin:read"])


async def test_bob_lists_none_of_alices_secret_names(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SecretCipher.generate_key())
    stored = await world.as_("full_a", "POST", "/v1/secrets", json={"name": "alice-token", "value": "s3cr3t-value"})
    assert stored.status_code == 201, stored.text
    assert (await world.as_("full_b", "GET", "/v1/secrets")).json()["items"] == []
    alices = (await world.as_("full_a", "GET", "/v1/secrets")).json()["items"]
    assert [s["name"] for s in alices] == ["alice-token"]
    assert "s3cr3t-value" not in stored.text + str(alices)


async def test_bob_can_neither_revoke_nor_rotate_alices_keys(world: World) -> None:
    key_id = world.key_ids["full_a"]
    for method, path in (("DELETE", f"/v1/keys/{key_id}"), ("POST", f"/v1/keys/{key_id}/rotate")):
        answer = await world.as_("full_b", method, path, **({"json": {}} if method == "POST" else {}))
        missing = await world.as_("full_b", method, path.replace(key_id, "000000000000"),
                                  **({"json": {}} if method == "POST" else {}))
        assert answer.status_code == 404, answer.text
        assert same_as_missing(answer, missing, key_id, "000000000000")
    assert (await world.as_("full_a", "GET", "/v1/whoami")).status_code == 200
    listed = (await world.as_("full_b", "GET", "/v1/keys")).json()["items"]
    assert {k["principal_id"] for k in listed} == {"bob"}


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "transient"])
@pytest.mark.parametrize("by", ["session_id", "agent_id"])
async def test_a_cascade_touches_only_the_callers(world: World, durable: bool, by: str) -> None:
    alices = await create(world, "full_a", labels=LABELS, durable=durable)
    bobs = await create(world, "full_b", labels=LABELS, durable=durable)
    deleted = await world.engine.control.automations.delete_by(world.callers["full_b"], **{by: LABELS[by]})
    assert list(deleted.automation_ids) == [bobs["id"]]
    assert (await world.as_("full_a", "GET", f"/v1/automations/{alices['id']}")).status_code == 200
    assert (await world.as_("full_b", "GET", f"/v1/automations/{bobs['id']}")).status_code == 404
    again = await world.engine.control.automations.delete_by(world.callers["full_b"], **{by: LABELS[by]})
    assert list(again.automation_ids) == []


async def test_an_agent_key_creates_only_its_agents_automations(world: World) -> None:
    made = await create(world, "agent_a")
    assert made["labels"]["agent_id"] == "alice-bot"
    assert (await world.as_("agent_a", "GET", f"/v1/automations/{made['id']}")).status_code == 200
    assert [a["id"] for a in (await world.as_("agent_a", "GET", "/v1/automations")).json()["items"]] == [made["id"]]
    other = await world.as_("agent_a", "POST", "/v1/automations",
                            json=automation_body(labels={"agent_id": "someone-else"}))
    assert (other.status_code, other.json()["error"]["field"]) == (422, "labels.agent_id")
    moved = await world.as_("agent_a", "PATCH", f"/v1/automations/{made['id']}",
                            json={"version": made["version"], "labels": {"agent_id": "someone-else"}})
    assert (moved.status_code, moved.json()["error"]["field"]) == (422, "labels.agent_id")
    relabelled = await world.as_("agent_a", "PATCH", f"/v1/automations/{made['id']}",
                                 json={"version": made["version"], "labels": {"session_id": "s9"}})
    assert relabelled.status_code == 200, relabelled.text
    assert relabelled.json()["labels"] == {"session_id": "s9", "agent_id": "alice-bot"}
    assert (await world.as_("full_a", "GET", f"/v1/automations/{made['id']}")).status_code == 200


async def test_an_agent_key_reads_the_runs_of_its_agents_automations_only(world: World) -> None:
    own = await create(world, "agent_a")
    others = await create(world, "full_a")  # alice's, made without the agent
    own_run = (await world.as_("full_a", "POST", f"/v1/automations/{own['id']}/run")).json()["run_id"]
    other_run = (await world.as_("full_a", "POST", f"/v1/automations/{others['id']}/run")).json()["run_id"]
    listed = await world.as_("agent_a", "GET", f"/v1/runs?automation_id={own['id']}")
    assert [r["id"] for r in listed.json()["items"]] == [own_run]
    assert (await world.as_("agent_a", "GET", f"/v1/runs/{own_run}")).status_code == 200
    assert (await world.as_("agent_a", "GET", f"/v1/runs/{other_run}")).status_code == 404
    assert (await world.as_("agent_a", "GET", f"/v1/runs?automation_id={others['id']}")).status_code == 404
    unfiltered = await world.as_("agent_a", "GET", "/v1/runs")
    assert (unfiltered.status_code, unfiltered.json()["error"]["field"]) == (422, "automation_id")
    # alice herself still reads both
    assert (await world.as_("full_a", "GET", f"/v1/runs/{other_run}")).status_code == 200


async def test_an_agent_key_mints_keys_of_its_agent_for_its_user_only(world: World) -> None:
    minted = await world.as_("agent_a", "POST", "/v1/keys", json={"name": "sub", "scopes": ["automation:read"]})
    assert minted.status_code == 201, minted.text
    assert (minted.json()["principal_id"], minted.json()["agent_id"]) == ("alice", "alice-bot")
    me = (await world.http.get("/v1/whoami", headers=bearer(minted.json()["key"]))).json()
    assert (me["principal_id"], me["kind"], me["agent_id"]) == ("alice-bot", "agent", "alice-bot")
    await world.as_("admin", "POST", "/v1/principals", json={"id": "alice-bot-2", "kind": "agent",
                                                            "parent_id": "alice", "scopes": ["automation:read"]})
    explicit = await world.as_("agent_a", "POST", "/v1/keys", json={"name": "same", "scopes": [],
                                                                   "principal_id": "alice", "agent_id": "alice-bot"})
    assert explicit.status_code == 201, explicit.text
    for escape, field in (({"agent_id": "alice-bot-2"}, "agent_id"), ({"principal_id": "bob"}, "principal_id"),
                          ({"principal_id": "alice-bot"}, "principal_id"), ({"principal_id": "admin"}, "principal_id")):
        refused = await world.as_("agent_a", "POST", "/v1/keys", json={"name": "x", "scopes": [], **escape})
        assert (refused.status_code, refused.json()["error"]["field"]) == (422, field), (escape, refused.text)
        assert refused.json()["error"]["value"] == next(iter(escape.values()))
    async with world.store.transaction() as tx:
        alices = await tx.api_keys.for_owner("alice")
    assert {k.agent_id for k in alices if k.name in ("sub", "same", "x")} == {"alice-bot"}
    assert len([k for k in alices if k.name == "x"]) == 0


async def test_an_agent_key_lists_revokes_and_rotates_only_its_agents_keys(world: World) -> None:
    own_id, _ = await world.mint("agent_a", {"name": "own", "scopes": ["automation:read"]})
    listed = (await world.as_("agent_a", "GET", "/v1/keys")).json()["items"]
    assert {k["agent_id"] for k in listed} == {"alice-bot"}
    assert {k["id"] for k in listed} == {world.key_ids["agent_a"], own_id}
    foreign = await world.as_("agent_a", "GET", "/v1/keys?principal_id=bob")
    assert (foreign.status_code, foreign.json()["error"]["field"]) == (422, "principal_id")
    for victim in ("full_a", "readonly_a", "full_b", "admin"):
        key_id = world.key_ids[victim]
        for method, path in (("DELETE", f"/v1/keys/{key_id}"), ("POST", f"/v1/keys/{key_id}/rotate")):
            answer = await world.as_("agent_a", method, path, **({"json": {}} if method == "POST" else {}))
            missing = await world.as_("agent_a", method, path.replace(key_id, "000000000000"),
                                      **({"json": {}} if method == "POST" else {}))
            assert answer.status_code == 404, (victim, method, answer.text)
            assert same_as_missing(answer, missing, key_id, "000000000000")
    world.clock.advance(CACHE_TTL_S)
    assert (await world.as_("full_a", "GET", "/v1/whoami")).status_code == 200
    async with world.store.transaction() as tx:
        untouched = [await tx.api_keys.get(world.key_ids[v]) for v in ("full_a", "readonly_a", "full_b", "admin")]
    assert [(k.revoked, k.replaced_by) for k in untouched] == [(False, None)] * 4
    rotated = await world.as_("agent_a", "POST", f"/v1/keys/{own_id}/rotate", json={"grace_s": 0})
    assert (rotated.status_code, rotated.json()["agent_id"]) == (201, "alice-bot")
    revoked = await world.as_("agent_a", "DELETE", f"/v1/keys/{rotated.json()['id']}")
    assert (revoked.status_code, revoked.json()["revoked"]) == (200, True)


async def test_an_agent_caller_holding_admin_scopes_still_reaches_only_its_agents_keys(world: World) -> None:
    """The service itself, whichever face asks: an agent-bound caller's admin scopes never widen its reach."""
    agent = Caller("alice", frozenset({"*"}), "alice-bot", "agent", agent_id="alice-bot")
    keys = world.engine.control.keys
    for act in (lambda k: keys.revoke(agent, k), lambda k: keys.rotate(agent, k, {})):
        with pytest.raises(NotFound):
            await act(world.key_ids["full_a"])
    assert {k.agent_id for k in await keys.list(agent)} == {"alice-bot"}
    with pytest.raises(InvalidInput) as other:
        await keys.list(agent, principal_id="bob")
    assert (other.value.field, other.value.value) == ("principal_id", "bob")
