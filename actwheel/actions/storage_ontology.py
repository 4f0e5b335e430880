"""The ontology gateway over the storage port: every change commits with its CDC event.

:class:`StorageOntology` implements :class:`~actwheel.actions.ontology_port.OntologyGateway`
with ``Store`` transactions. Each mutating call is ONE transaction that changes the
ontology tables, appends its CDC event(s) to the outbox (docs/design.md invariant 4) and, when an
idempotency key is given, records the call's outcome in a durable replay ledger.

CDC routing keys, on the topology's CDC exchange (``actwheel.cdc``), envelope type
``ontology.changed`` (:class:`OntologyChanged`)::

    cdc.ontology.<object type>.created|updated|deleted          (4 dot-separated words after cdc)
    cdc.ontology.relation.<relation type>.created|deleted        (5 words)

A name becomes one routing-key word: every character outside ``[A-Za-z0-9_-]`` is replaced
by ``_`` (the exact name is in the body). Objects and relations never share a pattern:
bind ``cdc.ontology.*.*`` for objects and ``cdc.ontology.relation.*.*`` for relations.
A soft and a hard delete both publish ``deleted`` (``hard`` says which); restoring an
object publishes ``updated`` (``created`` if it had been hard-deleted), restoring a
relation ``created``. A batch create publishes one event per object, in order.

Idempotency ledger: the storage port's ``idempotency_keys`` table (``tx.idempotency``).
A key ``k`` is stored as ``ledger_key(k) = "ontology:" + sha256(k)``, inserted in the same
transaction as the change, with the outcome to replay. A second call with ``k`` finds it
and returns the first outcome without changing anything; two concurrent first calls both
change, but only one can insert the key: the other rolls back and replays.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, TypeVar

import jsonschema
import orjson

from actwheel.actions.ontology_port import (
    NewObject,
    ObjectChange,
    ObjectType,
    OntologyGateway,
    OntologyObject,
    Relation,
)
from actwheel.errors import Conflict, FieldError, InvalidAction, NotAvailable, NotFound
from actwheel.events import EventFactory
from actwheel.messages import Message
from actwheel.storage import records
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import NewOutboxMessage

__all__ = [
    "OntologyChanged",
    "StorageOntology",
    "cdc_routing_key",
    "ledger_key",
]

_T = TypeVar("_T")

_WORD = re.compile(r"[^A-Za-z0-9_-]")
#: Attempts of an update without ``expected_version`` that keeps losing a race.
_MERGE_ATTEMPTS = 3


@dataclass(frozen=True, kw_only=True, slots=True)
class OntologyChanged(Message):
    """An ontology object or relation was created, updated or deleted (CDC).

    :ivar entity: ``object`` or ``relation``
    :ivar change: ``created``, ``updated`` or ``deleted``
    :ivar type_name: the object type or relation type
    :ivar version: the object's version after the change (``None`` for relations and hard deletes)
    :ivar hard: a delete that removed the row (``False`` for a soft delete)
    :ivar before: the snapshot before (updates, deletes)
    :ivar after: the snapshot after (creates, updates, soft deletes)
    """

    TYPE: ClassVar[str] = "ontology.changed"
    entity: str
    change: str
    id: str
    type_name: str
    version: int | None = None
    hard: bool = False
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None

    @property
    def routing_key(self) -> str:
        return cdc_routing_key(self.entity, self.type_name, self.change)

    def to_data(self) -> dict[str, Any]:
        # Fields are already JSON values; skipping asdict's recursive deep copy halves a batch's CPU.
        return {
            "entity": self.entity,
            "change": self.change,
            "id": self.id,
            "type_name": self.type_name,
            "version": self.version,
            "hard": self.hard,
            "before": self.before,
            "after": self.after,
        }


def cdc_routing_key(entity: str, type_name: str, change: str) -> str:
    """``cdc.ontology.<type>.<change>`` (objects) or ``cdc.ontology.relation.<type>.<change>`` (relations)."""
    word = _WORD.sub("_", type_name) or "_"
    middle = f"relation.{word}" if entity == "relation" else word
    return f"cdc.ontology.{middle}.{change}"


def ledger_key(idempotency_key: str) -> str:
    """The ``idempotency_keys`` key of the ledger entry for ``idempotency_key``."""
    return "ontology:" + hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest()


class _KeyTaken(Exception):
    """Another transaction recorded the same idempotency key first: roll back and replay."""


# --- records ↔ port types -----------------------------------------------------------------


def _object(rec: records.ObjectRecord) -> OntologyObject:
    return OntologyObject(
        id=rec.id,
        object_type=rec.object_type,
        properties=rec.properties,
        version=rec.version,
        deleted=rec.deleted,
    )


def _relation(rec: records.RelationRecord) -> Relation:
    return Relation(
        id=rec.id,
        relation_type=rec.relation_type,
        source=rec.source,
        target=rec.target,
        properties=rec.properties,
    )


def _type(rec: records.ObjectTypeRecord) -> ObjectType:
    return ObjectType(name=rec.name, properties=rec.properties, required=rec.required)


def _snapshot(obj: OntologyObject) -> dict[str, Any]:
    """``obj.as_dict()`` without the deep copy: the event is encoded at once and never mutated."""
    return {
        "id": obj.id,
        "object_type": obj.object_type,
        "properties": obj.properties,
        "version": obj.version,
        "deleted": obj.deleted,
    }


class _OrderedIds:
    """UUID-shaped ids that sort in the order this instance made them.

    Storage lists objects by ``(created_at, id)`` and rows of one transaction (or of a store on
    a virtual clock) share ``created_at``: 48 bits of wall-clock ms, 40 random bits fixed per
    instance (unique across processes), then a 40-bit counter keep the id order = creation order.
    """

    def __init__(self) -> None:
        self._node = int.from_bytes(os.urandom(5), "big") << 40
        self._last = 0

    def take(self, count: int) -> list[str]:
        first = max(self._last + 1, (time.time_ns() // 1_000_000) << 80 | self._node)
        self._last = first + count - 1
        return [_uuid_text(first + offset) for offset in range(count)]


def _uuid_text(value: int) -> str:
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _request_hash(objects: Sequence[NewObject]) -> str:
    spec = [[o.object_type, o.properties] for o in objects]
    return hashlib.sha256(orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)).hexdigest()


# --- validation -----------------------------------------------------------------------------


class _Validators:
    """One compiled validator per object type for a batch: the fast path is ``is_valid``."""

    def __init__(self, types: Mapping[str, ObjectType]) -> None:
        self._types = types
        self._compiled = {n: jsonschema.Draft202012Validator(t.json_schema()) for n, t in types.items()}

    def errors(self, objects: Sequence[NewObject]) -> list[FieldError]:
        found: list[FieldError] = []
        for index, new in enumerate(objects):
            if not self._compiled[new.object_type].is_valid(new.properties):
                found += self._types[new.object_type].errors(new.properties, f"objects[{index}].properties")
        return found


def schema_problems(object_type: ObjectType) -> list[FieldError]:
    """Why ``object_type``'s property schemas are not valid JSON Schema (empty when they are)."""
    try:
        jsonschema.Draft202012Validator.check_schema(object_type.json_schema())
    except jsonschema.SchemaError as exc:
        path = ".".join(str(p) for p in exc.absolute_path)
        return [FieldError(path or "properties", exc.instance, f"valid JSON Schema ({exc.message})")]
    return []


