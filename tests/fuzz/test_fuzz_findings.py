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


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "Order", "properties": {"sku": {"description": "a\u0000b"}}}, "properties.sku.description"),
    ({"name": "Order", "required": ["ok", "n\u0000"]}, "required[1]"),
    ({"name": "Order", "properties": {"k\u0000": {}}}, "properties"),
])
async def test_a_nul_character_in_a_body_is_422_naming_where(http: httpx.AsyncClient, body: dict[str, object],
                                                             field: str) -> None:
    """api/body.py: PostgreSQL's jsonb cannot hold U+0000, so POST /v1/ontology/types with one was a 500
    (StorageError: UntranslatableCharacterError); refused where bodies are read, on every store."""
    answer = await http.post("/v1/ontology/types", json=body)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["field"] == field
    assert "\u0000" not in answer.text


async def test_a_backslash_and_u0000_as_text_is_not_a_nul(http: httpx.AsyncClient) -> None:
    answer = await http.post("/v1/ontology/types", json={"name": "Order", "properties": {
        "sku": {"description": "\\u0000 is how JSON writes NUL"}}})
    assert answer.status_code == 201
