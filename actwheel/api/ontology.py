"""HTTP routes for the ontology and for secrets (mounted by ``create_app``).

Routes (exact)::

    POST /v1/ontology/types          define (or redefine) an object type     201 new, 200 redefined
    GET  /v1/ontology/types          every object type
    GET  /v1/ontology/objects?type=…[&include_deleted=true][&limit=…]
    GET  /v1/ontology/objects/{id}[?include_deleted=true]
    GET  /v1/ontology/relations?source=…[&target=…][&limit=…]
    POST /v1/secrets                 {"name", "value"[, "replace": true]} → name + mask, never the value
    GET  /v1/secrets                 names only

Bad input answers 422 naming the field and the value (a secret's value is never echoed).
Until authentication exists every request acts as the engine's local owner.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from actwheel.actions.ontology_port import ObjectType, OntologyGateway
from actwheel.actions.secrets import MASK, SecretCipher
from actwheel.actions.storage_ontology import StorageOntology
from actwheel.actions.storage_secrets import SecretStore, validate_secret_name
from actwheel.api.body import read_object
from actwheel.api.errors import json_response
from actwheel.errors import Conflict, InvalidInput, NotAvailable

__all__ = ["ontology_routes"]

_TYPE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,99}$")
_FLAGS = {"true": True, "1": True, "false": False, "0": False}


def ontology_routes(
    engine: Any, *, ontology: StorageOntology | None = None, secrets: SecretStore | None = None
) -> list[Route]:
    """The routes above for ``engine`` (an :class:`actwheel.engine.Engine`).

    :param ontology: default ``engine.ontology``, else a :class:`StorageOntology` over ``engine.store``
    :param secrets: default ``engine.secret_store``, else one keyed from the environment at first use
    """
    api = _OntologyApi(engine, ontology, secrets)
    return [
        Route("/v1/ontology/types", api.define_type, methods=["POST"]),
        Route("/v1/ontology/types", api.list_types, methods=["GET"]),
        Route("/v1/ontology/objects", api.list_objects, methods=["GET"]),
        Route("/v1/ontology/objects/{id}", api.get_object, methods=["GET"]),
        Route("/v1/ontology/relations", api.list_relations, methods=["GET"]),
        Route("/v1/secrets", api.put_secret, methods=["POST"]),
        Route("/v1/secrets", api.list_secrets, methods=["GET"]),
    ]


class _OntologyApi:
    def __init__(self, engine: Any, ontology: StorageOntology | None, secrets: SecretStore | None) -> None:
        self._engine = engine
        self._ontology = ontology or _engine_ontology(engine)
        self._secrets = secrets or getattr(engine, "secret_store", None)
        self._owner: str = engine.settings.local_owner

    # --- ontology ----------------------------------------------------------------------------

    async def define_type(self, request: Request) -> Response:
        spec = await read_object(request)
        defined, version = await self._ontology.define_type(ObjectType.from_spec(spec))
        return json_response({**_type_dict(defined), "version": version}, 201 if version == 1 else 200)

    async def list_types(self, request: Request) -> Response:
        types = await self._ontology.list_types()
        return json_response({"items": [{**_type_dict(t), "version": v} for t, v in types]})

    async def list_objects(self, request: Request) -> Response:
        q = request.query_params
        object_type = _type_name(q.get("type"))
        include_deleted = _flag(q.get("include_deleted"), "include_deleted")
        found = await self._ontology.list_objects(
            object_type, include_deleted=include_deleted, limit=_limit(q.get("limit"))
        )
        return json_response({"items": [o.as_dict() for o in found]})

    async def get_object(self, request: Request) -> Response:
        include_deleted = _flag(request.query_params.get("include_deleted"), "include_deleted")
        found = await self._ontology.get_object(request.path_params["id"], include_deleted=include_deleted)
        return json_response(found.as_dict())

    async def list_relations(self, request: Request) -> Response:
        q = request.query_params
        source, target = q.get("source") or None, q.get("target") or None
        if source is None and target is None:
            raise InvalidInput("source", None, "an object id (or target=<object id>)")
        found = await self._ontology.list_relations(
            source=source, target=target, limit=_limit(q.get("limit"))
        )
        return json_response({"items": [r.as_dict() for r in found]})

    # --- secrets -----------------------------------------------------------------------------

    async def put_secret(self, request: Request) -> Response:
        body = await read_object(request)
        name, value, replace = (
            validate_secret_name(body.get("name")),
            body.get("value"),
            body.get("replace", False),
        )
        if not isinstance(replace, bool):
            raise InvalidInput("replace", replace, "true or false")
        if not isinstance(value, str) or not value:
            raise InvalidInput(
                "value", MASK if isinstance(value, str) else type(value).__name__, "a non-empty string"
            )
        store = self._secret_store()
        try:
            return json_response((await store.put(self._owner, name, value)).as_dict(), 201)
        except Conflict:
            if not replace:
                raise
        return json_response((await store.rotate(self._owner, name, value)).as_dict(), 200)

    async def list_secrets(self, request: Request) -> Response:
        names = await self._secret_store_or_reader().names(self._owner)
        return json_response({"items": [{"name": n, "value": MASK} for n in names]})

    def _secret_store(self) -> SecretStore:
        """:raises NotAvailable: no secret key is configured on this server"""
        if self._secrets is None:
            try:
                self._secrets = SecretStore(self._engine.store, SecretCipher.from_env())
            except InvalidInput as exc:
                raise NotAvailable(
                    "storing secrets", f"the server has no secret key: {exc.expected}"
                ) from None
        return self._secrets

    def _secret_store_or_reader(self) -> SecretStore | _NameReader:
        return self._secrets if self._secrets is not None else _NameReader(self._engine.store)


class _NameReader:
    """Lists names without a key (names are not secret; values stay encrypted)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    async def names(self, owner_id: str) -> list[str]:
        async with self._store.transaction() as tx:
            names: list[str] = await tx.secrets.names(owner_id)
        return names


def _engine_ontology(engine: Any) -> StorageOntology:
    existing: OntologyGateway | None = getattr(engine, "ontology", None)
    if isinstance(existing, StorageOntology):
        return existing
    return StorageOntology(engine.store, engine.events)


def _type_dict(object_type: ObjectType) -> dict[str, Any]:
    return {
        "name": object_type.name,
        "properties": object_type.properties,
        "required": list(object_type.required),
    }


def _type_name(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if not _TYPE_NAME.match(value):
        raise InvalidInput(
            "type", value, "an object type name (a letter, then up to 99 of A-Z a-z 0-9 _ . -)"
        )
    return value


def _flag(value: str | None, name: str) -> bool:
    if value is None:
        return False
    if value.lower() not in _FLAGS:
        raise InvalidInput(name, value, "true or false")
    return _FLAGS[value.lower()]


def _limit(value: str | None) -> int:
    if value is None:
        return 100
    if not value.isdigit() or not 0 < int(value) <= 1000:
        raise InvalidInput("limit", value, "an integer from 1 to 1000")
    return int(value)