class StorageOntology(OntologyGateway):
    """The ontology in the store's tables; changes and their CDC events commit together.

    :param store: a started :class:`~actwheel.storage.base.Store`
    :param events: builds the outbox rows (its topology names the CDC exchange)
    """

    def __init__(self, store: Store, events: EventFactory) -> None:
        self._store = store
        self._events = events
        self._ids = _OrderedIds()

    def __repr__(self) -> str:
        return f"StorageOntology({self._store.dialect})"

    # --- types ------------------------------------------------------------------------------

    async def put_type(self, object_type: ObjectType) -> ObjectType:
        """:raises InvalidAction: a property schema is not valid JSON Schema"""
        defined, _ = await self.define_type(object_type)
        return defined

    async def define_type(self, object_type: ObjectType) -> tuple[ObjectType, int]:
        """Define or redefine a type; returns it and its version (1 = newly created).

        :raises InvalidAction: a property schema is not valid JSON Schema
        """
        problems = schema_problems(object_type)
        if problems:
            raise InvalidAction.collect(problems)
        async with self._store.transaction() as tx:
            rec = await tx.ontology.put_type(object_type.name, object_type.properties, object_type.required)
        return _type(rec), rec.version

    async def get_type(self, name: str) -> ObjectType:
        async with self._store.transaction() as tx:
            return _type(await tx.ontology.get_type(name))

    async def list_types(self) -> list[tuple[ObjectType, int]]:
        """Every object type with its version, by name."""
        async with self._store.transaction() as tx:
            return [(_type(rec), rec.version) for rec in await tx.ontology.list_types()]

    # --- the replay ledger ------------------------------------------------------------------

    async def _once(
        self,
        key: str | None,
        change: Callable[[Transaction], Awaitable[tuple[_T, dict[str, Any]]]],
        replay: Callable[[dict[str, Any]], _T],
    ) -> _T:
        """Run ``change`` in one transaction, recording its outcome under ``key``; replay if recorded."""
        for _ in range(2):
            try:
                async with self._store.transaction() as tx:
                    recorded = await _recorded(tx, key)
                    if recorded is not None:
                        return replay(recorded)
                    outcome, details = await change(tx)
                    await _record(tx, key, details)
                    return outcome
            except _KeyTaken:
                continue  # the winner has committed: the next round replays its outcome
        raise Conflict("idempotency_key", key, "recorded concurrently but not readable; retry")

    # --- objects ----------------------------------------------------------------------------

    async def create_objects(
        self, objects: Sequence[NewObject], *, idempotency_key: str | None = None
    ) -> list[OntologyObject]:
        objects = list(objects)
        request = _request_hash(objects)

        async def change(tx: Transaction) -> tuple[list[OntologyObject], dict[str, Any]]:
            created = await self._insert_objects(tx, objects)
            return created, {"op": "create_objects", "request": request, "ids": [o.id for o in created]}

        def replay(recorded: dict[str, Any]) -> list[OntologyObject]:
            _same_request(recorded, request, idempotency_key)
            return [
                OntologyObject(id=object_id, object_type=new.object_type, properties=dict(new.properties))
                for object_id, new in zip(recorded["ids"], objects, strict=True)
            ]

        return await self._once(idempotency_key, change, replay)

    async def _insert_objects(self, tx: Transaction, objects: Sequence[NewObject]) -> list[OntologyObject]:
        types = {name: _type(await tx.ontology.get_type(name)) for name in {o.object_type for o in objects}}
        errors = _Validators(types).errors(objects)
        if errors:
            raise InvalidAction.collect(errors)
        recs = await tx.ontology.create_objects([
            records.NewOntologyObject(object_type=new.object_type, properties=dict(new.properties), id=object_id)
            for object_id, new in zip(self._ids.take(len(objects)), objects, strict=True)])
        created = [_object(rec) for rec in recs]
        await tx.outbox.append_many([self._object_event("created", after=o) for o in created])
        return created

    async def get_object(self, object_id: str, *, include_deleted: bool = False) -> OntologyObject:
        async with self._store.transaction() as tx:
            return _object(await tx.ontology.get_object(object_id, include_deleted=include_deleted))

    async def update_object(
        self,
        object_id: str,
        properties: Mapping[str, Any],
        *,
        expected_version: int | None,
        merge: bool = True,
        idempotency_key: str | None = None,
    ) -> ObjectChange:
        async def change(tx: Transaction) -> tuple[ObjectChange, dict[str, Any]]:
            done = await self._update(tx, object_id, properties, expected_version, merge)
            return done, {
                "op": "update_object",
                "before": done.before.as_dict(),
                "after": done.after.as_dict(),
            }

        def replay(recorded: dict[str, Any]) -> ObjectChange:
            return ObjectChange(
                before=OntologyObject.from_dict(recorded["before"]),
                after=OntologyObject.from_dict(recorded["after"]),
            )

        for _ in range(_MERGE_ATTEMPTS - 1):
            with contextlib.suppress(_LostRace):
                return await self._once(idempotency_key, change, replay)
        try:
            return await self._once(idempotency_key, change, replay)
        except _LostRace:
            raise Conflict("object", object_id, "changed concurrently on every attempt; retry") from None

    async def _update(
        self,
        tx: Transaction,
        object_id: str,
        properties: Mapping[str, Any],
        expected: int | None,
        merge: bool,
    ) -> ObjectChange:
        before = _object(await tx.ontology.get_object(object_id))
        _check_version(before, expected)
        merged = {**before.properties, **properties} if merge else dict(properties)
        errors = _type(await tx.ontology.get_type(before.object_type)).errors(merged)
        if errors:
            raise InvalidAction.collect(errors)
        try:
            # compare-and-set on the version read above, so a merge never loses a concurrent write
            after = _object(
                await tx.ontology.update_object(object_id, merged, expected_version=before.version)
            )
        except Conflict:
            if expected is not None:
                raise
            raise _LostRace from None
        await tx.outbox.append(self._object_event("updated", before=before, after=after))
        return ObjectChange(before=before, after=after)

    async def delete_object(
        self,
        object_id: str,
        *,
        soft: bool,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> OntologyObject:
        async def change(tx: Transaction) -> tuple[OntologyObject, dict[str, Any]]:
            before = await self._delete(tx, object_id, soft, expected_version)
            return before, {"op": "delete_object", "before": before.as_dict()}

        return await self._once(idempotency_key, change, lambda r: OntologyObject.from_dict(r["before"]))

    async def _delete(
        self, tx: Transaction, object_id: str, soft: bool, expected: int | None
    ) -> OntologyObject:
        before = _object(await tx.ontology.get_object(object_id))
        _check_version(before, expected)
        if not soft:
            await _refuse_if_related(tx, object_id)
        await tx.ontology.delete_object(object_id, soft=soft, expected_version=before.version)
        after = replace(before, deleted=True, version=before.version + 1) if soft else None
        await tx.outbox.append(self._object_event("deleted", before=before, after=after, hard=not soft))
        return before

    async def restore_object(
        self, snapshot: OntologyObject, *, expected_version: int | None = None
    ) -> OntologyObject:
        async with self._store.transaction() as tx:
            current = await _maybe_object(tx, snapshot.id)
            if current is not None:
                _check_version(_object(current), expected_version)
            rec = await tx.ontology.restore_object(await _restorable(tx, snapshot, current))
            restored = _object(rec)
            change = "created" if current is None else "updated"
            before = _object(current) if current is not None else None
            await tx.outbox.append(self._object_event(change, before=before, after=restored))
        return restored

    # --- relations --------------------------------------------------------------------------

    async def create_relation(
        self,
        relation_type: str,
        source: str,
        target: str,
        properties: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Relation:
        async def change(tx: Transaction) -> tuple[Relation, dict[str, Any]]:
            relation = await self._link(tx, relation_type, source, target, dict(properties or {}), None)
            return relation, {"op": "create_relation", "relation": relation.as_dict()}

        return await self._once(idempotency_key, change, lambda r: Relation.from_dict(r["relation"]))

    async def _link(
        self,
        tx: Transaction,
        kind: str,
        source: str,
        target: str,
        properties: dict[str, Any],
        relation_id: str | None,
    ) -> Relation:
        await tx.ontology.get_object(
            source
        )  # NotFound unless live (the foreign key accepts soft-deleted ones)
        await tx.ontology.get_object(target)
        rec = await tx.ontology.create_relation(kind, source, target, properties, relation_id=relation_id)
        relation = _relation(rec)
        await tx.outbox.append(self._relation_event("created", relation))
        return relation

    async def get_relation(self, relation_id: str) -> Relation:
        async with self._store.transaction() as tx:
            return _relation(await tx.ontology.get_relation(relation_id))

    async def delete_relation(self, relation_id: str, *, idempotency_key: str | None = None) -> Relation:
        async def change(tx: Transaction) -> tuple[Relation, dict[str, Any]]:
            relation = _relation(await tx.ontology.delete_relation(relation_id))
            await tx.outbox.append(self._relation_event("deleted", relation))
            return relation, {"op": "delete_relation", "relation": relation.as_dict()}

        return await self._once(idempotency_key, change, lambda r: Relation.from_dict(r["relation"]))

    async def restore_relation(self, snapshot: Relation) -> Relation:
        async with self._store.transaction() as tx:
            if await _maybe_relation(tx, snapshot.id) is not None:
                raise Conflict("relation", snapshot.id, "a relation with this id exists")
            return await self._link(
                tx,
                snapshot.relation_type,
                snapshot.source,
                snapshot.target,
                dict(snapshot.properties),
                snapshot.id,
            )

    # --- queries ----------------------------------------------------------------------------

    async def list_objects(
        self, object_type: str | None = None, *, include_deleted: bool = False, limit: int = 100
    ) -> list[OntologyObject]:
        async with self._store.transaction() as tx:
            names = (
                [object_type] if object_type is not None else [t.name for t in await tx.ontology.list_types()]
            )
            found = [
                rec
                for name in names
                for rec in await tx.ontology.list_objects(name, include_deleted=include_deleted, limit=limit)
            ]
        found.sort(key=lambda rec: (rec.created_at, rec.id))
        return [_object(rec) for rec in found[:limit]]

    async def list_relations(
        self, *, source: str | None = None, target: str | None = None, limit: int = 100
    ) -> list[Relation]:
        """Relations from ``source`` and/or to ``target``.

        :raises NotAvailable: neither is given (the storage port can only list an object's relations)
        """
        anchor = source if source is not None else target
        if anchor is None:
            raise NotAvailable("listing every relation", "give source or target")
        async with self._store.transaction() as tx:
            found = await tx.ontology.relations_of(anchor)
        matching = [
            _relation(r)
            for r in found
            if (source is None or r.source == source) and (target is None or r.target == target)
        ]
        return matching[:limit]

    # --- CDC ----------------------------------------------------------------------------------

    def _object_event(
        self,
        change: str,
        *,
        before: OntologyObject | None = None,
        after: OntologyObject | None = None,
        hard: bool = False,
    ) -> NewOutboxMessage:
        subject = after if after is not None else before
        assert subject is not None
        message = OntologyChanged(
            entity="object",
            change=change,
            id=subject.id,
            type_name=subject.object_type,
            version=after.version if after is not None else None,
            hard=hard,
            before=_snapshot(before) if before is not None else None,
            after=_snapshot(after) if after is not None else None,
        )
        return self._events.row(self._events.topology.cdc, message.routing_key, message)

    def _relation_event(self, change: str, relation: Relation) -> NewOutboxMessage:
        message = OntologyChanged(
            entity="relation",
            change=change,
            id=relation.id,
            type_name=relation.relation_type,
            hard=change == "deleted",
            before=relation.as_dict() if change == "deleted" else None,
            after=relation.as_dict() if change == "created" else None,
        )
        return self._events.row(self._events.topology.cdc, message.routing_key, message)


class _LostRace(Exception):
    """An update without ``expected_version`` lost its compare-and-set to a concurrent write."""


def _check_version(current: OntologyObject, expected: int | None) -> None:
    if expected is not None and current.version != expected:
        raise Conflict("object", current.id, f"version is {current.version}, not {expected}")


async def _refuse_if_related(tx: Transaction, object_id: str) -> None:
    count = len(await tx.ontology.relations_of(object_id))
    if count:
        raise Conflict("object", object_id, f"it has {count} relation(s); delete them first or delete softly")


async def _maybe_object(tx: Transaction, object_id: str) -> records.ObjectRecord | None:
    try:
        return await tx.ontology.get_object(object_id, include_deleted=True)
    except NotFound:
        return None


async def _maybe_relation(tx: Transaction, relation_id: str) -> records.RelationRecord | None:
    try:
        return await tx.ontology.get_relation(relation_id)
    except NotFound:
        return None


async def _restorable(
    tx: Transaction, snapshot: OntologyObject, current: records.ObjectRecord | None
) -> records.ObjectRecord:
    """The storage record that makes the object look like ``snapshot`` (version: current + 1)."""
    now = await tx.now()
    return records.ObjectRecord(
        id=snapshot.id,
        object_type=snapshot.object_type,
        properties=dict(snapshot.properties),
        version=(current.version if current is not None else snapshot.version) + 1,
        deleted=snapshot.deleted,
        created_by=current.created_by if current is not None else None,
        created_at=current.created_at if current is not None else now,
        updated_at=now,
    )


def _same_request(recorded: Mapping[str, Any], request: str, key: str | None) -> None:
    if recorded.get("request") != request:
        raise Conflict("idempotency_key", key, "was first used for a different set of objects")


async def _recorded(tx: Transaction, key: str | None) -> dict[str, Any] | None:
    """The outcome recorded under ``key``, or None."""
    return None if key is None else await tx.idempotency.get(ledger_key(key))


async def _record(tx: Transaction, key: str | None, details: dict[str, Any]) -> None:
    """Record the outcome for ``key``.

    :raises _KeyTaken: another transaction recorded ``key`` first
    """
    if key is not None and not await tx.idempotency.put(ledger_key(key), details):
        raise _KeyTaken(key)
