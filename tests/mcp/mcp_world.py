"""The world of the MCP tests (issue 12): an engine on SQLite with authentication on, its principals and
keys created through ``engine.control``, and in-process SDK clients over :func:`actwheel.mcp.build_server`.

The engine's actors are not started here (tests/mcp/test_mcp_session.py starts its own); the clock is a
:class:`~actwheel.clock.VirtualClock` at the real time (a key's expiry is checked against it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult, ErrorData

from actwheel.auth.bootstrap import ensure_admin
from actwheel.auth.scopes import Grant
from actwheel.bus.memory import MemoryBus
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.mcp import build_server, static_caller
from actwheel.service import Caller
from actwheel.settings import Settings

#: A user's ceiling: everything but the admin scopes.
USER_SCOPES = ["action:request", "automation:*", "bus:publish", "function:invoke", "key:read", "key:write",
               "metrics:read", "notification:send", "ontology:read", "ontology:schema", "ontology:write",
               "run:read", "secret:read", "secret:write", "webhook:call"]
READ_SCOPES = sorted(s for s in Grant.of(USER_SCOPES).expanded() if s.endswith(":read"))
#: automation:write without the webhook's own scope.
NO_WEBHOOK = sorted(set(Grant.of(USER_SCOPES).expanded()) - {"webhook:call"})

ZONE = "Europe/Paris"
DAILY_9 = {"type": "cron", "expression": "0 0 9 * * ?", "timezone": ZONE}
LOG = {"type": "simple.op", "config": {"op": "log", "message": "hello"}}
WEBHOOK = {"type": "webhook.call", "config": {"url": "https://example.com/hook"}}

Elicit = Callable[[ClientRequestContext, ElicitRequestParams], Awaitable[ElicitResult | ErrorData]]


def answering(action: str, asked: list[str] | None = None) -> Elicit:
    """An elicitation callback that answers ``action`` (accept / decline / cancel), noting each message."""

    async def callback(_: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        if asked is not None:
            asked.append(params.message)
        return ElicitResult(action=action, content={"confirm": True} if action == "accept" else None)  # type: ignore[arg-type]

    return callback


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    return " ".join(getattr(block, "text", "") for block in result.content)


@dataclass
class World:
    engine: Engine
    clock: VirtualClock
    callers: dict[str, Caller] = field(default_factory=dict)

    @asynccontextmanager
    async def client(self, credential: str, *, elicit: Elicit | None = None, run_now: str | None = None,
                     mode: str = "auto") -> AsyncIterator[Client]:
        """An in-process SDK client as ``credential`` (``run_now``: this server's ACTWHEEL_MCP_RUN_NOW)."""
        control = self.engine.control
        if run_now is not None:
            control = replace(control, settings=replace(control.settings, mcp_run_now=run_now))
        server = build_server(control, caller_of=static_caller(self.callers[credential]))
        async with Client(server, elicitation_callback=elicit, mode=mode) as client:
            yield client


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(datetime.now(UTC).replace(microsecond=0))


async def populate(engine: Engine) -> dict[str, Caller]:
    """The bootstrap admin, users alice and bob, and keys: full_a, full_a2 (a second key of alice's),
    readonly_a, nowebhook_a, full_b."""
    await ensure_admin(engine.store, engine.settings)
    admin = await engine.control.authenticator.authenticate(engine.settings.admin_key_path().read_text().strip())
    await engine.control.principals.create(admin, {"id": "alice", "kind": "user", "scopes": USER_SCOPES})
    await engine.control.principals.create(admin, {"id": "bob", "kind": "user", "scopes": USER_SCOPES})
    specs = {"full_a": ("alice", USER_SCOPES), "full_a2": ("alice", USER_SCOPES),
             "readonly_a": ("alice", READ_SCOPES), "nowebhook_a": ("alice", NO_WEBHOOK),
             "full_b": ("bob", USER_SCOPES)}
    callers = {"admin": admin}
    for credential, (principal, scopes) in specs.items():
        minted = await engine.control.keys.create(admin, {"name": credential, "principal_id": principal,
                                                          "scopes": scopes})
        callers[credential] = await engine.control.authenticator.authenticate(minted.token)
    return callers


@pytest.fixture
async def world(tmp_path: Path, clock: VirtualClock) -> AsyncIterator[World]:
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path}/actwheel.db", instance="t",
                             admin_key_file=str(tmp_path / "admin.key")), clock=clock, bus=MemoryBus())
    await engine.store.start()
    try:
        yield World(engine, clock, await populate(engine))
    finally:
        await engine.store.stop()
