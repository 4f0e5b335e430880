"""A fault-injecting TCP proxy for the engine's links to PostgreSQL and RabbitMQ.

The engine connects to ``127.0.0.1:<proxy.port>`` instead of the server; every byte goes through
two pumps (client → server, server → client) that obey the proxy's current fault:

- :meth:`FaultProxy.set_latency` — each chunk waits that long before it is forwarded (both ways);
- :meth:`FaultProxy.stall` / :meth:`FaultProxy.heal` — nothing is forwarded, in either direction, on
  any connection, new ones included (they are accepted and connected upstream, then wait); the
  bytes are held, not lost, and flow again on ``heal()``: a database that stops answering;
- :meth:`FaultProxy.reset_all` — every open connection is aborted with a TCP RST on both sides;
- :meth:`FaultProxy.refuse` — new connections are reset at once (a server that is down);
- :meth:`FaultProxy.half_open` — the open connections go silent for good: what the client sends
  is read and dropped, nothing comes back, no FIN and no RST ever arrive (a peer whose machine
  vanished, a NAT entry dropped); new connections made while it lasts are the same. ``heal()``
  lets new connections work again; the silent ones stay silent until the proxy stops.

It runs in the test's event loop (the engines are other processes). A fault's duration is the
scenario, so the callers sleep through it; nothing here waits for anything but sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

__all__ = ["FaultProxy", "ProxyStats", "proxied"]


@dataclass
class ProxyStats:
    accepted: int = 0
    resets: int = 0
    refused: int = 0
    silenced: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


@dataclass(eq=False)
class _Link:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    silent: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def _abort(writer: asyncio.StreamWriter | None) -> None:
    """Close with RST: SO_LINGER on, zero seconds."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """Forwards ``127.0.0.1:port`` to ``target_host:target_port`` with the faults above."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._latency_s = 0.0
        self._refusing = False
        self._silencing = False
        self.stats = ProxyStats()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            self._drop(link)
        if self._server is not None:
            await self._server.wait_closed()

    # --- the faults ---------------------------------------------------------------------------

    def set_latency(self, seconds: float) -> None:
        self._latency_s = seconds

    def stall(self) -> None:
        self._flowing.clear()

    def refuse(self) -> None:
        self._refusing = True

    def half_open(self) -> None:
        self._silencing = True
        for link in self._links:
            link.silent = True
        self.stats.silenced += len(self._links)

    def heal(self) -> None:
        """Back to normal for new connections and held bytes; half-open links stay silent."""
        self._refusing = False
        self._silencing = False
        self._latency_s = 0.0
        self._flowing.set()

    def reset_all(self) -> int:
        """RST every open connection (both sides); returns how many."""
        links = [link for link in self._links if not link.silent]
        for link in links:
            self._drop(link)
        self.stats.resets += len(links)
        return len(links)

    @property
    def open_links(self) -> int:
        return len(self._links)

    # --- plumbing -----------------------------------------------------------------------------

    def _drop(self, link: _Link) -> None:
        _abort(link.client)
        _abort(link.server)
        for task in link.tasks:
            task.cancel()
        self._links.discard(link)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.accepted += 1
        if self._refusing:
            self.stats.refused += 1
            _abort(writer)
            return
        link = _Link(client=writer, silent=self._silencing)
        self._links.add(link)
        if link.silent:
            self.stats.silenced += 1
            link.tasks.append(asyncio.current_task())  # type: ignore[arg-type]
            with contextlib.suppress(Exception):
                while await reader.read(65536):
                    pass
            return
        try:
            server_reader, server_writer = await asyncio.open_connection(*self._target)
        except OSError:
            self._drop(link)
            return
        link.server = server_writer
        up = asyncio.create_task(self._pump(link, reader, server_writer, up=True))
        down = asyncio.create_task(self._pump(link, server_reader, writer, up=False))
        link.tasks += [up, down]
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        if not link.silent:
            self._close(link)

    def _close(self, link: _Link) -> None:
        for task in link.tasks:
            if task is not asyncio.current_task():
                task.cancel()
        for writer in (link.client, link.server):
            if writer is not None:
                writer.close()
        self._links.discard(link)

    async def _pump(self, link: _Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                    up: bool) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                if self._latency_s:
                    await asyncio.sleep(self._latency_s)  # the injected latency itself
                await self._flowing.wait()
                if link.silent:
                    continue  # half-open: swallowed, never answered
                writer.write(data)
                await writer.drain()
                if up:
                    self.stats.bytes_up += len(data)
                else:
                    self.stats.bytes_down += len(data)
        if link.silent:  # a half-open link never closes by itself
            await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def proxied(target_host: str, target_port: int) -> AsyncIterator[FaultProxy]:
    proxy = FaultProxy(target_host, target_port)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
