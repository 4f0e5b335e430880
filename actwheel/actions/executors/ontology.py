"""The five ontology executors: create/update/delete object, create/delete relation.

They talk to ``ctx.ontology`` (an :class:`~actwheel.actions.ontology_port.OntologyGateway`).
Store outcomes become results: a stale ``expected_version`` is a ``conflict``
failure, a missing object ``not_found``, a schema violation ``invalid`` with
every field listed in ``data.errors``. Every mutation passes an idempotency key
(``<run key>|<natural key>``) so a retry after a crash changes nothing twice.
Compensations are idempotent: undoing something already undone succeeds.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

import orjson

from actwheel.actions.base import ActionContext, ActionDefinition, ActionResult, Capabilities, Idempotency
from actwheel.actions.ontology_port import NewObject, OntologyGateway, OntologyObject, Relation
from actwheel.errors import Conflict, FieldError, InvalidAction, InvalidInput, NotFound, StorageUnavailable

__all__ = [
    "CreateObject",
    "CreateRelation",
    "DeleteObject",
    "DeleteRelation",
    "UpdateObject",
    "definitions",
    "properties_hash",
]

SCOPE = "ontology:write"
_ID = {"type": "string", "minLength": 1, "maxLength": 200}
_PROPS = {"type": "object"}
_NEW_OBJECT = {
    "type": "object",
    "required": ["object_type", "properties"],
    "additionalProperties": False,
    "properties": {"object_type": {"type": "string", "minLength": 1}, "properties": _PROPS},
}


def properties_hash(value: Any) -> str:
    """A stable hash of a JSON value (keys sorted), for natural idempotency keys."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def _store_key(ctx: ActionContext, natural: str | None) -> str:
    return f"{ctx.idempotency_key}|{natural}"


Step = Callable[[OntologyGateway], Awaitable[ActionResult]]


def _invalid(exc: InvalidInput) -> ActionResult:
    return ActionResult.fail(
        f"invalid: {exc}", retryable=False, code="invalid", data={"errors": [e.as_dict() for e in exc.errors]}
    )


async def _against_store(ctx: ActionContext, step: Step) -> ActionResult:
    """Run ``step`` on the context's gateway; map store errors to failed results."""
    gateway: OntologyGateway | None = ctx.ontology
    if gateway is None:
        return ActionResult.fail("no ontology store is configured on this host", retryable=False, code="not_available")
    try:
        return await step(gateway)
    except Conflict as exc:
        return ActionResult.fail(
            str(exc),
            retryable=False,
            code="conflict",
            data={"record": exc.record, "key": exc.key, "detail": exc.detail},
        )
    except NotFound as exc:
        return ActionResult.fail(
            str(exc), retryable=False, code="not_found", data={"record": exc.record, "key": exc.key}
        )
    except InvalidAction as exc:
        return _invalid(exc)
    except StorageUnavailable as exc:
        return ActionResult.fail(f"ontology store unavailable: {exc}", retryable=True, code="unavailable")


class _OntologyAction(ActionDefinition):
    idempotency = Idempotency.STRONG
    required_scopes = frozenset({SCOPE})
    capabilities = Capabilities(compensable=True, dry_run=True, timeout_control=True, parallel_safe=True)


