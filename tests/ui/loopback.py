"""A dashboard world served by a real uvicorn on loopback (an in-process ASGI transport buffers
streaming bodies, and it bypasses uvicorn's proxy-header handling): for the live-stream and cookie tests."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from ui_support import UiWorld, build_world

from actwheel.api.app import create_app


@dataclass
class Served:
    """A world, its server's base URL, the server and the task running it."""

    world: UiWorld
    base: str
    server: uvicorn.Server
    task: asyncio.Task[None]

    def bearer(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.world.tokens[who]}"}


@asynccontextmanager
async def serving(tmp_path: Path, *, start_engine: bool = False, **settings: Any) -> AsyncIterator[Served]:
    """The world of :func:`ui_support.build_world` (``settings`` passed on) behind uvicorn, configured as
    ``actwheel run`` configures it. ``start_engine``: ``Engine.start()`` too (with the roles in
    ``settings``), else only its bus is started and nothing relays the outbox."""
    world = await build_world(tmp_path, **settings)
    engine = world.engine
    await (engine.start() if start_engine else engine.bus.start())
    server = uvicorn.Server(uvicorn.Config(create_app(engine.control), log_level="warning", lifespan="off"))
    # bound and listening before the server runs: a client connecting early waits in the backlog, no polling
    sock = socket.create_server(("127.0.0.1", 0))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield Served(world, f"http://127.0.0.1:{sock.getsockname()[1]}", server, task)
    finally:
        await engine.control.stream.close()
        server.should_exit = True
        await asyncio.wait_for(task, 5)
        await engine.stop()
        await engine.bus.stop()
        await engine.store.stop()
