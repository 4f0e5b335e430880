"""``GET /v1/stream`` against a real uvicorn on loopback (an in-process ASGI transport buffers streaming
bodies): events arrive for one's own runs only, a slow client gets ``resync``, and stopping the server
with a client connected ends promptly."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from ui_support import UiWorld, automation_body, build_world

from actwheel.api.app import create_app
from actwheel.bus.envelope import Envelope
from actwheel.messages import RunsTransitioned, RunTransition
from actwheel.service.stream import StreamHub


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[UiWorld, str, uvicorn.Server, asyncio.Task[None]]]:
    world = await build_world(tmp_path)
    await world.engine.bus.start()
    server = uvicorn.Server(uvicorn.Config(create_app(world.engine.control), log_level="warning", lifespan="off"))
    # bound and listening before the server runs: a client connecting early waits in the backlog, no polling
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield world, f"http://127.0.0.1:{port}", server, task
    finally:
        await world.engine.control.stream.close()
        server.should_exit = True
        await asyncio.wait_for(task, 5)
        await world.engine.bus.stop()
        await world.engine.store.stop()


async def publish_run(world: UiWorld, run_id: str, automation_id: str, status: str = "SUCCEEDED") -> None:
    message = RunsTransitioned(status=status, runs=(RunTransition(run_id=run_id, automation_id=automation_id,
                                                                  status=status),))
    envelope = Envelope.new(type=message.TYPE, data=message.to_data(), source="test", clock=world.engine.clock)
    await world.engine.bus.publish(world.engine.bus.topology.events, message.routing_key, envelope)


async def events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, object]]]:
    kind = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield kind, json.loads(line.removeprefix("data: "))


async def test_a_client_hears_of_its_own_runs_only(served: tuple[UiWorld, str, uvicorn.Server, asyncio.Task[None]]
                                                   ) -> None:
    world, base, _, _ = served
    mine = await world.engine.control.automations.create(world.callers["alice"], automation_body("mine"))
    theirs = await world.engine.control.automations.create(world.callers["bob"], automation_body("theirs"))
    headers = {"Authorization": f"Bearer {world.tokens['alice']}"}
    async with httpx.AsyncClient(base_url=base, timeout=10) as http, \
            http.stream("GET", "/v1/stream", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["x-accel-buffering"] == "no"
        await publish_run(world, "r-theirs", theirs.id)
        await publish_run(world, "r-mine", mine.id)
        async for kind, data in events(response):
            assert kind == "run"
            assert data["run_id"] == "r-mine"  # bob's, published first, never arrived
            break


async def test_a_stream_without_a_credential_is_refused(
        served: tuple[UiWorld, str, uvicorn.Server, asyncio.Task[None]]) -> None:
    _, base, _, _ = served
    async with httpx.AsyncClient(base_url=base, timeout=5) as http:
        assert (await http.get("/v1/stream")).status_code == 401


class _NoSubscription:
    async def cancel(self, *, grace: float | None = None) -> None:
        return None


async def test_a_client_that_falls_behind_gets_resync_instead_of_a_replay(tmp_path: Path) -> None:
    world = await build_world(tmp_path)

    async def subscribe(deliver: object) -> _NoSubscription:  # messages are delivered by hand below
        return _NoSubscription()

    hub = StreamHub(store=world.engine.store, subscribe=subscribe, buffer=4)
    try:
        client = await hub.join(world.callers["alice"])
        mine = await world.engine.control.automations.create(world.callers["alice"], automation_body())
        message = RunsTransitioned(status="SUCCEEDED", runs=tuple(
            RunTransition(run_id=f"r{i}", automation_id=mine.id, status="SUCCEEDED") for i in range(10)))
        await hub.deliver(message.TYPE, message.to_data())
        first = await client.next(1)
        assert first is not None
        assert (first.kind, client.resyncs) == ("resync", 2)  # 4 buffered, then dropped twice: no replay
    finally:
        await hub.close()
        await world.engine.control.stream.close()
        await world.engine.store.stop()


async def test_stopping_with_a_client_connected_ends_within_the_grace_period(
        served: tuple[UiWorld, str, uvicorn.Server, asyncio.Task[None]]) -> None:
    world, base, server, task = served
    headers = {"Authorization": f"Bearer {world.tokens['alice']}"}
    async with httpx.AsyncClient(base_url=base, timeout=10) as http, \
            http.stream("GET", "/v1/stream", headers=headers) as response:
        assert response.status_code == 200
        assert world.engine.control.stream.clients == 1
        started = time.monotonic()
        await world.engine.control.stream.close()  # what `actwheel run` does before should_exit
        server.should_exit = True
        await asyncio.wait_for(task, 5)
        lines = [line async for line in response.aiter_lines()]
    assert time.monotonic() - started < 2.0
    assert "retry: 3000" in lines
