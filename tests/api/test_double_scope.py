"""The double-scope rule over HTTP: a change after which an automation can fire needs the action's scopes
too (a composite's: the union of its steps'); one that cannot make it fire needs automation:write only."""

from __future__ import annotations

from typing import Any

import pytest
from api_support import WEBHOOK, World, automation_body

from actwheel.auth.scopes import Grant

NO_HOOK = ["action:request", "automation:read", "automation:write", "run:read"]
STEP_LOG = {"name": "first", "type": "simple.op", "config": {"op": "log", "message": "hi"}}
STEP_HOOK = {"name": "second", **WEBHOOK}
STEP_NOTIFY = {"name": "third", "type": "notification.send", "config": {"channel": "log", "body": "hi"}}


@pytest.fixture
async def no_hook(world: World) -> World:
    """``world`` with a key ``no_hook`` of alice: automation:write, but no webhook:call."""
    _, token = await world.mint("full_a", {"name": "no hook", "scopes": NO_HOOK})
    world.tokens["no_hook"] = token
    return world


def refused_for(answer: Any, *scopes: str) -> bool:
    return bool(answer.status_code == 403 and answer.json()["error"]["missing_scopes"] == list(scopes))


async def test_create_enabled_needs_webhook_call_disabled_does_not(no_hook: World) -> None:
    refused = await no_hook.as_("no_hook", "POST", "/v1/automations", json=automation_body(action=WEBHOOK))
    assert refused_for(refused, "webhook:call"), refused.text
    assert 'scope="webhook:call"' in refused.headers["WWW-Authenticate"]
    assert (await no_hook.as_("full_a", "GET", "/v1/automations")).json()["items"] == []
    created = await no_hook.as_("no_hook", "POST", "/v1/automations",
                                json=automation_body(action=WEBHOOK, enabled=False))
    assert created.status_code == 201, created.text
    assert created.json()["enabled"] is False


async def test_enable_update_and_run_need_it_disable_does_not(no_hook: World) -> None:
    created = await no_hook.as_("no_hook", "POST", "/v1/automations",
                                json=automation_body(action=WEBHOOK, enabled=False))
    path = f"/v1/automations/{created.json()['id']}"

    async def version() -> int:
        current: int = (await no_hook.as_("full_a", "GET", path)).json()["version"]
        return current

    assert refused_for(await no_hook.as_("no_hook", "POST", f"{path}/enable"), "webhook:call")
    disabled_update = await no_hook.as_("no_hook", "PATCH", path, json={"version": await version(), "name": "off"})
    assert (disabled_update.status_code, disabled_update.json()["name"]) == (200, "off")
    assert (await no_hook.as_("full_a", "POST", f"{path}/enable")).status_code == 200
    enabled_update = await no_hook.as_("no_hook", "PATCH", path, json={"version": await version(), "name": "on"})
    assert refused_for(enabled_update, "webhook:call")
    assert refused_for(await no_hook.as_("no_hook", "POST", f"{path}/run"), "webhook:call")
    disabled = await no_hook.as_("no_hook", "POST", f"{path}/disable")
    assert (disabled.status_code, disabled.json()["automation"]["enabled"]) == (200, False)
    assert (await no_hook.as_("no_hook", "GET", path)).json()["name"] == "off"
    assert (await no_hook.as_("full_a", "GET", "/v1/runs")).json()["items"] == []


async def test_a_composite_needs_the_union_of_its_steps(no_hook: World) -> None:
    composite = {"type": "composite", "config": {"mode": "sequential", "steps": [STEP_LOG, STEP_HOOK, STEP_NOTIFY]}}
    refused = await no_hook.as_("no_hook", "POST", "/v1/automations", json=automation_body(action=composite))
    assert refused_for(refused, "notification:send", "webhook:call"), refused.text
    _, hook_only = await no_hook.mint("full_a", {"name": "hook", "scopes": [*NO_HOOK, "webhook:call"]})
    no_hook.tokens["hook_only"] = hook_only
    refused = await no_hook.as_("hook_only", "POST", "/v1/automations", json=automation_body(action=composite))
    assert refused_for(refused, "notification:send"), refused.text
    allowed = await no_hook.as_("full_a", "POST", "/v1/automations", json=automation_body(action=composite))
    assert allowed.status_code == 201, allowed.text


