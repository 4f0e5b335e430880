"""Helpers for the action tests: contexts, a fast-forward clock, a real local HTTP server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from actwheel.actions.base import ActionContext, StepEvent
from actwheel.actions.ontology_port import InMemoryOntology, ObjectType
from actwheel.actions.secrets import StaticSecrets
from actwheel.clock import VirtualClock
from tests.clocks import FastClock

OWNER = "alice"


@dataclass
class Recorder:
    """Collects step events, audit entries and published messages."""

    events: list[StepEvent] = field(default_factory=list)
    audits: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    published: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def step_event(self, event: StepEvent) -> None:
        self.events.append(event)

    async def audit(self, phase: str, details: Any) -> None:
        self.audits.append((phase, dict(details)))

    async def publish(self, routing_key: str, data: Any) -> None:
        self.published.append((routing_key, dict(data)))

    def states(self, step: str) -> list[str]:
        return [e.state for e in self.events if e.step == step]


async def order_ontology() -> InMemoryOntology:
    ontology = InMemoryOntology()
    await ontology.put_type(
        ObjectType(
            name="Order",
            properties={"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
            required=("sku",),
        )
    )
    return ontology


def make_ctx(
    *,
    ontology: Any = None,
    recorder: Recorder | None = None,
    secrets: StaticSecrets | None = None,
    clock: VirtualClock | None = None,
    **overrides: Any,
) -> ActionContext:
    recorder = recorder or Recorder()
    values: dict[str, Any] = {
        "run_id": "run-1",
        "owner_id": OWNER,
        "clock": clock or FastClock(),
        "ontology": ontology,
        "secrets": secrets or StaticSecrets(),
        "emit_step_event": recorder.step_event,
        "audit": recorder.audit,
        "publish": recorder.publish,
    }
    values.update(overrides)
    return ActionContext(**values)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b'{"ok": true}'
    headers: dict[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None  # the handler waits on it before answering


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class LocalHttpServer:
    """A real HTTP server on 127.0.0.1 answering scripted replies, per path, in order."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.replies: dict[str, list[Reply]] = {}
        self.default = Reply()
        self.on_request: Callable[[Received], Reply | None] | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                got = Received(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length)
                )
                server.requests.append(got)
                reply = server._reply_for(got)
                if reply.hold is not None:
                    reply.hold.wait(5)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    def _reply_for(self, got: Received) -> Reply:
        if self.on_request is not None:
            custom = self.on_request(got)
            if custom is not None:
                return custom
        queue = self.replies.get(got.path.split("?")[0])
        return queue.pop(0) if queue else self.default

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def json_bodies(self) -> list[Any]:
        return [json.loads(r.body) for r in self.requests if r.body]

    @contextmanager
    def running(self) -> Iterator[LocalHttpServer]:
        self._thread.start()
        try:
            yield self
        finally:
            self._httpd.shutdown()
            self._httpd.server_close()
