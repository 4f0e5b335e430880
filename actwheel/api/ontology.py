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
The ontology is shared by the installation (``ontology:*`` scopes); secrets belong to the caller's owner.
"""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import Response

from actwheel.actions.ontology_port import ObjectType
from actwheel.actions.secrets import MASK
from actwheel.api.body import read_object
from actwheel.api.errors import json_response
from actwheel.api.guard import Handler, caller_of
from actwheel.api.params import flag_param, limit_param
from actwheel.errors import InvalidInput
from actwheel.service import ControlPlane

__all__ = ["ontology_routes"]

_TYPE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,99}$")


def ontology_routes(control: ControlPlane) -> list[tuple[str, str, Handler]]:
    """The routes above as ``(method, path, handler)``, over ``control``'s ontology and secrets use cases
    (``create_app`` guards them)."""
    api = _OntologyApi(control)
    return [
        ("POST", "/v1/ontology/types", api.define_type),
        ("GET", "/v1/ontology/types", api.list_types),
        ("GET", "/v1/ontology/objects", api.list_objects),
        ("GET", "/v1/ontology/objects/{id}", api.get_object),
        ("GET", "/v1/ontology/relations", api.list_relations),
        ("POST", "/v1/secrets", api.put_secret),
        ("GET", "/v1/secrets", api.list_secrets),
    ]


class _OntologyApi:
    def __init__(self, control: ControlPlane) -> None:
        self._ontology = control.ontology
        self._secrets = control.secrets

    # --- ontology ----------------------------------------------------------------------------

    async def define_type(self, request: Request) -> Response:
        defined, version = await self._ontology.define_type(caller_of(request), await read_object(request))
        return json_response({**_type_dict(defined), "version": version}, 201 if version == 1 else 200)

    async def list_types(self, request: Request) -> Response:
        types = await self._ontology.list_types(caller_of(request))
        return json_response({"items": [{**_type_dict(t), "version": v} for t, v in types]})

    async def list_objects(self, request: Request) -> Response:
        q = request.query_params
        found = await self._ontology.list_objects(
            caller_of(request), _type_name(q.get("type")), include_deleted=flag_param(q.get("include_deleted"),
                                                                                "include_deleted"),
            limit=limit_param(q.get("limit")))
        return json_response({"items": [o.as_dict() for o in found]})

    async def get_object(self, request: Request) -> Response:
        include_deleted = flag_param(request.query_params.get("include_deleted"), "include_deleted")
        found = await self._ontology.get_object(caller_of(request), request.path_params["id"],
                                                include_deleted=include_deleted)
        return json_response(found.as_dict())

    async def list_relations(self, request: Request) -> Response:
        q = request.query_params
        found = await self._ontology.list_relations(
            caller_of(request), source=q.get("source") or None, target=q.get("target") or None,
            limit=limit_param(q.get("limit")))
        return json_response({"items": [r.as_dict() for r in found]})

    # --- secrets -----------------------------------------------------------------------------

    async def put_secret(self, request: Request) -> Response:
        body = await read_object(request)
        stored, created = await self._secrets.put(caller_of(request), body.get("name"), body.get("value"),
                                                  replace=body.get("replace", False))
        return json_response(stored.as_dict(), 201 if created else 200)

    async def list_secrets(self, request: Request) -> Response:
        names = await self._secrets.names(caller_of(request))
        return json_response({"items": [{"name": n, "value": MASK} for n in names]})


def _type_dict(object_type: ObjectType) -> dict[str, object]:
    return {"name": object_type.name, "properties": object_type.properties, "required": list(object_type.required)}


def _type_name(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if not _TYPE_NAME.match(value):
        raise InvalidInput("type", value, "an object type name (a letter, then up to 99 of A-Z a-z 0-9 _ . -)")
    return value
