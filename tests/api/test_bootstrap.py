"""First start: one admin and a 0600 key file that authenticates as ``*``; later starts change nothing;
racing starts on PostgreSQL create one admin. ``--insecure-no-auth`` only on loopback, announced on every
response. ``/metrics`` is public unless ``metrics_auth``."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import httpx
import pytest
from api_support import World, WorldFactory, bearer
from services import isolated_postgres_url
from structlog.testing import capture_logs

from actwheel.api.app import create_app
from actwheel.auth.bootstrap import ADMIN_ID, ensure_admin
from actwheel.bus.memory import MemoryBus
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import InvalidInput
from actwheel.settings import Settings
from actwheel.storage import Store, open_store


async def admins_and_keys(store: Store) -> tuple[list[str], list[str]]:
    async with store.transaction() as tx:
        principals = [p.id for p in await tx.principals.query(limit=100)]
        keys = [k.id for k in await tx.api_keys.for_owner(ADMIN_ID, include_dead=True)]
    return principals, keys


async def whoami(engine: Engine, token: str | None) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(engine.control)),
                                 base_url="http://t") as http:
        return await http.get("/v1/whoami", headers=bearer(token))


async def test_first_start_creates_one_admin_and_a_private_key_file(tmp_path: Path, clock: VirtualClock) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/fresh.db", instance="t")
    store = open_store(settings.database_url, clock=clock)
    await store.start()
    try:
        with capture_logs() as logs:
            path = await ensure_admin(store, settings)
        assert path == tmp_path / "actwheel-admin.key"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        content = path.read_text()
        token = content.strip()
        assert content == token + "\n"
        principals, keys = await admins_and_keys(store)
        assert (principals, len(keys)) == ([ADMIN_ID], 1)
        created = [e for e in logs if e["event"] == "bootstrap_admin_created"]
        assert len(created) == 1
        assert (created[0]["key_file"], created[0]["key_id"]) == (str(path), keys[0])
        assert token not in repr(logs)
        engine = Engine(settings, clock=clock, store=store, bus=MemoryBus())
        me = (await whoami(engine, token)).json()
        assert (me["principal_id"], me["scopes"], me["key_id"], me["auth"]) == (ADMIN_ID, ["*"], keys[0], "enabled")
        with capture_logs() as again_logs:
            assert await ensure_admin(store, settings) is None
        assert path.read_text() == content
        assert await admins_and_keys(store) == (principals, keys)
        assert [e for e in again_logs if e["event"] == "bootstrap_admin_created"] == []
    finally:
        await store.stop()


async def test_engine_start_runs_the_bootstrap_once(tmp_path: Path, clock: VirtualClock) -> None:
    key_file = tmp_path / "secret" / "admin.key"
    settings = Settings(database_url=f"sqlite:///{tmp_path}/db", instance="t", roles=("metrics",),
                        admin_key_file=str(key_file))
    async with Engine(settings, clock=clock, bus=MemoryBus()) as engine:
        content = key_file.read_text()
        assert (await whoami(engine, content.strip())).json()["scopes"] == ["*"]
    async with Engine(settings, clock=clock, bus=MemoryBus()) as engine:
        assert key_file.read_text() == content
        assert await admins_and_keys(engine.store) == ([ADMIN_ID], [content.split("_")[1]])


@pytest.mark.postgres
async def test_two_racing_starts_on_postgres_create_one_admin(tmp_path: Path) -> None:
    async with isolated_postgres_url("boot") as url:
        stores = [open_store(url), open_store(url)]
        for store in stores:
            await store.start()
        try:
            files = [tmp_path / "one.key", tmp_path / "two.key"]
            made = await asyncio.gather(*(ensure_admin(store, Settings(database_url=url, instance="t",
                                                                       admin_key_file=str(file)))
                                          for store, file in zip(stores, files, strict=True)))
            assert sorted(str(m) for m in made if m is not None) == [str(f) for f in files if f.exists()]
            assert len([m for m in made if m is not None]) == 1
            principals, keys = await admins_and_keys(stores[0])
            assert (principals, len(keys)) == ([ADMIN_ID], 1)
        finally:
            for store in stores:
                await store.stop()


def test_no_auth_is_refused_off_loopback() -> None:
    with pytest.raises(InvalidInput) as refused:
        Settings(auth=False, http_host="0.0.0.0").validate()
    assert refused.value.field == "--insecure-no-auth"
    assert "--insecure-no-auth" in str(refused.value)
    Settings(auth=False, http_host="127.0.0.1").validate()
    Settings(auth=False, http_host="::1").validate()


async def test_no_auth_on_loopback_is_announced_on_every_response(db_url: str, store: Store,
                                                                  clock: VirtualClock) -> None:
    engine = Engine(Settings(database_url=db_url, instance="t", auth=False), clock=clock, store=store,
                    bus=MemoryBus())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(engine.control)),
                                 base_url="http://t") as http:
        answers = [await http.get("/v1/whoami"), await http.get("/healthz"), await http.get("/metrics"),
                   await http.get("/v1/automations/nope"), await http.post("/v1/automations", json={}),
                   await http.get("/v1/whoami", headers=bearer("awk_garbage"))]
        assert [a.status_code for a in answers] == [200, 200, 200, 404, 422, 200]
        assert [a.headers.get("X-Actwheel-Auth") for a in answers] == ["disabled"] * len(answers)
        me = answers[0].json()
        assert (me["auth"], me["principal_id"], me["scopes"]) == ("disabled", "local", ["*"])


async def test_an_authenticated_app_does_not_say_disabled(world: World) -> None:
    answer = await world.as_("full_a", "GET", "/v1/whoami")
    assert "X-Actwheel-Auth" not in answer.headers
    assert answer.json()["auth"] == "enabled"


async def test_metrics_are_public_by_default(world: World) -> None:
    answer = await world.as_("none", "GET", "/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")


async def test_metrics_auth_needs_metrics_read(make_world: WorldFactory) -> None:
    world = await make_world(metrics_auth=True)
    assert (await world.as_("none", "GET", "/metrics")).status_code == 401
    assert (await world.as_("readonly_a", "GET", "/metrics")).status_code == 200
    assert (await world.as_("admin", "GET", "/metrics")).status_code == 200
    refused = await world.as_("agent_a", "GET", "/metrics")
    assert (refused.status_code, refused.json()["error"]["missing_scopes"]) == (403, ["metrics:read"])
    assert (await world.as_("none", "GET", "/healthz")).status_code == 200
