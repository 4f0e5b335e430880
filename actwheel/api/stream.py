"""``GET /v1/stream``: Server-Sent Events of the caller's run transitions, step progress and automation
changes (``event: run|step|automation|resync``, JSON ``data``, an ``id:`` per event).

The events come from this instance's :class:`~actwheel.service.stream.StreamHub`. A client that falls
behind gets ``resync`` and re-fetches; nothing is replayed, so ``Last-Event-ID`` is not honoured. A
comment every ``keepalive_s`` keeps proxies from closing an idle stream; the stream ends as soon as the
engine stops. Authenticated by bearer key or by the dashboard session cookie.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from actwheel.api.guard import Handler, caller_of
from actwheel.service import ControlPlane
from actwheel.service.stream import StreamClient, StreamEvent, StreamHub

__all__ = ["RETRY_MS", "sse_frame", "stream_routes"]

#: The reconnect delay a browser is told to use.
RETRY_MS = 3000


def stream_routes(control: ControlPlane) -> list[tuple[str, str, Handler]]:
    hub = control.stream

    async def stream(request: Request) -> Response:
        client = await hub.join(caller_of(request))
        return StreamingResponse(_frames(hub, client), media_type="text/event-stream", headers={
            "Cache-Control": "no-store", "X-Accel-Buffering": "no", "Connection": "keep-alive"})

    return [("GET", "/v1/stream", stream)]


def sse_frame(event: StreamEvent) -> bytes:
    """One event as its SSE frame (the JSON is one line: no ``data:`` continuation needed)."""
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.id, event.kind.encode(), orjson.dumps(event.data))


async def _frames(hub: StreamHub, client: StreamClient) -> AsyncIterator[bytes]:
    try:
        yield b"retry: %d\n: connected\n\n" % RETRY_MS
        async for event in hub.events(client):
            yield b": keep-alive\n\n" if event is None else sse_frame(event)
    finally:
        client.leave()
