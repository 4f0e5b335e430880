"""Helpers for the dashboard tests: an engine on SQLite with its bootstrap admin and two users, alice
and bob, each with a full key, and a client that signs in through the form like a browser would."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from actwheel.actors.router import ExecutorRouter
from actwheel.api.app import create_app
from actwheel.auth.bootstrap import ensure_admin
from actwheel.bus.base import BusState
from actwheel.bus.memory import MemoryBus
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.service import Caller
from actwheel.settings import Settings
from actwheel.storage.records import NewRun, Origin, Run, RunOutcome, RunStatus

USER_SCOPES = ["action:request", "automation:*", "run:read", "run:write", "key:read", "key:write", "secret:read"]
EVERY_MINUTE = {"type": "cron", "expression": "0 * * * * ?", "timezone": "Asia/Shanghai"}
LOG = {"type": "simple.op", "config": {"op": "log", "message": "hi"}}


def automation_body(name: str = "minutely", **overrides: Any) -> dict[str, Any]:
    return {"name": name, "trigger": dict(EVERY_MINUTE), "action": dict(LOG), **overrides}


def csrf_in(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


async def run_in(engine: Engine, owner: str, status: RunStatus, *, automation_id: str | None = None,
                 key: str = "k", origin: Origin = Origin.REQUEST) -> Run:
    """A run of ``owner`` brought to ``status`` through the store the way the router would (claim, then
    finish): how a test puts a run into UNKNOWN, DEAD or FAILED without executing anything."""
    async with engine.store.transaction() as tx:
        inserted = await tx.runs.insert(NewRun(
            automation_id=automation_id, dedupe_key=key, owner_id=owner, action_type="simple.op",
            action_config={"op": "log", "message": "hi"}, origin=origin, scheduled_for=await tx.now()))
    if status is RunStatus.PENDING:
        return inserted.run
    async with engine.store.transaction() as tx:
        claimed = await tx.runs.claim(inserted.run.id, "worker", 30)
        assert claimed is not None
        if status is not RunStatus.RUNNING:
            assert await tx.runs.finish(RunOutcome(run_id=claimed.id, owner="worker", epoch=claimed.lease_epoch,
                                                   status=status, reason="test"))
        return await tx.runs.get(claimed.id)


async def executed(engine: Engine, run_id: str) -> Run:
    """``run_id`` (PENDING) claimed and executed through the engine's own pipeline by a router built as the
    engine builds its own, its finish committed (audit trail, result, events): a run that really ran. The
    (in-memory) bus runs meanwhile: a composite announces its steps' progress on it."""
    own_bus = engine.bus.state is BusState.NEW
    if own_bus:
        await engine.bus.start()
    try:
        return await _executed(engine, run_id)
    finally:
        if own_bus:
            await engine.bus.stop()


async def _executed(engine: Engine, run_id: str) -> Run:
    router = ExecutorRouter(bus=engine.bus, store=engine.store, pipeline=engine.pipeline,
                            actions=engine.control.actions, events=engine.events, clock=engine.clock,
                            metrics=engine.metrics, instance=engine.settings.instance,
                            lease_s=engine.settings.lease_s, concurrency=4, implicit_owners=not engine.settings.auth)
    assert [r.id for r in await router.claim_and_start([run_id])] == [run_id], "the run was PENDING and due"
    await router.drain()
    async with engine.store.transaction() as tx:
        return await tx.runs.get(run_id)


@dataclass
class UiWorld:
    engine: Engine
    admin: Caller
    callers: dict[str, Caller]
    tokens: dict[str, str]

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(self.engine.control)),
                                 base_url="http://t", follow_redirects=False)

    async def signed_in(self, who: str) -> tuple[httpx.AsyncClient, str]:
        """A client with ``who``'s session cookie, and that session's CSRF token."""
        http = self.client()
        form = await http.get("/ui/login")
        answer = await http.post("/ui/login", data={"csrf": csrf_in(form.text), "api_key": self.tokens[who]})
        assert (answer.status_code, answer.headers.get("location")) == (303, "/ui/"), answer.text
        page = await http.get("/ui/")
        assert page.status_code == 200, page.text
        return http, csrf_in(page.text)


async def build_world(tmp_path: Path, **settings: Any) -> UiWorld:
    clock = VirtualClock(datetime.now(UTC).replace(microsecond=0))
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path}/ui.db", instance="ui",
                             admin_key_file=str(tmp_path / "actwheel-admin.key"), **settings),
                    clock=clock, bus=MemoryBus())
    await engine.store.start()
    await ensure_admin(engine.store, engine.settings)
    admin_token = (tmp_path / "actwheel-admin.key").read_text().strip()
    admin = await engine.control.authenticator.authenticate(admin_token)
    callers, tokens = {"admin": admin}, {"admin": admin_token}
    for user in ("alice", "bob"):
        await engine.control.principals.create(admin, {"id": user, "kind": "user", "scopes": USER_SCOPES})
        minted = await engine.control.keys.create(admin, {"name": f"{user}-full", "principal_id": user,
                                                          "scopes": USER_SCOPES})
        tokens[user] = minted.token
        callers[user] = await engine.control.authenticator.authenticate(minted.token)
    return UiWorld(engine, admin, callers, tokens)


