"""The ontology repository: object types, objects (one at a time or in one bulk insert) and relations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from actwheel.errors import Conflict, IntegrityViolation, InvalidInput, NotFound
from actwheel.storage import _codec as codec
from actwheel.storage._rows import (
    object_of,
    object_type_of,
    relation_of,
)
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import OntologyRepository
from actwheel.storage.records import (
    NewOntologyObject,
    ObjectRecord,
    ObjectTypeRecord,
    RelationRecord,
)

__all__ = ["SqlOntology"]


def _new_object_row(i: int, new: NewOntologyObject, now: datetime) -> dict[str, Any]:
    f = f"objects[{i}]."
    if not isinstance(new, NewOntologyObject):
        raise InvalidInput(f"objects[{i}]", type(new).__name__, "a NewOntologyObject")
    created_by = new.created_by
    return {
        "id": codec.new_id() if new.id is None else codec.text_field(f + "id", new.id),
        "object_type": codec.text_field(f + "object_type", new.object_type),
        "properties": codec.json_field(f + "properties", new.properties),
        "version": 1,
        "deleted": False,
        "created_by": None if created_by is None else codec.text_field(f + "created_by", created_by),
        "created_at": now,
        "updated_at": now,
    }


def _refuse_repeated_ids(rows: Sequence[Mapping[str, Any]]) -> None:
    seen: set[str] = set()
    for row in rows:
        if row["id"] in seen:
            raise Conflict("object", row["id"], "id given twice in one batch")
        seen.add(row["id"])


def _created_object(row: Mapping[str, Any]) -> ObjectRecord:
    return ObjectRecord(
        id=row["id"],
        object_type=row["object_type"],
        properties=codec.loads(row["properties"]),
        version=1,
        deleted=False,
        created_by=row["created_by"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class SqlOntology(OntologyRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def put_type(
        self,
        name: str,
        properties: dict[str, Any],
        required: Sequence[str] = (),
        *,
        expected_version: int | None = None,
    ) -> ObjectTypeRecord:
        params = {
            "name": codec.text_field("name", name, max_len=100),
            "properties": codec.json_field("properties", properties),
            "required": codec.json_field("required", list(required)),
            "expected_version": codec.version("expected_version", expected_version, optional=True),
        }
        if expected_version in (None, 0):
            row = await self._sql.fetchrow("insert_type", params)
            if row is not None:
                return object_type_of(row)
            if expected_version == 0:
                raise Conflict("object_type", name, "already exists")
        row = await self._sql.fetchrow("update_type", params)
        if row is None:
            current = await self.get_type(name)
            raise Conflict("object_type", name, f"version is {current.version}, not {expected_version}")
        return object_type_of(row)

    async def get_type(self, name: str) -> ObjectTypeRecord:
        row = await self._sql.fetchrow("get_type", {"name": name})
        if row is None:
            raise NotFound("object_type", name)
        return object_type_of(row)

    async def list_types(self) -> list[ObjectTypeRecord]:
        return [object_type_of(r) for r in await self._sql.fetch("list_types")]

    async def delete_type(self, name: str) -> None:
        try:
            row = await self._sql.guarded_row("delete_type", {"name": name})
        except IntegrityViolation:
            raise Conflict("object_type", name, "objects of this type still exist") from None
        if row is None:
            raise NotFound("object_type", name)

    async def create_object(
        self,
        object_type: str,
        properties: dict[str, Any],
        *,
        object_id: str | None = None,
        created_by: str | None = None,
    ) -> ObjectRecord:
        params = {
            "id": codec.new_id() if object_id is None else codec.text_field("object_id", object_id),
            "object_type": codec.text_field("object_type", object_type),
            "properties": codec.json_field("properties", properties),
            "created_by": created_by,
        }
        try:
            row = await self._sql.guarded_row("insert_object", params)
        except IntegrityViolation as exc:
            if exc.kind == "foreign_key":
                raise NotFound("object_type", object_type) from None
            raise Conflict("object", params["id"], "id already exists") from None
        assert row is not None
        return object_of(row)

    async def create_objects(self, news: Sequence[NewOntologyObject]) -> list[ObjectRecord]:
        if isinstance(news, str | bytes | Mapping):
            raise InvalidInput("objects", type(news).__name__, "a sequence of NewOntologyObject")
        if not news:
            return []
        now = await self._sql.now()
        rows = [_new_object_row(i, new, now) for i, new in enumerate(news)]
        _refuse_repeated_ids(rows)
        try:
            await self._sql.copy_rows("copy_objects", rows)
        except IntegrityViolation as exc:
            await self._raise_refused(rows, exc)
        return [_created_object(row) for row in rows]

    async def _raise_refused(self, rows: list[dict[str, Any]], exc: IntegrityViolation) -> None:
        """Name the first object of a refused batch: a missing type, else a taken id."""
        if exc.kind == "foreign_key":
            names = list(dict.fromkeys(r["object_type"] for r in rows))
            known = {r["name"] for r in await self._sql.fetch("types_in", {"names": names})}
            missing = next((name for name in names if name not in known), names[0])
            raise NotFound("object_type", missing) from None
        ids = [r["id"] for r in rows]
        taken = {r["id"] for r in await self._sql.fetch("object_ids_in", {"ids": ids})}
        raise Conflict("object", next((i for i in ids if i in taken), ids[0]), "id already exists") from None

    async def get_object(self, object_id: str, *, include_deleted: bool = False) -> ObjectRecord:
        row = await self._sql.fetchrow("get_object", {"id": object_id})
        if row is None or (row["deleted"] and not include_deleted):
            raise NotFound("object", object_id)
        return object_of(row)

    async def list_objects(
        self, object_type: str, *, include_deleted: bool = False, limit: int = 100
    ) -> list[ObjectRecord]:
        params = {"object_type": object_type, "include_deleted": bool(include_deleted), "limit": codec.limit(limit)}
        return [object_of(r) for r in await self._sql.fetch("list_objects", params)]

    async def update_object(
        self, object_id: str, properties: dict[str, Any], *, expected_version: int | None = None
    ) -> ObjectRecord:
        params = {
            "id": object_id,
            "properties": codec.json_field("properties", properties),
            "expected_version": codec.version("expected_version", expected_version, optional=True),
        }
        row = await self._sql.fetchrow("update_object", params)
        if row is None:
            await self._raise_missing_or_stale(object_id, expected_version)
        assert row is not None
        return object_of(row)

    async def _raise_missing_or_stale(self, object_id: str, expected_version: int | None) -> None:
        current = await self.get_object(object_id)
        raise Conflict("object", object_id, f"version is {current.version}, not {expected_version}")

    async def delete_object(
        self, object_id: str, *, soft: bool = True, expected_version: int | None = None
    ) -> ObjectRecord:
        before = await self.get_object(object_id)
        params = {"id": object_id,
                  "expected_version": codec.version("expected_version", expected_version, optional=True)}
        try:
            row = await self._sql.guarded_row("soft_delete_object" if soft else "hard_delete_object", params)
        except IntegrityViolation:
            raise Conflict("object", object_id, "it still has relations") from None
        if row is None:
            await self._raise_missing_or_stale(object_id, expected_version)
        return before

    async def restore_object(self, obj: ObjectRecord) -> ObjectRecord:
        params = {
            "id": codec.text_field("id", obj.id),
            "object_type": codec.text_field("object_type", obj.object_type),
            "properties": codec.json_field("properties", obj.properties),
            "version": codec.version("version", obj.version),
            "deleted": bool(obj.deleted),
            "created_by": obj.created_by,
            "created_at": codec.aware("created_at", obj.created_at),
        }
        try:
            row = await self._sql.guarded_row("restore_object", params)
        except IntegrityViolation:
            raise NotFound("object_type", obj.object_type) from None
        assert row is not None
        return object_of(row)

    async def create_relation(
        self,
        relation_type: str,
        source: str,
        target: str,
        properties: dict[str, Any] | None = None,
        *,
        relation_id: str | None = None,
        created_by: str | None = None,
    ) -> RelationRecord:
        params = {
            "id": codec.new_id() if relation_id is None else codec.text_field("relation_id", relation_id),
            "relation_type": codec.text_field("relation_type", relation_type),
            "source_id": codec.text_field("source", source),
            "target_id": codec.text_field("target", target),
            "properties": codec.json_field("properties", properties or {}),
            "created_by": created_by,
        }
        try:
            row = await self._sql.guarded_row("insert_relation", params)
        except IntegrityViolation as exc:
            if exc.kind == "foreign_key":
                raise NotFound("object", f"{source} or {target}") from None
            raise Conflict("relation", params["id"], "id already exists") from None
        assert row is not None
        return relation_of(row)

    async def get_relation(self, relation_id: str) -> RelationRecord:
        row = await self._sql.fetchrow("get_relation", {"id": relation_id})
        if row is None:
            raise NotFound("relation", relation_id)
        return relation_of(row)

    async def relations_of(self, object_id: str) -> list[RelationRecord]:
        return [relation_of(r) for r in await self._sql.fetch("relations_of", {"object_id": object_id})]

    async def delete_relation(self, relation_id: str) -> RelationRecord:
        row = await self._sql.fetchrow("delete_relation", {"id": relation_id})
        if row is None:
            raise NotFound("relation", relation_id)
        return relation_of(row)