async def test_action_types_lists_only_what_the_key_may_run(no_hook: World) -> None:
    held = Grant.of(NO_HOOK)
    listed = (await no_hook.as_("no_hook", "GET", "/v1/actions/types")).json()["items"]
    everything = (await no_hook.as_("admin", "GET", "/v1/actions/types")).json()["items"]
    assert {"simple.op", "composite"} <= {t["type"] for t in listed}
    assert all(not held.missing(t["required_scopes"]) for t in listed)
    assert {t["type"] for t in everything if not held.missing(t["required_scopes"])} == {t["type"] for t in listed}
    assert "webhook.call" not in {t["type"] for t in listed}
    assert "webhook.call" in {t["type"] for t in everything}


async def test_a_refusal_names_automation_write_and_the_action_scopes_together(world: World) -> None:
    """A key with only the :read scopes gets one 403 naming every scope it lacks, whether the route's own
    (automation:write) or the action's (webhook:call): on create, batch create, enable, update and run."""
    both = ("automation:write", "webhook:call")
    hook = automation_body(action=WEBHOOK)
    refused = await world.as_("readonly_a", "POST", "/v1/automations", json=hook)
    assert refused_for(refused, *both), refused.text
    assert 'scope="automation:write webhook:call"' in refused.headers["WWW-Authenticate"]
    batch = await world.as_("readonly_a", "POST", "/v1/automations/batch", json={"items": [automation_body(), hook]})
    assert refused_for(batch, *both), batch.text
    assert "items[0] and 1 more" in batch.text  # every item refused: the read-only key may create none
    off = await world.as_("readonly_a", "POST", "/v1/automations", json={**hook, "enabled": False})
    assert refused_for(off, "automation:write"), off.text
    created = await world.as_("full_a", "POST", "/v1/automations", json={**hook, "enabled": False})
    path = f"/v1/automations/{created.json()['id']}"
    assert refused_for(await world.as_("readonly_a", "POST", f"{path}/enable"), *both)
    assert refused_for(await world.as_("readonly_a", "PATCH", path, json={"version": 1, "name": "x"}),
                       "automation:write")  # disabled: the update cannot make it fire
    assert (await world.as_("full_a", "POST", f"{path}/enable")).status_code == 200
    version = (await world.as_("full_a", "GET", path)).json()["version"]
    assert refused_for(await world.as_("readonly_a", "PATCH", path, json={"version": version, "name": "x"}), *both)
    assert refused_for(await world.as_("readonly_a", "POST", f"{path}/run"), *both)
    assert refused_for(await world.as_("readonly_a", "POST", f"{path}/disable"), "automation:write")
    assert (await world.as_("full_a", "GET", path)).json()["name"] == "minutely"
    assert (await world.as_("full_a", "GET", "/v1/runs")).json()["items"] == []


async def test_another_owners_automation_is_404_before_any_scope_is_named(world: World) -> None:
    """The service finds the automation (owner in SQL) before it names the scopes: bob's read-only key
    learns nothing of alice's automation, not even the scopes its action needs."""
    _, token = await world.mint("full_b", {"name": "bob reads", "scopes": ["automation:read"]})
    world.tokens["readonly_b"] = token
    created = await world.as_("full_a", "POST", "/v1/automations", json=automation_body(action=WEBHOOK))
    path = f"/v1/automations/{created.json()['id']}"
    for method, suffix in (("POST", "/enable"), ("POST", "/run"), ("PATCH", "")):
        answer = await world.as_("readonly_b", method, path + suffix, json={"version": 1, "name": "x"})
        assert (answer.status_code, "webhook" in answer.text) == (404, False), (suffix, answer.text)