class CreateObject(_OntologyAction):
    type = "ontology.create_object"
    aliases = ("CreateObject",)
    display_name = "Create object"
    description = (
        "Create one ontology object of an existing object type, validated against that type's JSON "
        "schema and required fields; or many at once with `objects: [{object_type, properties}]` in "
        "one transaction (all or none). Result: object_id (or object_ids). Compensation deletes what "
        "was created."
    )
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "object_type": {"type": "string", "minLength": 1},
            "properties": _PROPS,
            "objects": {"type": "array", "minItems": 1, "maxItems": 100_000, "items": _NEW_OBJECT},
        },
    }

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        if "objects" in config:
            extra = [k for k in ("object_type", "properties") if k in config]
            return [FieldError(k, config[k], "nothing beside `objects` (batch)") for k in extra]
        missing = [k for k in ("object_type", "properties") if k not in config]
        return [FieldError(k, None, "a value (or `objects` for a batch)") for k in missing]

    @staticmethod
    def _new_objects(config: Mapping[str, Any]) -> list[NewObject]:
        items = config.get("objects") or [config]
        return [NewObject(object_type=i["object_type"], properties=dict(i["properties"])) for i in items]

    def idempotency_key(self, config: Mapping[str, Any]) -> str:
        items = [[o.object_type, o.properties] for o in self._new_objects(config)]
        return f"{self.type}:{properties_hash(items)}"

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        async def create(gateway: OntologyGateway) -> ActionResult:
            news, key = self._new_objects(config), _store_key(ctx, self.idempotency_key(config))
            if "objects" in config:
                return self._created(config, await gateway.create_objects(news, idempotency_key=key))
            one = await gateway.create_object(news[0].object_type, news[0].properties, idempotency_key=key)
            return self._created(config, [one])

        return await _against_store(ctx, create)

    @staticmethod
    def _created(config: Mapping[str, Any], created: list[OntologyObject]) -> ActionResult:
        versions = {o.id: o.version for o in created}
        if "objects" in config:
            return ActionResult.ok(
                f"created {len(created)} objects",
                {"object_ids": list(versions), "count": len(created), "versions": versions},
            )
        obj = created[0]
        return ActionResult.ok(
            f"created {obj.object_type} {obj.id}",
            {
                "object_id": obj.id,
                "object_type": obj.object_type,
                "version": obj.version,
                "object": obj.as_dict(),
                "versions": versions,
            },
        )

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        async def delete_created(gateway: OntologyGateway) -> ActionResult:
            versions: dict[str, int] = result.data.get("versions", {})
            for object_id in reversed(list(versions)):
                await _delete_if_present(gateway, object_id, versions[object_id])
            return ActionResult.ok(f"deleted {len(versions)} created object(s)", {"deleted": list(versions)})

        return await _against_store(ctx, delete_created)

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        async def check(gateway: OntologyGateway) -> ActionResult:
            errors: list[FieldError] = []
            news = self._new_objects(config)
            for index, new in enumerate(news):
                prefix = f"objects[{index}].properties" if "objects" in config else "properties"
                errors += (await gateway.get_type(new.object_type)).errors(new.properties, prefix)
            if errors:
                return _invalid(InvalidAction.collect(errors))
            kinds = sorted({n.object_type for n in news})
            return ActionResult.ok(
                f"would create {len(news)} object(s) of {', '.join(kinds)}",
                {
                    "would_create": [{"object_type": n.object_type, "properties": n.properties} for n in news[:20]],
                    "count": len(news),
                },
            )

        return await _against_store(ctx, check)


async def _delete_if_present(gateway: OntologyGateway, object_id: str, version: int) -> None:
    try:
        await gateway.delete_object(object_id, soft=False, expected_version=version)
    except NotFound:
        return  # already gone: the compensation's goal holds


class UpdateObject(_OntologyAction):
    type = "ontology.update_object"
    aliases = ("UpdateObject",)
    display_name = "Update object"
    description = (
        "Change properties of an existing object. `merge: true` (default) merges into the current "
        "properties, false replaces them. Give `expected_version` (from a previous read) for optimistic "
        "locking: if the object changed since, the result is a `conflict` failure naming both versions. "
        "Compensation restores the previous snapshot unless the object changed again."
    )
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["object_id", "properties"],
        "additionalProperties": False,
        "properties": {
            "object_id": _ID,
            "properties": _PROPS,
            "expected_version": {"type": "integer", "minimum": 1},
            "merge": {"type": "boolean"},
        },
    }

    def idempotency_key(self, config: Mapping[str, Any]) -> str:
        return f"{self.type}:{config['object_id']}:{config.get('expected_version', 'any')}"

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        async def update(gateway: OntologyGateway) -> ActionResult:
            try:
                change = await gateway.update_object(
                    config["object_id"],
                    config["properties"],
                    expected_version=config.get("expected_version"),
                    merge=config.get("merge", True),
                    idempotency_key=_store_key(ctx, self.idempotency_key(config)),
                )
            except Conflict as exc:
                return await _stale(gateway, config, exc)
            return ActionResult.ok(
                f"updated {change.after.object_type} {change.after.id} to version {change.after.version}",
                {
                    "object_id": change.after.id,
                    "version": change.after.version,
                    "before": change.before.as_dict(),
                    "after": change.after.as_dict(),
                },
            )

        return await _against_store(ctx, update)

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        async def restore(gateway: OntologyGateway) -> ActionResult:
            before = OntologyObject.from_dict(result.data["before"])
            restored = await gateway.restore_object(before, expected_version=result.data["version"])
            return ActionResult.ok(
                f"restored {before.id} to its properties of version {before.version}",
                {"object_id": before.id, "version": restored.version},
            )

        return await _against_store(ctx, restore)

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        async def check(gateway: OntologyGateway) -> ActionResult:
            current = await gateway.get_object(config["object_id"])
            expected = config.get("expected_version")
            if expected is not None and expected != current.version:
                return _conflict(config["object_id"], expected, current.version)
            merged = (
                {**current.properties, **config["properties"]} if config.get("merge", True) else config["properties"]
            )
            errors = (await gateway.get_type(current.object_type)).errors(merged)
            if errors:
                return _invalid(InvalidAction.collect(errors))
            return ActionResult.ok(
                f"would update {current.id} from version {current.version}",
                {"object_id": current.id, "before": current.properties, "after": merged},
            )

        return await _against_store(ctx, check)


