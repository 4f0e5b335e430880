"""``GET /v1/stream`` against a real uvicorn on loopback (an in-process ASGI transport buffers streaming
bodies): events arrive for one's own runs only — new PENDING runs included —, a client that falls behind
gets ``resync``, the connection cap answers 503, an idle stream sends keep-alive comments, and stopping
the engine with a client connected ends the stream within the grace period."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from loopback import Served, serving
from ui_support import UiWorld, automation_body, build_world

from actwheel.bus.envelope import Envelope
from actwheel.errors import InvalidInput
from actwheel.messages import Message, RunsReady, RunsTransitioned, RunTransition, StepProgressed
from actwheel.service import Caller
from actwheel.service.stream import StreamClient, StreamEvent, StreamHub
from actwheel.settings import Settings
from actwheel.storage.records import RunStatus

#: Bound on every wait for bytes from the server: a failure, never a pace.
WAIT_S = 10.0

Event = tuple[str, dict[str, object]]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as running:
        yield running


async def publish(world: UiWorld, message: Message, routing_key: str) -> None:
    envelope = Envelope.new(type=message.TYPE, data=message.to_data(), source="test", clock=world.engine.clock)
    await world.engine.bus.publish(world.engine.bus.topology.events, routing_key, envelope)


async def publish_runs(world: UiWorld, automation_id: str, *run_ids: str, status: str = "SUCCEEDED") -> None:
    """One ``runs.transitioned`` message moving ``run_ids`` (of ``automation_id``) to ``status``."""
    message = RunsTransitioned(status=status, runs=tuple(
        RunTransition(run_id=run_id, automation_id=automation_id, status=status) for run_id in run_ids))
    await publish(world, message, message.routing_key)


async def events(response: httpx.Response) -> AsyncIterator[Event]:
    kind = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield kind, json.loads(line.removeprefix("data: "))


async def first_event(response: httpx.Response, wanted: Callable[[Event], bool] = lambda _: True) -> Event:
    """The first event ``wanted`` accepts (waiting on the bytes, bounded by :data:`WAIT_S`)."""
    async def scan() -> Event:
        async for event in events(response):
            if wanted(event):
                return event
        raise AssertionError("the stream ended before the event arrived")

    return await asyncio.wait_for(scan(), WAIT_S)


def is_run(event: Event) -> bool:
    return event[0] == "run"


# --- ownership ------------------------------------------------------------------------------


async def test_a_client_hears_of_its_own_runs_only(served: Served) -> None:
    world = served.world
    mine = await world.engine.control.automations.create(world.callers["alice"], automation_body("mine"))
    theirs = await world.engine.control.automations.create(world.callers["bob"], automation_body("theirs"))
    async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S) as http, \
            http.stream("GET", "/v1/stream", headers=served.bearer("alice")) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["x-accel-buffering"] == "no"
        await publish_runs(world, theirs.id, "r-theirs")
        await publish_runs(world, mine.id, "r-mine")
        kind, data = await first_event(response)
        assert kind == "run"
        assert data["run_id"] == "r-mine"  # bob's, published first, never arrived


async def test_a_new_run_is_heard_as_pending_before_any_transition_by_its_owner_only(tmp_path: Path) -> None:
    # the engine relays its outbox (cdc) but runs no router: a run-now's run stays PENDING, announced by
    # run.ready alone
    async with serving(tmp_path, start_engine=True, roles=("cdc",)) as served:
        world = served.world
        automations = world.engine.control.automations
        mine = await automations.create(world.callers["alice"], automation_body("mine"))
        theirs = await automations.create(world.callers["bob"], automation_body("theirs"))
        async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S) as http, \
                http.stream("GET", "/v1/stream", headers=served.bearer("alice")) as alice, \
                http.stream("GET", "/v1/stream", headers=served.bearer("bob")) as bob:
            bobs = await automations.run_now(world.callers["bob"], theirs.id)
            # bob hearing of his run means it was fanned out to every client: had it reached alice, it
            # would be ahead of hers in her stream
            assert (await first_event(bob, is_run))[1]["run_id"] == bobs.id
            alices = await automations.run_now(world.callers["alice"], mine.id)
            _, data = await first_event(alice, is_run)
    assert data == {"run_id": alices.id, "automation_id": mine.id, "status": "PENDING", "reason": None,
                    "attempt": 0, "scheduled_for": alices.scheduled_for.isoformat() if alices.scheduled_for else None,
                    "action_type": "simple.op", "summary": None}
    assert alices.status is RunStatus.PENDING


async def test_a_stream_without_a_credential_is_refused(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S) as http:
        assert (await http.get("/v1/stream")).status_code == 401


# --- a client that falls behind, the cap, keep-alive ------------------------------------------


async def test_a_client_that_falls_behind_gets_resync_over_http(tmp_path: Path) -> None:
    async with serving(tmp_path, stream_buffer=2) as served:
        world = served.world
        mine = await world.engine.control.automations.create(world.callers["alice"], automation_body())
        async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S) as http, \
                http.stream("GET", "/v1/stream", headers=served.bearer("alice")) as response:
            # ten transitions in one message reach the hub faster than the stream writes them (and the
            # client reads nothing meanwhile): its buffer of two overflows
            await publish_runs(world, mine.id, *(f"r{i}" for i in range(10)))
            seen: list[Event] = []
            await first_event(response, lambda event: bool(seen.append(event)) or event[1].get("run_id") == "r9")
    assert seen[0] == ("resync", {"reason": "client fell behind"})
    assert "r0" not in [data.get("run_id") for _, data in seen]  # dropped, not replayed


async def test_the_connection_beyond_the_cap_is_refused_with_503_busy_naming_the_cap(tmp_path: Path) -> None:
    async with serving(tmp_path, stream_max_clients=1) as served:
        hub = served.world.engine.control.stream
        async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S) as http, \
                http.stream("GET", "/v1/stream", headers=served.bearer("alice")) as first:
            assert first.status_code == 200
            refused = await http.get("/v1/stream", headers=served.bearer("bob"))
            assert hub.clients == 1  # the refused one took no place
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "5"  # refused for now: when to come back
    error = refused.json()["error"]
    assert error["type"] == "Busy"
    assert "maximum of 1 live streams" in error["message"]


async def test_an_idle_stream_sends_a_keep_alive_comment(tmp_path: Path) -> None:
    async with serving(tmp_path, stream_keepalive_s=0.05) as served, \
            httpx.AsyncClient(base_url=served.base, timeout=WAIT_S) as http, \
            http.stream("GET", "/v1/stream", headers=served.bearer("alice")) as response:
        lines = response.aiter_lines()
        opening = [await asyncio.wait_for(anext(lines), WAIT_S) for _ in range(2)]
        following = await asyncio.wait_for(anext(lines), WAIT_S)
        while not following:  # the blank line ending the opening frame
            following = await asyncio.wait_for(anext(lines), WAIT_S)
    assert opening == ["retry: 3000", ": connected"]
    assert following == ": keep-alive"


async def test_the_keep_alive_interval_is_15_s_unless_configured(tmp_path: Path) -> None:
    world = await build_world(tmp_path)
    try:
        assert world.engine.control.stream.keepalive_s == 15.0
    finally:
        await world.engine.store.stop()
    assert Settings.from_env({"ACTWHEEL_STREAM_KEEPALIVE_S": "0.5"}).stream_keepalive_s == 0.5
    for name, value in (("ACTWHEEL_STREAM_KEEPALIVE_S", "0"), ("ACTWHEEL_STREAM_MAX_CLIENTS", "0"),
                        ("ACTWHEEL_STREAM_BUFFER", "0")):
        with pytest.raises(InvalidInput) as refused:
            Settings.from_env({name: value})
        assert refused.value.field == name


# --- shutdown ---------------------------------------------------------------------------------


async def test_engine_stop_with_a_client_connected_ends_the_stream_within_the_grace_period(tmp_path: Path) -> None:
    grace_s = 2.0
    async with serving(tmp_path, start_engine=True, roles=("cdc",), grace_s=grace_s) as served:
        engine = served.world.engine
        async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S) as http, \
                http.stream("GET", "/v1/stream", headers=served.bearer("alice")) as response:
            assert response.status_code == 200
            assert engine.control.stream.clients == 1
            started = time.monotonic()
            await asyncio.wait_for(engine.stop(), grace_s)
            # the stream has ended on its own: the server is still up, nothing else closed it
            lines = await asyncio.wait_for(_rest(response), grace_s)
            elapsed = time.monotonic() - started
            assert not served.server.should_exit
    assert elapsed < grace_s
    assert lines[:2] == ["retry: 3000", ": connected"]
    assert engine.control.stream.clients == 0


async def _rest(response: httpx.Response) -> list[str]:
    return [line async for line in response.aiter_lines()]


# --- the hub alone --------------------------------------------------------------------------


class _NoSubscription:
    async def cancel(self, *, grace: float | None = None) -> None:
        return None


async def _subscribe(deliver: object) -> _NoSubscription:  # messages are delivered by hand
    return _NoSubscription()


@pytest.fixture
async def hub_world(tmp_path: Path) -> AsyncIterator[tuple[UiWorld, StreamHub]]:
    world = await build_world(tmp_path)
    hub = StreamHub(store=world.engine.store, subscribe=_subscribe, buffer=4)
    try:
        yield world, hub
    finally:
        await hub.close()
        await world.engine.control.stream.close()
        await world.engine.store.stop()


async def _held(hub: StreamHub, *clients: StreamClient) -> list[list[StreamEvent]]:
    """What each of ``clients`` was sent, read up to the end that closing ``hub`` puts after it."""
    await hub.close()
    held: list[list[StreamEvent]] = []
    for client in clients:
        events: list[StreamEvent] = []
        while (event := await client.next(WAIT_S)) is not None:
            events.append(event)
        held.append(events)
    return held


async def test_a_client_that_falls_behind_gets_resync_instead_of_a_replay(
        hub_world: tuple[UiWorld, StreamHub]) -> None:
    world, hub = hub_world
    client = await hub.join(world.callers["alice"])
    mine = await world.engine.control.automations.create(world.callers["alice"], automation_body())
    message = RunsTransitioned(status="SUCCEEDED", runs=tuple(
        RunTransition(run_id=f"r{i}", automation_id=mine.id, status="SUCCEEDED") for i in range(10)))
    await hub.deliver(message.TYPE, message.to_data())
    first = await client.next(1)
    assert first is not None
    assert (first.kind, client.resyncs) == ("resync", 2)  # 4 buffered, then dropped twice: no replay


async def test_run_ready_and_steps_reach_an_agent_bound_caller_for_its_agents_runs_only(
        hub_world: tuple[UiWorld, StreamHub]) -> None:
    world, hub = hub_world
    alice = world.callers["alice"]
    automations = world.engine.control.automations
    agents = await automations.create(alice, automation_body("agent's", labels={"agent_id": "a-1"}))
    plain = await automations.create(alice, automation_body("plain"))
    agent = await hub.join(Caller(owner_id="alice", agent_id="a-1", scopes=alice.scopes))
    owner = await hub.join(alice)
    runs = [await automations.run_now(alice, a.id) for a in (plain, agents)]
    step = StepProgressed(run_id=runs[1].id, step="one", state="succeeded")
    await hub.deliver(step.TYPE, step.to_data())  # a step names no automation: the run's tells the agent
    ready = RunsReady(run_ids=tuple(run.id for run in runs))
    await hub.deliver(ready.TYPE, ready.to_data())
    agents_events, owners_events = await _held(hub, agent, owner)
    assert [(e.kind, e.data["run_id"]) for e in agents_events] == [("step", runs[1].id), ("run", runs[1].id)]
    assert [(e.kind, e.data["run_id"], e.data.get("status")) for e in owners_events] == [
        ("step", runs[1].id, None), ("run", runs[0].id, "PENDING"), ("run", runs[1].id, "PENDING")]


async def test_run_ready_for_a_run_that_moved_on_or_is_gone_is_not_sent(
        hub_world: tuple[UiWorld, StreamHub]) -> None:
    world, hub = hub_world
    alice = world.callers["alice"]
    mine = await world.engine.control.automations.create(alice, automation_body())
    client = await hub.join(alice)
    run = await world.engine.control.automations.run_now(alice, mine.id)
    async with world.engine.store.transaction() as tx:
        assert await tx.runs.claim(run.id, "worker", 30) is not None
    ready = RunsReady(run_ids=(run.id, "ghost"))  # a late announcement: the run is RUNNING by now
    await hub.deliver(ready.TYPE, ready.to_data())
    assert await _held(hub, client) == [[]]
