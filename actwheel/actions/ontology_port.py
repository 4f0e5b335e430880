"""The ontology port: object types, objects and relations, as the ontology executors need them.

:class:`OntologyGateway` is deliberately small so one storage transaction can
implement it. :class:`InMemoryOntology` is the product in-memory implementation
(tests, the embedded demo); the storage-backed one implements the same contract.

Contract shared by every mutating method: ``idempotency_key`` (optional) makes
the call replay-safe — a second call with a key already applied returns the
first call's outcome and changes nothing. A batch is all-or-nothing.
"""

from __future__ import annotations

import copy
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from actwheel.actions.schema import schema_errors
from actwheel.errors import Conflict, FieldError, InvalidAction, NotFound

__all__ = [
    "InMemoryOntology",
    "NewObject",
    "ObjectChange",
    "ObjectType",
    "OntologyGateway",
    "OntologyObject",
    "Relation",
]

_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True, slots=True)
class ObjectType:
    """A named object type whose ``properties`` / ``required`` are JSON Schema.

    ``{"name": "Order", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}``
    """

    name: str
    properties: dict[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()

    def json_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": self.properties, "required": list(self.required)}

    def errors(self, properties: Any, prefix: str = "properties") -> list[FieldError]:
        """Every way ``properties`` fails this type's schema, paths under ``prefix``."""
        return schema_errors(self.json_schema(), properties, prefix)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> ObjectType:
        """:raises InvalidAction: listing every problem with the spec"""
        errors = schema_errors(_TYPE_SPEC_SCHEMA, spec)
        if errors:
            raise InvalidAction.collect(errors)
        return cls(
            name=spec["name"],
            properties=dict(spec.get("properties", {})),
            required=tuple(spec.get("required", ())),
        )


_TYPE_SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_.-]{0,99}$"},
        "properties": {"type": "object", "additionalProperties": {"type": "object"}},
        "required": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
}


