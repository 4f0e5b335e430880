"""The five ontology executors over the in-memory gateway."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from actions_support import make_ctx

from actwheel.actions.base import ActionResult, execute_with_deadline
from actwheel.actions.executors.ontology import (
    CreateObject,
    CreateRelation,
    DeleteObject,
    DeleteRelation,
    UpdateObject,
)
from actwheel.actions.ontology_port import InMemoryOntology, NewObject, ObjectType, OntologyObject
from actwheel.errors import InvalidAction, NotFound


async def _create(ontology: InMemoryOntology, sku: str = "A", run: str = "run-1") -> ActionResult:
    result = await CreateObject().execute(
        {"object_type": "Order", "properties": {"sku": sku}}, make_ctx(ontology=ontology, run_id=run)
    )
    assert result.succeeded, result
    return result


async def test_create_object(ontology: InMemoryOntology) -> None:
    result = await _create(ontology)
    stored = await ontology.get_object(result.data["object_id"])
    assert stored.properties == {"sku": "A"}
    assert stored.version == result.data["version"] == 1


async def test_create_validates_against_the_object_type_listing_every_error(ontology: InMemoryOntology) -> None:
    result = await CreateObject().execute(
        {"object_type": "Order", "properties": {"qty": 0}}, make_ctx(ontology=ontology)
    )
    assert result.code == "invalid"
    assert {e["field"]: e["value"] for e in result.data["errors"]} == {"properties.sku": None, "properties.qty": 0}
    assert await ontology.list_objects() == []


async def test_create_of_unknown_type_is_not_found(ontology: InMemoryOntology) -> None:
    result = await CreateObject().execute({"object_type": "Nope", "properties": {}}, make_ctx(ontology=ontology))
    assert (result.code, result.retryable) == ("not_found", False)
    assert "Nope" in result.summary


def test_config_validation_all_at_once() -> None:
    errors = CreateObject().validate({"object_type": 3, "properties": [], "extra": 1})
    assert {e.field for e in errors} == {"object_type", "properties", "extra"}
    errors = CreateObject().validate({"objects": [{"object_type": "Order"}, {"properties": {}}]})
    assert {e.field for e in errors} == {"objects[0].properties", "objects[1].object_type"}
    assert CreateObject().validate({})
    assert CreateObject().validate({"objects": [], "object_type": "x"})
    errors = UpdateObject().validate({"object_id": "", "properties": {}, "expected_version": 0})
    assert {e.field: e.value for e in errors} == {"object_id": "", "expected_version": 0}


async def test_batch_create_is_one_transaction(ontology: InMemoryOntology) -> None:
    objects = [{"object_type": "Order", "properties": {"sku": f"S{i}"}} for i in range(50)]
    result = await CreateObject().execute({"objects": objects}, make_ctx(ontology=ontology))
    assert result.succeeded
    assert result.data["count"] == 50
    assert len(await ontology.list_objects(limit=1000)) == 50

    broken = [*objects, {"object_type": "Order", "properties": {"sku": 7}}, {"object_type": "Order", "properties": {}}]
    result = await CreateObject().execute({"objects": broken}, make_ctx(ontology=ontology, run_id="run-2"))
    assert result.code == "invalid"
    assert [e["field"] for e in result.data["errors"]] == ["objects[50].properties.sku", "objects[51].properties.sku"]
    assert len(await ontology.list_objects(limit=1000)) == 50  # nothing of the broken batch


async def test_batch_compensation_deletes_every_created_object(ontology: InMemoryOntology) -> None:
    objects = [{"object_type": "Order", "properties": {"sku": f"S{i}"}} for i in range(5)]
    ctx = make_ctx(ontology=ontology)
    result = await CreateObject().execute({"objects": objects}, ctx)
    undone = await CreateObject().compensate({"objects": objects}, result, ctx)
    assert undone.succeeded
    assert await ontology.list_objects(include_deleted=True) == []


async def test_replaying_a_run_creates_once(ontology: InMemoryOntology) -> None:
    first = await _create(ontology)
    again = await _create(ontology)
    other_run = await _create(ontology, run="run-2")
    assert first.data["object_id"] == again.data["object_id"] != other_run.data["object_id"]
    assert len(await ontology.list_objects()) == 2


def test_natural_idempotency_keys() -> None:
    create = CreateObject()
    key = create.idempotency_key({"object_type": "Order", "properties": {"a": 1, "b": 2}})
    assert key == create.idempotency_key({"object_type": "Order", "properties": {"b": 2, "a": 1}})
    assert key.startswith("ontology.create_object:")
    assert key != create.idempotency_key({"object_type": "Order", "properties": {"a": 2, "b": 2}})
    assert (
        UpdateObject().idempotency_key({"object_id": "o1", "properties": {}, "expected_version": 3})
        == "ontology.update_object:o1:3"
    )
    assert DeleteObject().idempotency_key({"object_id": "o1"}) == "ontology.delete_object:o1"
    assert DeleteRelation().idempotency_key({"relation_id": "r1"}) == "ontology.delete_relation:r1"


async def test_create_compensation_deletes_it_and_is_idempotent(ontology: InMemoryOntology) -> None:
    ctx = make_ctx(ontology=ontology)
    config = {"object_type": "Order", "properties": {"sku": "A"}}
    result = await CreateObject().execute(config, ctx)
    assert (await CreateObject().compensate(config, result, ctx)).succeeded
    assert (await CreateObject().compensate(config, result, ctx)).succeeded
    with pytest.raises(NotFound):
        await ontology.get_object(result.data["object_id"], include_deleted=True)


async def test_create_dry_run_validates_and_changes_nothing(ontology: InMemoryOntology) -> None:
    ctx = make_ctx(ontology=ontology)
    ok = await CreateObject().dry_run({"object_type": "Order", "properties": {"sku": "A"}}, ctx)
    bad = await CreateObject().dry_run({"object_type": "Order", "properties": {"sku": 1}}, ctx)
    assert ok.succeeded
    assert "would create 1 object" in ok.summary
    assert bad.code == "invalid"
    assert bad.data["errors"][0]["field"] == "properties.sku"
    assert await ontology.list_objects() == []


async def test_update_with_expected_version_and_compensation(ontology: InMemoryOntology) -> None:
    created = await _create(ontology)
    object_id = created.data["object_id"]
    config = {"object_id": object_id, "properties": {"qty": 5}, "expected_version": 1}
    ctx = make_ctx(ontology=ontology, run_id="run-u")
    result = await UpdateObject().execute(config, ctx)
    assert result.succeeded
    assert result.data["version"] == 2
    assert (await ontology.get_object(object_id)).properties == {"sku": "A", "qty": 5}
    undone = await UpdateObject().compensate(config, result, ctx)
    assert undone.succeeded
    restored = await ontology.get_object(object_id)
    assert (restored.properties, restored.version) == ({"sku": "A"}, 3)


async def test_stale_version_is_a_clear_conflict(ontology: InMemoryOntology) -> None:
    object_id = (await _create(ontology)).data["object_id"]
    await ontology.update_object(object_id, {"qty": 2}, expected_version=1)
    result = await UpdateObject().execute(
        {"object_id": object_id, "properties": {"qty": 9}, "expected_version": 1},
        make_ctx(ontology=ontology, run_id="run-u"),
    )
    assert (result.code, result.retryable) == ("conflict", False)
    assert result.data == {"object_id": object_id, "expected_version": 1, "current_version": 2}
    assert "version 2" in result.summary
    assert "expected version 1" in result.summary
    assert (await ontology.get_object(object_id)).properties["qty"] == 2


async def test_update_compensation_refuses_to_overwrite_a_later_change(ontology: InMemoryOntology) -> None:
    object_id = (await _create(ontology)).data["object_id"]
    config = {"object_id": object_id, "properties": {"qty": 5}}
    ctx = make_ctx(ontology=ontology, run_id="run-u")
    result = await UpdateObject().execute(config, ctx)
    await ontology.update_object(object_id, {"qty": 7}, expected_version=None)
    undone = await UpdateObject().compensate(config, result, ctx)
    assert undone.code == "conflict"
    assert (await ontology.get_object(object_id)).properties["qty"] == 7


async def test_update_schema_violation_and_dry_run(ontology: InMemoryOntology) -> None:
    object_id = (await _create(ontology)).data["object_id"]
    ctx = make_ctx(ontology=ontology, run_id="run-u")
    bad = await UpdateObject().execute({"object_id": object_id, "properties": {"sku": None}}, ctx)
    assert bad.code == "invalid"
    assert bad.data["errors"][0]["field"] == "properties.sku"
    dry = await UpdateObject().dry_run({"object_id": object_id, "properties": {"qty": 3}, "expected_version": 1}, ctx)
    assert dry.succeeded
    assert dry.data["after"] == {"sku": "A", "qty": 3}
    stale = await UpdateObject().dry_run({"object_id": object_id, "properties": {}, "expected_version": 4}, ctx)
    assert stale.code == "conflict"
    assert (await ontology.get_object(object_id)).version == 1


@pytest.mark.parametrize("mode", ["soft", "hard"])
async def test_delete_and_recreate_from_snapshot(ontology: InMemoryOntology, mode: str) -> None:
    object_id = (await _create(ontology)).data["object_id"]
    config = {"object_id": object_id, "mode": mode}
    ctx = make_ctx(ontology=ontology, run_id="run-d")
    dry = await DeleteObject().dry_run(config, ctx)
    assert dry.succeeded
    assert await ontology.get_object(object_id)
    result = await DeleteObject().execute(config, ctx)
    assert result.succeeded
    with pytest.raises(NotFound):
        await ontology.get_object(object_id)
    soft_kept = await ontology.list_objects(include_deleted=True)
    assert len(soft_kept) == (1 if mode == "soft" else 0)
    assert (await DeleteObject().compensate(config, result, ctx)).succeeded
    assert (await ontology.get_object(object_id)).properties == {"sku": "A"}


async def test_hard_delete_of_a_related_object_is_refused(ontology: InMemoryOntology) -> None:
    a = (await _create(ontology, "A")).data["object_id"]
    b = (await _create(ontology, "B", run="run-2")).data["object_id"]
    await ontology.create_relation("pairs", a, b)
    ctx = make_ctx(ontology=ontology, run_id="run-d")
    assert (await DeleteObject().dry_run({"object_id": a, "mode": "hard"}, ctx)).code == "conflict"
    result = await DeleteObject().execute({"object_id": a, "mode": "hard"}, ctx)
    assert result.code == "conflict"
    assert "relation" in result.summary
    assert await ontology.get_object(a)


async def test_relations_create_delete_and_compensate(ontology: InMemoryOntology) -> None:
    a = (await _create(ontology, "A")).data["object_id"]
    b = (await _create(ontology, "B", run="run-2")).data["object_id"]
    ctx = make_ctx(ontology=ontology, run_id="run-r")
    config = {"relation_type": "pairs", "source": a, "target": b}
    assert (await CreateRelation().dry_run(config, ctx)).succeeded
    assert await ontology.list_relations() == []
    created = await CreateRelation().execute(config, ctx)
    relation_id = created.data["relation_id"]
    assert [r.id for r in await ontology.list_relations(source=a)] == [relation_id]

    delete_config = {"relation_id": relation_id}
    deleted = await DeleteRelation().execute(delete_config, make_ctx(ontology=ontology, run_id="run-x"))
    assert deleted.succeeded
    assert await ontology.list_relations() == []
    assert (await DeleteRelation().compensate(delete_config, deleted, ctx)).succeeded
    assert [r.id for r in await ontology.list_relations()] == [relation_id]
    assert (await CreateRelation().compensate(config, created, ctx)).succeeded
    assert (await CreateRelation().compensate(config, created, ctx)).succeeded  # idempotent
    assert await ontology.list_relations() == []


async def test_relation_to_a_missing_object_is_not_found(ontology: InMemoryOntology) -> None:
    a = (await _create(ontology)).data["object_id"]
    result = await CreateRelation().execute(
        {"relation_type": "pairs", "source": a, "target": "ghost"}, make_ctx(ontology=ontology)
    )
    assert result.code == "not_found"
    assert "ghost" in result.summary
    dry = await DeleteRelation().dry_run({"relation_id": "ghost"}, make_ctx(ontology=ontology))
    assert dry.code == "not_found"


async def test_without_an_ontology_store_the_result_says_so() -> None:
    result = await CreateObject().execute({"object_type": "Order", "properties": {}}, make_ctx())
    assert (result.status, result.code) == ("failed", "not_available")


class SlowOntology(InMemoryOntology):
    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def create_objects(
        self, objects: Sequence[NewObject], *, idempotency_key: str | None = None
    ) -> list[OntologyObject]:
        await self.release.wait()
        return await super().create_objects(objects, idempotency_key=idempotency_key)


async def test_timeout_is_a_retryable_result_for_a_strong_action() -> None:
    ontology = SlowOntology()
    await ontology.put_type(ObjectType(name="Order"))
    ctx = make_ctx(ontology=ontology, timeout=0.05)
    result = await execute_with_deadline(CreateObject(), {"object_type": "Order", "properties": {}}, ctx)
    assert (result.code, result.retryable) == ("timeout", True)
    assert await ontology.list_objects() == []


async def test_object_type_spec_errors() -> None:
    with pytest.raises(InvalidAction) as err:
        ObjectType.from_spec({"name": "1bad", "properties": {"x": 3}, "required": "x"})
    assert {e.field for e in err.value.errors} == {"name", "properties.x", "required"}
    spec = ObjectType.from_spec({"name": "Order", "properties": {"sku": {"type": "string"}}, "required": ["sku"]})
    assert spec.required == ("sku",)
