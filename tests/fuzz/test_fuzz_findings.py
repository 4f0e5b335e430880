"""Regression tests for what Schemathesis found (issue 14), each through the ASGI app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from actwheel.api.app import create_app
from actwheel.bus.memory import MemoryBus
from actwheel.engine import Engine
from actwheel.settings import Settings
from actwheel.storage import open_store


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The app over a started SQLite store, authentication off (the local caller holds ``*``)."""
    url = f"sqlite:///{tmp_path}/actwheel.db"
    store = open_store(url)
    await store.start()
    engine = Engine(Settings(database_url=url, instance="t", auth=False), store=store, bus=MemoryBus())
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(engine.control)),
                                     base_url="http://t") as client:
            yield client
    finally:
        await store.stop()


@pytest.mark.parametrize("outcome", [{}, [], ["happened"]])
async def test_resolve_with_an_outcome_that_is_not_a_string_is_422_not_500(http: httpx.AsyncClient,
                                                                        outcome: object) -> None:
    """service/operations.py resolve_run: ``outcome not in _OUTCOMES`` raised TypeError (unhashable) → 500."""
    answer = await http.post("/v1/runs/no-such-run/resolve", json={"outcome": outcome, "note": "checked"})
    assert answer.status_code == 422
    assert answer.json()["error"]["field"] == "outcome"


@pytest.mark.parametrize(("path", "allowed"), [
    ("/v1/automations", {"GET", "POST"}),
    ("/v1/automations/a1", {"GET", "PATCH", "DELETE"}),
    ("/v1/automations/bulk", {"POST"}),
    ("/v1/runs/bulk-cancel", {"POST"}),
    ("/v1/dead-letters/x", {"GET", "DELETE"}),
])
async def test_a_405_names_every_method_of_the_path(http: httpx.AsyncClient, path: str, allowed: set[str]) -> None:
    """api/app.py: a route per method made a 405's Allow name one method only (OPTIONS /v1/automations:
    ``Allow: POST``), and /v1/automations/bulk answered with the methods of /v1/automations/{id}."""
    answer = await http.request("OPTIONS", path)
    assert answer.status_code == 405
    assert {m.strip() for m in answer.headers["allow"].split(",")} - {"HEAD"} == allowed


async def test_literal_paths_still_win_and_templates_still_match(http: httpx.AsyncClient) -> None:
    bulk = await http.post("/v1/automations/bulk", json={"op": "disable", "ids": [], "dry_run": True})
    assert bulk.status_code == 200
    assert bulk.json()["dry_run"] is True
    assert (await http.get("/v1/automations/bulk")).status_code == 404  # GET /v1/automations/{id}, id=bulk