def _conflict(object_id: str, expected: Any, current: Any) -> ActionResult:
    return ActionResult.fail(
        f"conflict: object {object_id} is at version {current}, not the expected version {expected}; "
        "read it again and retry with the current version",
        retryable=False,
        code="conflict",
        data={"object_id": object_id, "expected_version": expected, "current_version": current},
    )


async def _stale(gateway: OntologyGateway, config: Mapping[str, Any], exc: Conflict) -> ActionResult:
    try:
        current: Any = (await gateway.get_object(config["object_id"])).version
    except NotFound:
        current = None
    return _conflict(config["object_id"], config.get("expected_version"), current)


class DeleteObject(_OntologyAction):
    type = "ontology.delete_object"
    aliases = ("DeleteObject",)
    display_name = "Delete object"
    description = (
        "Delete an object: `mode: soft` (default) marks it deleted and keeps it restorable; `hard` removes "
        "it and is refused while relations still point at it. Optional `expected_version`. Compensation "
        "re-creates it from the snapshot taken before the delete."
    )
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["object_id"],
        "additionalProperties": False,
        "properties": {
            "object_id": _ID,
            "mode": {"enum": ["soft", "hard"]},
            "expected_version": {"type": "integer", "minimum": 1},
        },
    }

    def idempotency_key(self, config: Mapping[str, Any]) -> str:
        return f"{self.type}:{config['object_id']}"

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        mode = config.get("mode", "soft")

        async def delete(gateway: OntologyGateway) -> ActionResult:
            try:
                before = await gateway.delete_object(
                    config["object_id"],
                    soft=mode == "soft",
                    expected_version=config.get("expected_version"),
                    idempotency_key=_store_key(ctx, self.idempotency_key(config)),
                )
            except Conflict as exc:
                if config.get("expected_version") is None:
                    raise
                return await _stale(gateway, config, exc)
            return ActionResult.ok(
                f"deleted ({mode}) {before.object_type} {before.id}",
                {"object_id": before.id, "mode": mode, "snapshot": before.as_dict()},
            )

        return await _against_store(ctx, delete)

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        async def recreate(gateway: OntologyGateway) -> ActionResult:
            snapshot = OntologyObject.from_dict(result.data["snapshot"])
            marker = snapshot.version + 1 if result.data["mode"] == "soft" else None
            restored = await gateway.restore_object(snapshot, expected_version=marker)
            return ActionResult.ok(f"restored {snapshot.id}", {"object_id": snapshot.id, "version": restored.version})

        return await _against_store(ctx, recreate)

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        mode = config.get("mode", "soft")

        async def check(gateway: OntologyGateway) -> ActionResult:
            current = await gateway.get_object(config["object_id"])
            expected = config.get("expected_version")
            if expected is not None and expected != current.version:
                return _conflict(current.id, expected, current.version)
            related = await gateway.list_relations(source=current.id, limit=1) + await gateway.list_relations(
                target=current.id, limit=1
            )
            if mode == "hard" and related:
                return ActionResult.fail(
                    f"a hard delete of {current.id} would be refused: it has relations",
                    retryable=False,
                    code="conflict",
                )
            return ActionResult.ok(
                f"would delete ({mode}) {current.object_type} {current.id}",
                {"object_id": current.id, "mode": mode, "snapshot": current.as_dict()},
            )

        return await _against_store(ctx, check)


