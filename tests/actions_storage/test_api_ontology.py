"""The ontology and secret routes through the real Starlette app, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from actions_storage_support import cdc_rows

from actwheel.actions.secrets import KEY_ENV, MASK, SecretCipher
from actwheel.actions.storage_ontology import StorageOntology
from actwheel.api.app import create_app
from actwheel.bus.memory import MemoryBus
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.settings import Settings
from actwheel.storage import Store

VALUE = "hunter2-but-longer-and-secret"
ORDER_SPEC = {"name": "Order", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}


@pytest.fixture
def engine(db_url: str, store: Store, clock: VirtualClock) -> Engine:
    """An engine over the test store; its actors are never started."""
    return Engine(Settings(database_url=db_url, instance="t", auth=False), clock=clock, store=store, bus=MemoryBus())


@pytest.fixture
async def client(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv(KEY_ENV, SecretCipher.generate_key())
    app = create_app(engine.control)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://actwheel.test") as http:
        yield http


async def define_order(client: httpx.AsyncClient) -> None:
    answer = await client.post("/v1/ontology/types", json=ORDER_SPEC)
    assert answer.status_code == 201, answer.text


async def test_define_and_list_types(client: httpx.AsyncClient) -> None:
    answer = await client.post("/v1/ontology/types", json=ORDER_SPEC)
    assert answer.status_code == 201
    assert answer.json() == {**ORDER_SPEC, "version": 1}
    redefined = {**ORDER_SPEC, "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}
    again = await client.post("/v1/ontology/types", json=redefined)
    assert (again.status_code, again.json()["version"]) == (200, 2)
    listed = (await client.get("/v1/ontology/types")).json()["items"]
    assert [(t["name"], t["version"], sorted(t["properties"])) for t in listed] == [
        ("Order", 2, ["qty", "sku"])
    ]


@pytest.mark.parametrize(
    ("body", "field", "value"),
    [
        ({"properties": {}}, "name", None),
        ({"name": "9lives"}, "name", "9lives"),
        ({"name": "Order", "required": "sku"}, "required", "sku"),
        ({"name": "Order", "colour": "red"}, "colour", "red"),
    ],
)
async def test_a_bad_type_answers_422_naming_field_and_value(
    client: httpx.AsyncClient, body: dict[str, Any], field: str, value: Any
) -> None:
    answer = await client.post("/v1/ontology/types", json=body)
    assert answer.status_code == 422
    errors = answer.json()["error"]["errors"]
    assert {"field": field, "value": value} in [{"field": e["field"], "value": e["value"]} for e in errors]
    assert (await client.get("/v1/ontology/types")).json()["items"] == []


async def test_an_invalid_property_schema_answers_422(client: httpx.AsyncClient) -> None:
    answer = await client.post(
        "/v1/ontology/types", json={"name": "Bad", "properties": {"n": {"type": "nope"}}}
    )
    assert answer.status_code == 422
    assert answer.json()["error"]["field"].startswith("properties.n")


async def test_objects_and_relations_are_readable(
    client: httpx.AsyncClient, engine: Engine, store: Store
) -> None:
    await define_order(client)
    ontology = StorageOntology(engine.store, engine.events)
    a = await ontology.create_object("Order", {"sku": "A"})
    b = await ontology.create_object("Order", {"sku": "B"})
    rel = await ontology.create_relation("pairs", a.id, b.id)
    await ontology.delete_object(b.id, soft=True)

    listed = (await client.get("/v1/ontology/objects", params={"type": "Order"})).json()["items"]
    assert [o["id"] for o in listed] == [a.id]
    with_deleted = await client.get(
        "/v1/ontology/objects", params={"type": "Order", "include_deleted": "true"}
    )
    assert [o["id"] for o in with_deleted.json()["items"]] == [a.id, b.id]
    one = await client.get(f"/v1/ontology/objects/{a.id}")
    assert one.json() == {
        "id": a.id,
        "object_type": "Order",
        "properties": {"sku": "A"},
        "version": 1,
        "deleted": False,
    }
    assert (await client.get(f"/v1/ontology/objects/{b.id}")).status_code == 404
    relations = (await client.get("/v1/ontology/relations", params={"source": a.id})).json()["items"]
    assert relations == [rel.as_dict()]
    assert [rk for rk, _, _ in await cdc_rows(store)][-1] == "cdc.ontology.Order.deleted"


@pytest.mark.parametrize(
    ("path", "params", "field", "value"),
    [
        ("/v1/ontology/objects", {"type": "no spaces"}, "type", "no spaces"),
        ("/v1/ontology/objects", {"limit": "0"}, "limit", "0"),
        ("/v1/ontology/objects", {"include_deleted": "maybe"}, "include_deleted", "maybe"),
        ("/v1/ontology/relations", {}, "source", None),
        ("/v1/ontology/relations", {"source": "x", "limit": "5000"}, "limit", "5000"),
    ],
)
async def test_bad_queries_answer_422(
    client: httpx.AsyncClient, path: str, params: dict[str, str], field: str, value: Any
) -> None:
    answer = await client.get(path, params=params)
    assert answer.status_code == 422
    assert (answer.json()["error"]["field"], answer.json()["error"]["value"]) == (field, value)


async def test_an_unknown_type_lists_nothing(client: httpx.AsyncClient) -> None:
    answer = await client.get("/v1/ontology/objects", params={"type": "Nothing"})
    assert (answer.status_code, answer.json()) == (200, {"items": []})


# --- secrets ----------------------------------------------------------------------------------


async def test_a_secret_is_stored_encrypted_and_never_answered(
    client: httpx.AsyncClient, engine: Engine, store: Store
) -> None:
    answer = await client.post("/v1/secrets", json={"name": "smtp_password", "value": VALUE})
    assert answer.status_code == 201
    assert answer.json() == {
        "name": "smtp_password",
        "value": MASK,
        "version": 1,
        "reference": {"$secret": "smtp_password"},
    }
    duplicate = await client.post("/v1/secrets", json={"name": "smtp_password", "value": "x"})
    assert duplicate.status_code == 409
    replaced = await client.post(
        "/v1/secrets", json={"name": "smtp_password", "value": "x2", "replace": True}
    )
    assert (replaced.status_code, replaced.json()["version"]) == (200, 2)
    listed = await client.get("/v1/secrets")
    assert listed.json() == {"items": [{"name": "smtp_password", "value": MASK}]}
    for text in (answer.text, duplicate.text, replaced.text, listed.text):
        assert VALUE not in text
        assert "x2" not in text
    async with store.transaction() as tx:
        record = await tx.secrets.get(engine.settings.local_owner, "smtp_password")
    assert b"x2" not in record.ciphertext


async def test_bad_secret_input_answers_422_without_the_value(client: httpx.AsyncClient) -> None:
    bad_name = await client.post("/v1/secrets", json={"name": "a b", "value": VALUE})
    assert (bad_name.status_code, bad_name.json()["error"]["field"]) == (422, "name")
    assert VALUE not in bad_name.text
    bad_value = await client.post("/v1/secrets", json={"name": "ok", "value": 42})
    assert (bad_value.status_code, bad_value.json()["error"]["field"]) == (422, "value")
    assert (await client.get("/v1/secrets")).json()["items"] == []


async def test_without_a_key_secrets_cannot_be_stored_but_names_can_be_listed(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("ACTWHEEL_SECRET_KEY_FILE", raising=False)
    app = create_app(engine.control)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        refused = await client.post("/v1/secrets", json={"name": "token", "value": VALUE})
        assert refused.status_code == 501
        assert "ACTWHEEL_SECRET_KEY" in refused.text
        assert VALUE not in refused.text
        assert (await client.get("/v1/secrets")).json() == {"items": []}