@dataclass(frozen=True, kw_only=True, slots=True)
class OntologyObject:
    """One object; also the snapshot that compensation restores."""

    id: str
    object_type: str
    properties: dict[str, Any]
    version: int = 1
    deleted: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object_type": self.object_type,
            "properties": copy.deepcopy(self.properties),
            "version": self.version,
            "deleted": self.deleted,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OntologyObject:
        return cls(
            id=data["id"],
            object_type=data["object_type"],
            properties=dict(data["properties"]),
            version=int(data["version"]),
            deleted=bool(data.get("deleted", False)),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class NewObject:
    object_type: str
    properties: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class ObjectChange:
    """An update's before and after snapshots."""

    before: OntologyObject
    after: OntologyObject


@dataclass(frozen=True, kw_only=True, slots=True)
class Relation:
    """A directed, typed edge between two objects. Relation types are free-form names."""

    id: str
    relation_type: str
    source: str
    target: str
    properties: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "relation_type": self.relation_type,
            "source": self.source,
            "target": self.target,
            "properties": copy.deepcopy(self.properties),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Relation:
        return cls(
            id=data["id"],
            relation_type=data["relation_type"],
            source=data["source"],
            target=data["target"],
            properties=dict(data.get("properties", {})),
        )


class OntologyGateway(ABC):
    """What the ontology executors need from a store. Every method is atomic."""

    @abstractmethod
    async def put_type(self, object_type: ObjectType) -> ObjectType:
        """Define or redefine an object type (existing objects are not re-validated)."""

    @abstractmethod
    async def get_type(self, name: str) -> ObjectType:
        """:raises NotFound: no object type ``name``"""

    @abstractmethod
    async def create_objects(
        self, objects: Sequence[NewObject], *, idempotency_key: str | None = None
    ) -> list[OntologyObject]:
        """Create every object in one transaction (all or none), each validated against its type.

        :raises NotFound: an object type does not exist
        :raises InvalidAction: listing every schema violation, paths ``objects[i].properties.<field>``
        """

    async def create_object(
        self, object_type: str, properties: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> OntologyObject:
        """One object; errors as :meth:`create_objects` but with paths ``properties.<field>``."""
        try:
            created = await self.create_objects(
                [NewObject(object_type=object_type, properties=dict(properties))],
                idempotency_key=idempotency_key,
            )
        except InvalidAction as exc:
            errors = [replace(e, field=e.field.removeprefix("objects[0].")) for e in exc.errors]
            raise InvalidAction.collect(errors) from None
        return created[0]

    @abstractmethod
    async def get_object(self, object_id: str, *, include_deleted: bool = False) -> OntologyObject:
        """:raises NotFound: no such object (or it is soft-deleted and ``include_deleted`` is false)"""

    @abstractmethod
    async def update_object(
        self,
        object_id: str,
        properties: Mapping[str, Any],
        *,
        expected_version: int | None,
        merge: bool = True,
        idempotency_key: str | None = None,
    ) -> ObjectChange:
        """Merge (or replace) properties; the version goes up by one.

        :raises NotFound: no live object ``object_id``
        :raises Conflict: ``expected_version`` is given and is not the current version
        :raises InvalidAction: the result would violate the type's schema
        """

    @abstractmethod
    async def delete_object(
        self,
        object_id: str,
        *,
        soft: bool,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> OntologyObject:
        """Soft-delete (mark) or hard-delete (remove) an object; returns the snapshot before.

        :raises NotFound: no live object ``object_id``
        :raises Conflict: version mismatch, or a hard delete of an object that still has relations
        """

    @abstractmethod
    async def restore_object(self, snapshot: OntologyObject, *, expected_version: int | None = None) -> OntologyObject:
        """Make the object look like ``snapshot`` again (re-created if hard-deleted); version goes up.

        :raises Conflict: the object exists and its version is not ``expected_version``
        """

    @abstractmethod
    async def create_relation(
        self,
        relation_type: str,
        source: str,
        target: str,
        properties: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Relation:
        """:raises NotFound: the source or target is not a live object"""

    @abstractmethod
    async def get_relation(self, relation_id: str) -> Relation:
        """:raises NotFound: no relation ``relation_id``"""

    @abstractmethod
    async def delete_relation(self, relation_id: str, *, idempotency_key: str | None = None) -> Relation:
        """Remove a relation; returns its snapshot.

        :raises NotFound: no relation ``relation_id``
        """

    @abstractmethod
    async def restore_relation(self, snapshot: Relation) -> Relation:
        """Re-create a deleted relation with its old id.

        :raises NotFound: its source or target is no longer a live object
        :raises Conflict: a relation with that id exists
        """

    @abstractmethod
    async def list_objects(
        self, object_type: str | None = None, *, include_deleted: bool = False, limit: int = 100
    ) -> list[OntologyObject]:
        """Objects (of one type, if given) in creation order, at most ``limit``."""

    @abstractmethod
    async def list_relations(
        self, *, source: str | None = None, target: str | None = None, limit: int = 100
    ) -> list[Relation]:
        """Relations from ``source`` and/or to ``target``, in creation order, at most ``limit``."""


class InMemoryOntology(OntologyGateway):
    """The ontology in dicts. No ``await`` happens mid-change, so each method is atomic on one loop."""

    def __init__(self) -> None:
        self._types: dict[str, ObjectType] = {}
        self._objects: dict[str, OntologyObject] = {}
        self._relations: dict[str, Relation] = {}
        self._applied: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"InMemoryOntology({len(self._objects)} objects, {len(self._relations)} relations)"

    async def put_type(self, object_type: ObjectType) -> ObjectType:
        self._types[object_type.name] = object_type
        return object_type

    async def get_type(self, name: str) -> ObjectType:
        try:
            return self._types[name]
        except KeyError:
            raise NotFound("object type", name) from None

    async def create_objects(
        self, objects: Sequence[NewObject], *, idempotency_key: str | None = None
    ) -> list[OntologyObject]:
        if idempotency_key in self._applied:
            return list(self._applied[idempotency_key])
        errors: list[FieldError] = []
        for index, new in enumerate(objects):
            errors += (await self.get_type(new.object_type)).errors(new.properties, f"objects[{index}].properties")
        if errors:
            raise InvalidAction.collect(errors)
        created = [self._insert(new) for new in objects]
        return self._remember(idempotency_key, created)

    def _insert(self, new: NewObject) -> OntologyObject:
        obj = OntologyObject(
            id=str(uuid.uuid4()), object_type=new.object_type, properties=copy.deepcopy(new.properties)
        )
        self._objects[obj.id] = obj
        return obj

    def _remember(self, key: str | None, outcome: _T) -> _T:
        if key is not None:
            self._applied[key] = outcome
        return outcome

    def _live(self, object_id: str) -> OntologyObject:
        obj = self._objects.get(object_id)
        if obj is None or obj.deleted:
            raise NotFound("object", object_id)
        return obj

    async def get_object(self, object_id: str, *, include_deleted: bool = False) -> OntologyObject:
        obj = self._objects.get(object_id)
        if obj is None or (obj.deleted and not include_deleted):
            raise NotFound("object", object_id)
        return obj

    @staticmethod
    def _check_version(obj: OntologyObject, expected_version: int | None) -> None:
        if expected_version is not None and obj.version != expected_version:
            raise Conflict("object", obj.id, f"expected version {expected_version}, current version {obj.version}")

    async def update_object(
        self,
        object_id: str,
        properties: Mapping[str, Any],
        *,
        expected_version: int | None,
        merge: bool = True,
        idempotency_key: str | None = None,
    ) -> ObjectChange:
        if idempotency_key in self._applied:
            applied: ObjectChange = self._applied[idempotency_key]
            return applied
        before = self._live(object_id)
        self._check_version(before, expected_version)
        merged = {**before.properties, **properties} if merge else dict(properties)
        errors = (await self.get_type(before.object_type)).errors(merged)
        if errors:
            raise InvalidAction.collect(errors)
        after = replace(before, properties=copy.deepcopy(merged), version=before.version + 1)
        self._objects[object_id] = after
        return self._remember(idempotency_key, ObjectChange(before=before, after=after))

    async def delete_object(
        self,
        object_id: str,
        *,
        soft: bool,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> OntologyObject:
        if idempotency_key in self._applied:
            applied: OntologyObject = self._applied[idempotency_key]
            return applied
        before = self._live(object_id)
        self._check_version(before, expected_version)
        if soft:
            self._objects[object_id] = replace(before, deleted=True, version=before.version + 1)
        else:
            self._refuse_if_related(object_id)
            del self._objects[object_id]
        return self._remember(idempotency_key, before)

    def _refuse_if_related(self, object_id: str) -> None:
        count = sum(1 for r in self._relations.values() if object_id in (r.source, r.target))
        if count:
            raise Conflict("object", object_id, f"it has {count} relation(s); delete them first or delete softly")

    async def restore_object(self, snapshot: OntologyObject, *, expected_version: int | None = None) -> OntologyObject:
        current = self._objects.get(snapshot.id)
        if current is not None:
            self._check_version(current, expected_version)
        version = (current.version if current is not None else snapshot.version) + 1
        restored = replace(snapshot, properties=copy.deepcopy(snapshot.properties), version=version)
        self._objects[snapshot.id] = restored
        return restored

    async def create_relation(
        self,
        relation_type: str,
        source: str,
        target: str,
        properties: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Relation:
        if idempotency_key in self._applied:
            applied: Relation = self._applied[idempotency_key]
            return applied
        self._live(source)
        self._live(target)
        relation = Relation(
            id=str(uuid.uuid4()),
            relation_type=relation_type,
            source=source,
            target=target,
            properties=dict(properties or {}),
        )
        self._relations[relation.id] = relation
        return self._remember(idempotency_key, relation)

    async def get_relation(self, relation_id: str) -> Relation:
        try:
            return self._relations[relation_id]
        except KeyError:
            raise NotFound("relation", relation_id) from None

    async def delete_relation(self, relation_id: str, *, idempotency_key: str | None = None) -> Relation:
        if idempotency_key in self._applied:
            applied: Relation = self._applied[idempotency_key]
            return applied
        relation = await self.get_relation(relation_id)
        del self._relations[relation_id]
        return self._remember(idempotency_key, relation)

    async def restore_relation(self, snapshot: Relation) -> Relation:
        if snapshot.id in self._relations:
            raise Conflict("relation", snapshot.id, "a relation with this id exists")
        self._live(snapshot.source)
        self._live(snapshot.target)
        self._relations[snapshot.id] = snapshot
        return snapshot

    async def list_objects(
        self, object_type: str | None = None, *, include_deleted: bool = False, limit: int = 100
    ) -> list[OntologyObject]:
        found = [
            o
            for o in self._objects.values()
            if (object_type is None or o.object_type == object_type) and (include_deleted or not o.deleted)
        ]
        return found[:limit]

    async def list_relations(
        self, *, source: str | None = None, target: str | None = None, limit: int = 100
    ) -> list[Relation]:
        found = [
            r
            for r in self._relations.values()
            if (source is None or r.source == source) and (target is None or r.target == target)
        ]
        return found[:limit]
