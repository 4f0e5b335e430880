"""HTTP routes for identity: who am I, API keys and principals (mounted by ``create_app``).

Routes (exact)::

    GET    /v1/whoami                 {"principal_id", "kind", "key_id", "agent_id", "scopes", "auth"}
    POST   /v1/keys                   {"name", "scopes", "principal_id"?, "agent_id"?, "expires_in_s"?}
                                      → 201 {"id", "key", "principal_id", "scopes", "expires_at"}: the only
                                      time the key is shown
    GET    /v1/keys                   the caller's live keys, never the key or its hash
    DELETE /v1/keys/{id}              revoke
    POST   /v1/keys/{id}/rotate       {"grace_s"?} → 201 like POST /v1/keys; the old key works for the grace
    POST   /v1/principals             {"id", "kind", "scopes", "parent_id"?, "display_name"?, "on_behalf_of"?}
    GET    /v1/principals[?kind=…]
    POST   /v1/principals/{id}/ban    {"reason"}
    POST   /v1/principals/{id}/unban
    PUT    /v1/principals/{id}/scopes {"scopes"} → the principal with its new ceiling
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actwheel.api.body import read_object
from actwheel.api.errors import json_response
from actwheel.api.guard import INSECURE_HEADER, Handler, caller_of
from actwheel.api.params import enum_param, limit_param
from actwheel.service import ControlPlane, MintedKey
from actwheel.service.identity import describe_key, describe_principal
from actwheel.storage.records import PrincipalKind

__all__ = ["InsecureMarker", "identity_routes"]


def identity_routes(control: ControlPlane) -> list[tuple[str, str, Handler]]:
    api = _IdentityApi(control)
    return [
        ("GET", "/v1/whoami", api.whoami),
        ("POST", "/v1/keys", api.create_key),
        ("GET", "/v1/keys", api.list_keys),
        ("DELETE", "/v1/keys/{id}", api.revoke_key),
        ("POST", "/v1/keys/{id}/rotate", api.rotate_key),
        ("POST", "/v1/principals", api.create_principal),
        ("GET", "/v1/principals", api.list_principals),
        ("POST", "/v1/principals/{id}/ban", api.ban),
        ("POST", "/v1/principals/{id}/unban", api.unban),
        ("PUT", "/v1/principals/{id}/scopes", api.set_scopes),
    ]


class _IdentityApi:
    def __init__(self, control: ControlPlane) -> None:
        self._keys = control.keys
        self._principals = control.principals
        self._auth = "enabled" if control.settings.auth else "disabled"

    async def whoami(self, request: Request) -> Response:
        caller = caller_of(request)
        return json_response({"principal_id": caller.who, "kind": caller.kind, "key_id": caller.key_id,
                              "agent_id": caller.agent_id, "owner_id": caller.owner_id,
                              "scopes": caller.grant.to_list(), "auth": self._auth})

    async def create_key(self, request: Request) -> Response:
        minted = await self._keys.create(caller_of(request), await read_object(request))
        return json_response(_shown_once(minted), 201)

    async def list_keys(self, request: Request) -> Response:
        keys = await self._keys.list(caller_of(request), principal_id=request.query_params.get("principal_id"))
        return json_response({"items": [describe_key(k) for k in keys]})

    async def revoke_key(self, request: Request) -> Response:
        return json_response(describe_key(await self._keys.revoke(caller_of(request), request.path_params["id"])))

    async def rotate_key(self, request: Request) -> Response:
        minted = await self._keys.rotate(caller_of(request), request.path_params["id"], await read_object(request))
        return json_response(_shown_once(minted), 201)

    async def create_principal(self, request: Request) -> Response:
        created = await self._principals.create(caller_of(request), await read_object(request))
        return json_response(describe_principal(created), 201)

    async def list_principals(self, request: Request) -> Response:
        q = request.query_params
        found = await self._principals.list(caller_of(request), kind=enum_param(PrincipalKind, q.get("kind"), "kind"),
                                            after_id=q.get("after_id"), limit=limit_param(q.get("limit")))
        return json_response({"items": [describe_principal(p) for p in found]})

    async def ban(self, request: Request) -> Response:
        body = await read_object(request)
        banned = await self._principals.ban(caller_of(request), request.path_params["id"], body.get("reason"))
        return json_response(describe_principal(banned))

    async def unban(self, request: Request) -> Response:
        return json_response(describe_principal(await self._principals.unban(caller_of(request),
                                                                             request.path_params["id"])))


    async def set_scopes(self, request: Request) -> Response:
        body = await read_object(request)
        changed = await self._principals.set_scopes(caller_of(request), request.path_params["id"], body.get("scopes"))
        return json_response(describe_principal(changed))


def _shown_once(minted: MintedKey) -> dict[str, object]:
    return {**describe_key(minted.key), "key": minted.token}


class InsecureMarker:
    """Marks every response while authentication is switched off (``--insecure-no-auth``)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", []).append((INSECURE_HEADER.lower().encode(), b"disabled"))
            await send(message)

        await self._app(scope, receive, marked if scope["type"] == "http" else send)