class CreateRelation(_OntologyAction):
    type = "ontology.create_relation"
    aliases = ("CreateRelation",)
    display_name = "Create relation"
    description = (
        "Link two live objects with a typed, directed relation (`relation_type` is a free-form name such "
        "as 'pairs' or 'owns'; `source` and `target` are object ids, often "
        "`${steps.<name>.result.object_id}` in a composite). Compensation deletes the relation."
    )
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["relation_type", "source", "target"],
        "additionalProperties": False,
        "properties": {
            "relation_type": {"type": "string", "minLength": 1, "maxLength": 200},
            "source": _ID,
            "target": _ID,
            "properties": _PROPS,
        },
    }

    def idempotency_key(self, config: Mapping[str, Any]) -> str:
        spec = [config["relation_type"], config["source"], config["target"], config.get("properties", {})]
        return f"{self.type}:{properties_hash(spec)}"

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        async def link(gateway: OntologyGateway) -> ActionResult:
            relation = await gateway.create_relation(
                config["relation_type"],
                config["source"],
                config["target"],
                config.get("properties"),
                idempotency_key=_store_key(ctx, self.idempotency_key(config)),
            )
            return ActionResult.ok(
                f"related {relation.source} -{relation.relation_type}-> {relation.target}",
                {"relation_id": relation.id, "relation": relation.as_dict()},
            )

        return await _against_store(ctx, link)

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        async def unlink(gateway: OntologyGateway) -> ActionResult:
            relation_id = result.data["relation_id"]
            with contextlib.suppress(NotFound):  # already gone: the compensation's goal holds
                await gateway.delete_relation(relation_id)
            return ActionResult.ok(f"deleted relation {relation_id}", {"relation_id": relation_id})

        return await _against_store(ctx, unlink)

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        async def check(gateway: OntologyGateway) -> ActionResult:
            await gateway.get_object(config["source"])
            await gateway.get_object(config["target"])
            return ActionResult.ok(
                f"would relate {config['source']} -{config['relation_type']}-> {config['target']}",
                {
                    "relation_type": config["relation_type"],
                    "source": config["source"],
                    "target": config["target"],
                },
            )

        return await _against_store(ctx, check)


class DeleteRelation(_OntologyAction):
    type = "ontology.delete_relation"
    aliases = ("DeleteRelation",)
    display_name = "Delete relation"
    description = (
        "Remove a relation by `relation_id`. Compensation re-creates it with the same id from the "
        "snapshot taken before the delete."
    )
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["relation_id"],
        "additionalProperties": False,
        "properties": {"relation_id": _ID},
    }

    def idempotency_key(self, config: Mapping[str, Any]) -> str:
        return f"{self.type}:{config['relation_id']}"

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        async def unlink(gateway: OntologyGateway) -> ActionResult:
            relation = await gateway.delete_relation(
                config["relation_id"], idempotency_key=_store_key(ctx, self.idempotency_key(config))
            )
            return ActionResult.ok(
                f"deleted relation {relation.id}",
                {"relation_id": relation.id, "snapshot": relation.as_dict()},
            )

        return await _against_store(ctx, unlink)

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        async def relink(gateway: OntologyGateway) -> ActionResult:
            snapshot = Relation.from_dict(result.data["snapshot"])
            with contextlib.suppress(Conflict):  # it exists again: the compensation's goal holds
                await gateway.restore_relation(snapshot)
            return ActionResult.ok(f"re-created relation {snapshot.id}", {"relation_id": snapshot.id})

        return await _against_store(ctx, relink)

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        async def check(gateway: OntologyGateway) -> ActionResult:
            relation = await gateway.get_relation(config["relation_id"])
            return ActionResult.ok(f"would delete relation {relation.id}", {"snapshot": relation.as_dict()})

        return await _against_store(ctx, check)


def definitions() -> list[ActionDefinition]:
    """The five ontology definitions, for :func:`~actwheel.actions.defaults.default_registry`."""
    return [CreateObject(), UpdateObject(), DeleteObject(), CreateRelation(), DeleteRelation()]
