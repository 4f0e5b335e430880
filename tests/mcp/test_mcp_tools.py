"""The MCP tools in-process (issue 12): listing per credential, outputs, owner isolation, the double-scope rule."""

from __future__ import annotations

from datetime import datetime

from mcp_world import DAILY_9, LOG, WEBHOOK, World, error_text, structured

from actwheel.mcp import INSTRUCTIONS, READ_TOOLS, TOOL_NAMES, WRITE_TOOLS


async def _create(world: World, credential: str = "full_a", action: dict | None = None, **extra: object) -> dict:
    async with world.client(credential) as client:
        preview = structured(await client.call_tool("preview_trigger", {"trigger": DAILY_9}))
        created = await client.call_tool("create_automation", {
            "name": "morning", "trigger": DAILY_9, "action": action or LOG,
            "preview_digest": preview["preview_digest"], **extra})
        return structured(created)


async def test_a_full_key_is_shown_every_tool_with_its_annotations_and_output_schema(world: World) -> None:
    async with world.client("full_a") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == set(TOOL_NAMES)
    for name in READ_TOOLS:
        assert tools[name].annotations.read_only_hint is True
    assert tools["create_automation"].annotations.destructive_hint is False
    assert tools["update_automation"].annotations.destructive_hint is True
    assert tools["update_automation"].annotations.idempotent_hint is True
    assert tools["enable_automation"].annotations.idempotent_hint is True
    assert tools["disable_automation"].annotations.idempotent_hint is True
    assert tools["run_automation_now"].annotations.destructive_hint is True
    assert tools["run_automation_now"].annotations.open_world_hint is True
    assert all(t.output_schema is not None for t in tools.values())
    assert "from" in tools["preview_trigger"].input_schema["properties"]
    assert "confirmation" not in tools["run_automation_now"].input_schema["properties"]


async def test_write_tools_are_not_listed_to_a_read_only_key(world: World) -> None:
    async with world.client("readonly_a") as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert names == set(READ_TOOLS)
    assert not names & set(WRITE_TOOLS)


async def test_the_instructions_state_the_rules_and_the_double_scope_rule() -> None:
    for words in ("preview_trigger", "preview_digest", "IANA timezone", "never guess", "summary sentence",
                  "confirmation_token", "UNKNOWN is never retried", "duplicate_risk", "automation:write and the "
                  "scopes of its action", "Disabling needs automation:write only"):
        assert words in INSTRUCTIONS


async def test_list_action_types_shows_only_the_types_the_key_may_use(world: World) -> None:
    async with world.client("full_a") as client:
        full = {t["type"]: t for t in structured(await client.call_tool("list_action_types"))["items"]}
    async with world.client("nowebhook_a") as client:
        narrow = {t["type"] for t in structured(await client.call_tool("list_action_types"))["items"]}
    assert "webhook.call" in full
    assert "webhook.call" not in narrow
    assert "simple.op" in narrow
    assert full["webhook.call"]["idempotency"] in ("STRONG", "BEST_EFFORT", "NONE")
    assert full["webhook.call"]["config_schema"]["type"] == "object"
    assert full["webhook.call"]["description"]


async def test_preview_returns_fires_with_offsets_a_summary_and_a_digest(world: World) -> None:
    async with world.client("readonly_a") as client:
        out = structured(await client.call_tool("preview_trigger", {
            "trigger": DAILY_9, "count": 3, "from": "2030-03-30T12:00:00+00:00"}))
    assert [f["at"] for f in out["fires"]] == ["2030-03-31T09:00:00+02:00", "2030-04-01T09:00:00+02:00",
                                              "2030-04-02T09:00:00+02:00"]
    assert {f["offset"] for f in out["fires"]} == {"+02:00"}
    assert out["timezone"] == "Europe/Paris"
    assert "2030-03-31T09:00:00+02:00" in out["summary"]
    assert "Europe/Paris" in out["summary"]
    assert len(out["preview_digest"]) == 64


async def test_create_returns_the_server_written_summary(world: World) -> None:
    created = await _create(world, action=WEBHOOK)
    automation = created["automation"]
    assert automation["owner_id"] == "alice"
    assert "“morning”" in created["summary"]
    assert "Europe/Paris" in created["summary"]
    assert "+01:00" in created["summary"] or "+02:00" in created["summary"]
    assert "webhook.call" in created["summary"]
    assert "https://example.com/hook" in created["summary"]


async def test_list_and_get_show_only_the_callers_own_automations(world: World) -> None:
    mine = (await _create(world))["automation"]
    theirs = (await _create(world, "full_b"))["automation"]
    async with world.client("full_a") as client:
        listed = structured(await client.call_tool("list_automations"))
        got = structured(await client.call_tool("get_automation", {"automation_id": mine["id"]}))
        foreign = await client.call_tool("get_automation", {"automation_id": theirs["id"]})
        foreign_disable = await client.call_tool("disable_automation", {"automation_id": theirs["id"]})
    assert [a["id"] for a in listed["items"]] == [mine["id"]]
    assert len(got["next_fires"]) == 3
    assert datetime.fromisoformat(got["next_fires"][0]["at"]) == datetime.fromisoformat(
        got["automation"]["next_run_at"])
    assert got["automation"]["version"] == mine["version"]
    assert "not found" in error_text(foreign).lower()
    assert "not found" in error_text(foreign_disable).lower()


async def test_disable_needs_only_automation_write_while_enable_needs_the_actions_scope(world: World) -> None:
    automation = (await _create(world, action=WEBHOOK))["automation"]
    async with world.client("nowebhook_a") as client:
        disabled = structured(await client.call_tool("disable_automation", {"automation_id": automation["id"]}))
        enable = await client.call_tool("enable_automation", {"automation_id": automation["id"]})
    assert disabled["automation"]["enabled"] is False
    assert "webhook:call" in error_text(enable)
    async with world.client("full_a") as client:
        enabled = structured(await client.call_tool("enable_automation", {"automation_id": automation["id"]}))
    assert enabled["automation"]["enabled"] is True


async def test_update_without_a_trigger_needs_no_digest_and_a_stale_version_is_refused(world: World) -> None:
    automation = (await _create(world))["automation"]
    async with world.client("full_a") as client:
        renamed = structured(await client.call_tool("update_automation", {
            "automation_id": automation["id"], "version": automation["version"], "changes": {"name": "early"}}))
        stale = await client.call_tool("update_automation", {
            "automation_id": automation["id"], "version": automation["version"], "changes": {"name": "late"}})
    assert renamed["automation"]["name"] == "early"
    assert "“early”" in renamed["summary"]
    assert "version" in error_text(stale)


async def test_bad_input_names_the_field(world: World) -> None:
    async with world.client("full_a") as client:
        bad = await client.call_tool("preview_trigger", {"trigger": {**DAILY_9, "timezone": "Mars/Olympus"}})
    assert "timezone" in error_text(bad)
    assert "Mars/Olympus" in error_text(bad)
