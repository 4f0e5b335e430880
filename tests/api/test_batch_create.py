"""``POST /v1/automations/batch`` and group commit of single creates (issue 15), on SQLite and PostgreSQL:
all-or-nothing validation naming every bad item, the caller owns them, the route's and the double-scope
rule's scopes per item; concurrent single creates each get their own automation, and a failing one fails
alone."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from api_support import WEBHOOK, World, automation_body

from actwheel.errors import Conflict
from actwheel.service.automations import MAX_BATCH
from actwheel.storage._automations import SqlAutomations
from actwheel.storage.records import NewAutomation

NO_HOOK = ["action:request", "automation:read", "automation:write", "run:read"]


async def stored(world: World, credential: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await world.as_(credential, "GET", "/v1/automations", params={"limit": 1000})
                                   ).json()["items"]
    return items


async def test_a_batch_is_stored_in_order_and_owned_by_the_caller(world: World) -> None:
    items = [automation_body(name=f"n{i}") for i in range(5)]
    answer = await world.as_("full_a", "POST", "/v1/automations/batch", json={"items": items})
    assert answer.status_code == 201, answer.text
    created = answer.json()["items"]
    assert [a["name"] for a in created] == [f"n{i}" for i in range(5)]
    assert {a["owner_id"] for a in created} == {"alice"}
    assert all(a["next_run_at"] for a in created)
    assert sorted(a["id"] for a in await stored(world, "full_a")) == sorted(a["id"] for a in created)
    history = await world.as_("full_a", "GET", f"/v1/automations/{created[2]['id']}/history")
    assert [h["change"] for h in history.json()["items"]] == ["created"]


async def test_every_bad_item_is_named_and_nothing_is_stored(world: World) -> None:
    items = [automation_body(name="good"),
             automation_body(trigger={"type": "cron", "expression": "not a cron"}),
             automation_body(name="good too"),
             automation_body(action={"type": "no.such.type", "config": {}}, owner_id="bob")]
    answer = await world.as_("full_a", "POST", "/v1/automations/batch", json={"items": items})
    assert answer.status_code == 422, answer.text
    fields = {e["field"] for e in answer.json()["error"]["errors"]}
    assert any(f.startswith("items[1].trigger") for f in fields), fields
    assert "items[3].owner_id" in fields
    assert any(f.startswith("items[3].action") for f in fields), fields
    assert not any(f.startswith(("items[0]", "items[2]")) for f in fields), fields
    assert await stored(world, "full_a") == []


@pytest.mark.parametrize("body", [{"items": []}, {"items": {"a": 1}}, {},
                                  {"items": [automation_body()] * (MAX_BATCH + 1)},
                                  {"items": [automation_body()], "extra": 1}])
async def test_a_batch_that_is_not_1_to_1000_items_is_refused(world: World, body: dict[str, Any]) -> None:
    answer = await world.as_("full_a", "POST", "/v1/automations/batch", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["errors"][0]["field"] in ("items", "body")
    assert await stored(world, "full_a") == []


async def test_non_durable_items_are_refused(world: World) -> None:
    items = [automation_body(), automation_body(durable=False)]
    answer = await world.as_("full_a", "POST", "/v1/automations/batch", json={"items": items})
    assert answer.status_code == 422, answer.text
    assert [e["field"] for e in answer.json()["error"]["errors"]] == ["items[1].durable"]


async def test_another_owner_never_sees_a_batch(world: World) -> None:
    answer = await world.as_("full_b", "POST", "/v1/automations/batch", json={"items": [automation_body()] * 3})
    assert answer.status_code == 201, answer.text
    assert await stored(world, "full_a") == []
    one = answer.json()["items"][0]["id"]
    assert (await world.as_("full_a", "GET", f"/v1/automations/{one}")).status_code == 404
    assert len(await stored(world, "full_b")) == 3


async def test_the_route_needs_automation_write(world: World) -> None:
    answer = await world.as_("readonly_a", "POST", "/v1/automations/batch", json={"items": [automation_body()]})
    assert answer.status_code == 403, answer.text
    assert (await world.as_("none", "POST", "/v1/automations/batch", json={"items": []})).status_code == 401


async def test_the_double_scope_rule_holds_per_item_and_refuses_the_whole_batch(world: World) -> None:
    _, token = await world.mint("full_a", {"name": "no hook", "scopes": NO_HOOK})
    world.tokens["no_hook"] = token
    items = [automation_body(), automation_body(action=WEBHOOK)]
    refused = await world.as_("no_hook", "POST", "/v1/automations/batch", json={"items": items})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["missing_scopes"] == ["webhook:call"]
    assert "items[1]" in refused.text
    assert await stored(world, "full_a") == []
    disabled = [automation_body(), automation_body(action=WEBHOOK, enabled=False)]
    assert (await world.as_("no_hook", "POST", "/v1/automations/batch", json={"items": disabled})).status_code == 201


async def test_concurrent_single_creates_each_get_their_own_automation(world: World) -> None:
    answers = await asyncio.gather(*(world.as_("full_a", "POST", "/v1/automations", json=automation_body(name=f"c{i}"))
                                     for i in range(40)))
    assert [a.status_code for a in answers] == [201] * 40
    by_name = {a.json()["name"]: a.json()["id"] for a in answers}
    assert sorted(by_name) == sorted(f"c{i}" for i in range(40))
    assert len(set(by_name.values())) == 40
    assert {a["id"]: a["name"] for a in await stored(world, "full_a")} == {v: k for k, v in by_name.items()}


async def test_a_failing_create_in_a_group_fails_alone(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The group's transaction fails; each create is then written alone: only the bad one is refused."""
    real = SqlAutomations.create_many

    async def create_many(self: SqlAutomations, news: Sequence[NewAutomation]) -> Any:
        if any(new.name == "boom" for new in news):
            raise Conflict("automation", "boom", "refused by the test")
        return await real(self, news)

    monkeypatch.setattr(SqlAutomations, "create_many", create_many)
    names = [f"c{i}" for i in range(10)]
    names.insert(4, "boom")
    answers = await asyncio.gather(*(world.as_("full_a", "POST", "/v1/automations", json=automation_body(name=n))
                                     for n in names))
    status = {n: a.status_code for n, a in zip(names, answers, strict=True)}
    assert status.pop("boom") == 409
    assert set(status.values()) == {201}
    assert sorted(a["name"] for a in await stored(world, "full_a")) == sorted(status)


async def test_a_nul_in_a_batch_item_is_refused_naming_it_before_any_write(world: World) -> None:
    items = [automation_body(name="fine"), automation_body(name="bad\u0000name")]
    answer = await world.as_("full_a", "POST", "/v1/automations/batch", json={"items": items})
    assert (answer.status_code, answer.json()["error"]["field"]) == (422, "items[1].name")
    listed = await world.as_("full_a", "GET", "/v1/automations")
    assert [a["name"] for a in listed.json()["items"]] == []
