"""Helpers for the HTTP identity tests (issue 11): one engine per test over SQLite and PostgreSQL, its
bootstrap admin, two users (alice and bob), an agent of alice, and a key per credential of the matrix.

The engine's actors are never started; every request goes through the real Starlette app. The
:class:`~actwheel.clock.VirtualClock` starts at the real time, because on PostgreSQL a key's
``expires_at`` comes from the database clock while the authenticator checks it against the engine's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from actwheel.auth.bootstrap import ensure_admin
from actwheel.auth.scopes import Grant
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.service import Caller
from actwheel.storage import Store

EVERY_MINUTE = {"type": "cron", "expression": "0 * * * * ?", "timezone": "UTC"}
LOG = {"type": "simple.op", "config": {"op": "log", "message": "hi"}}
WEBHOOK = {"type": "webhook.call", "config": {"url": "https://example.com/hook"}}

#: A user's ceiling: everything but the admin scopes.
USER_SCOPES = ["action:request", "automation:*", "bus:publish", "function:invoke", "key:read", "key:write",
               "metrics:read", "notification:send", "ontology:read", "ontology:schema", "ontology:write",
               "run:read", "secret:read", "secret:write", "webhook:call"]
#: alice's agent: automations and runs, and keys (an agent key mints, lists, revokes and rotates only
#: its agent's: the matrix checks it answers 404 for alice's own).
AGENT_SCOPES = ["automation:read", "automation:write", "key:read", "key:write", "run:read"]
READ_SCOPES = sorted(s for s in Grant.of(USER_SCOPES).expanded() if s.endswith(":read"))

#: The credentials of the matrix, in the order they are tried.
CREDENTIALS = ("none", "readonly_a", "full_a", "agent_a", "full_b", "admin")


def automation_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "minutely", "trigger": dict(EVERY_MINUTE), "action": dict(LOG)}
    body.update(overrides)
    return body


def bearer(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


@dataclass
class World:
    """An engine with its principals and keys, and an HTTP client over its app."""

    engine: Engine
    clock: VirtualClock
    http: httpx.AsyncClient
    admin_key_file: Path
    tokens: dict[str, str | None] = field(default_factory=dict)
    callers: dict[str, Caller] = field(default_factory=dict)
    key_ids: dict[str, str] = field(default_factory=dict)

    @property
    def store(self) -> Store:
        return self.engine.store

    async def as_(self, credential: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """``method path`` sent with ``credential``'s key (``none``: no Authorization header)."""
        headers = {**kwargs.pop("headers", {}), **bearer(self.tokens[credential])}
        return await self.http.request(method, path, headers=headers, **kwargs)

    async def mint(self, credential: str, body: dict[str, Any]) -> tuple[str, str]:
        """A key minted through the service by ``credential``'s caller: (key id, token)."""
        minted = await self.engine.control.keys.create(self.callers[credential], body)
        return minted.key.id, minted.token


WorldFactory = Callable[..., Awaitable["World"]]


async def populate(world: World) -> None:
    engine = world.engine
    await ensure_admin(engine.store, engine.settings)
    admin_token = world.admin_key_file.read_text().strip()
    admin = await engine.control.authenticator.authenticate(admin_token)
    world.tokens.update(none=None, admin=admin_token)
    world.callers["admin"] = admin
    principals = engine.control.principals
    await principals.create(admin, {"id": "alice", "kind": "user", "scopes": USER_SCOPES})
    await principals.create(admin, {"id": "bob", "kind": "user", "scopes": USER_SCOPES})
    await principals.create(admin, {"id": "alice-bot", "kind": "agent", "parent_id": "alice",
                                    "scopes": AGENT_SCOPES})
    await principals.create(admin, {"id": "victim", "kind": "user", "scopes": ["automation:read"]})
    specs = {
        "readonly_a": {"principal_id": "alice", "scopes": READ_SCOPES},
        "full_a": {"principal_id": "alice", "scopes": USER_SCOPES},
        "agent_a": {"principal_id": "alice", "agent_id": "alice-bot", "scopes": AGENT_SCOPES},
        "full_b": {"principal_id": "bob", "scopes": USER_SCOPES},
    }
    for credential, spec in specs.items():
        key_id, token = await world.mint("admin", {"name": credential, **spec})
        world.tokens[credential] = token
        world.key_ids[credential] = key_id
        world.callers[credential] = await engine.control.authenticator.authenticate(token)
    world.key_ids["admin"] = str(admin.key_id)
