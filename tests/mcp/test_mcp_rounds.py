"""Run now's elicitation across rounds (2026-07-28 era): a replayed final round is the same run, the
second round may land on another instance, and a key that may run an automation need not read it.

The rounds are driven by hand through the SDK client's session (``allow_input_required``), as a
client that lost a response, or a load balancer that sent the next round elsewhere, would send them.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp_types import ElicitResult, InputRequiredResult
from mcp_world import DAILY_9, LOG, World, answering, structured

from actwheel.mcp import build_server, static_caller
from actwheel.mcp.http import McpEndpoint
from actwheel.mcp.server import ActwheelMCP
from actwheel.mcp.state import RoundCodec, answered_round
from actwheel.service import Caller
from actwheel.storage.records import Run


async def _automation(world: World) -> dict[str, Any]:
    async with world.client("full_a") as client:
        digest = structured(await client.call_tool("preview_trigger", {"trigger": DAILY_9}))["preview_digest"]
        return structured(await client.call_tool("create_automation", {
            "name": "morning", "trigger": DAILY_9, "action": LOG, "preview_digest": digest}))["automation"]


async def _runs(world: World) -> list[Run]:
    async with world.engine.store.transaction() as tx:
        return await tx.runs.query(limit=100)


def _server(world: World, caller: Caller, codec: RoundCodec) -> ActwheelMCP:
    return build_server(world.engine.control, caller_of=static_caller(caller), state_codec=codec)


async def _first_round(client: Client, automation_id: str) -> InputRequiredResult:
    first = await client.session.call_tool("run_automation_now", {"automation_id": automation_id},
                                           allow_input_required=True)
    assert isinstance(first, InputRequiredResult), first
    return first


async def _final_round(client: Client, automation_id: str, first: InputRequiredResult) -> dict[str, Any]:
    accepted = {key: ElicitResult(action="accept", content={"confirm": True}) for key in first.input_requests}
    final = await client.session.call_tool("run_automation_now", {"automation_id": automation_id},
                                           input_responses=accepted, request_state=first.request_state,
                                           allow_input_required=True)
    assert not isinstance(final, InputRequiredResult), final
    return structured(final)


async def test_a_replayed_final_round_answers_the_run_of_the_first(world: World) -> None:
    automation = await _automation(world)
    server = _server(world, world.callers["full_a"], RoundCodec.ephemeral())
    async with Client(server, elicitation_callback=answering("accept"), mode="auto") as client:
        first = await _first_round(client, automation["id"])
        once = await _final_round(client, automation["id"], first)
        again = await _final_round(client, automation["id"], first)  # the response was lost: sent again
    assert once["status"] == again["status"] == "started"
    assert again["run_id"] == once["run_id"]
    runs = await _runs(world)
    assert [r.id for r in runs] == [once["run_id"]]
    assert runs[0].dedupe_key.startswith("manual:elicit_")


async def test_two_confirmed_flows_are_two_runs(world: World) -> None:
    """The round names one confirmation, not the automation: the user may run it twice on purpose."""
    automation = await _automation(world)
    server = _server(world, world.callers["full_a"], RoundCodec.ephemeral())
    async with Client(server, elicitation_callback=answering("accept"), mode="auto") as client:
        one = await _final_round(client, automation["id"], await _first_round(client, automation["id"]))
        two = await _final_round(client, automation["id"], await _first_round(client, automation["id"]))
    assert one["run_id"] != two["run_id"]
    assert len(await _runs(world)) == 2


async def test_the_second_round_may_land_on_another_instance(world: World) -> None:
    """Two endpoints over one database seal under the key stored there: B finishes what A asked."""
    automation = await _automation(world)
    instance_a, instance_b = McpEndpoint(world.engine.control), McpEndpoint(world.engine.control)
    async with instance_a.running(), instance_b.running():
        caller = world.callers["full_a"]
        server_a = build_server(world.engine.control, caller_of=static_caller(caller),
                                state_codec=instance_a.state_codec)
        server_b = build_server(world.engine.control, caller_of=static_caller(caller),
                                state_codec=instance_b.state_codec)
        async with (Client(server_a, elicitation_callback=answering("accept"), mode="auto") as on_a,
                    Client(server_b, elicitation_callback=answering("accept"), mode="auto") as on_b):
            first = await _first_round(on_a, automation["id"])
            final = await _final_round(on_b, automation["id"], first)
    assert final["status"] == "started"
    assert [r.id for r in await _runs(world)] == [final["run_id"]]


async def test_state_sealed_by_a_process_key_is_refused_by_another_process(world: World) -> None:
    """The SDK's default, a key per process, is what the shared key replaces: the control case."""
    automation = await _automation(world)
    caller = world.callers["full_a"]
    server_a = _server(world, caller, RoundCodec.ephemeral())
    server_b = _server(world, caller, RoundCodec.ephemeral())
    async with (Client(server_a, elicitation_callback=answering("accept"), mode="auto") as on_a,
                Client(server_b, elicitation_callback=answering("accept"), mode="auto") as on_b):
        first = await _first_round(on_a, automation["id"])
        with pytest.raises(Exception, match="Invalid or expired requestState"):
            await _final_round(on_b, automation["id"], first)
    assert await _runs(world) == []


async def test_an_endpoint_refuses_state_until_it_has_loaded_its_key(world: World) -> None:
    codec = McpEndpoint(world.engine.control).state_codec
    assert not codec.ready
    with pytest.raises(RuntimeError, match="request-state key is not loaded"):
        codec.seal(b"{}")


def test_answered_round_names_only_the_state_it_was_unsealed_for() -> None:
    codec = RoundCodec.ephemeral()
    token = codec.seal(b'{"s": "plain"}')
    codec.unseal(token)
    assert answered_round("plain") is not None
    assert answered_round("another state") is None
    assert answered_round(None) is None


async def test_run_now_needs_automation_write_and_the_actions_scopes_not_automation_read(world: World) -> None:
    automation = await _automation(world)
    admin = world.callers["admin"]
    minted = await world.engine.control.keys.create(admin, {
        "name": "runner", "principal_id": "alice", "scopes": ["automation:write", "notification:send"]})
    world.callers["write_only_a"] = await world.engine.control.authenticator.authenticate(minted.token)
    async with world.client("write_only_a") as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        out = structured(await client.call_tool("run_automation_now", {"automation_id": automation["id"]}))
        token = out["confirmation_token"]
        started = structured(await client.call_tool("run_automation_now", {"automation_id": automation["id"],
                                                                           "confirmation_token": token}))
    assert "run_automation_now" in tools
    assert "get_automation" not in tools
    assert out["status"] == "confirmation_required"
    assert started["status"] == "started"
