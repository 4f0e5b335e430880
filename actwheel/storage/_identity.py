"""Who may act: principals, their API keys and the security events about them, over SQL.

:class:`~actwheel.storage.base.PrincipalRepository`,
:class:`~actwheel.storage.base.ApiKeyRepository` and
:class:`~actwheel.storage.base.SecurityEventRepository`. A security event never holds a key,
a hash or a secret: its detail is checked before it is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from actwheel.errors import Conflict, IntegrityViolation, InvalidInput, NotFound
from actwheel.storage import _codec as codec
from actwheel.storage._codec import JsonText
from actwheel.storage._rows import api_key_of, principal_of, security_event_of
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import ApiKeyRepository, PrincipalRepository, SecurityEventRepository
from actwheel.storage.records import (
    ApiKey,
    NewApiKey,
    NewPrincipal,
    NewSecurityEvent,
    Principal,
    PrincipalKind,
    PrincipalStatus,
    SecurityEvent,
)

__all__ = ["SqlApiKeys", "SqlPrincipals", "SqlSecurityEvents"]


def _names(field: str, value: Any) -> JsonText:
    """A list of scope names (or owner ids) as a JSON array; one string is refused, not split."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidInput(field, value, "a sequence of names, not one string")
    return codec.json_field(field, [codec.text_field(f"{field}[{i}]", v) for i, v in enumerate(value)])


def _display_name(value: Any) -> str:
    if not isinstance(value, str) or len(value) > codec.MAX_TEXT:
        raise InvalidInput("display_name", value, f"a string of at most {codec.MAX_TEXT} characters")
    return value


def _parent_of(kind: PrincipalKind, parent_id: Any) -> str | None:
    """An agent acts for exactly one user; a user or a service for itself (the CHECK again, named)."""
    if kind is PrincipalKind.AGENT:
        return codec.text_field("parent_id", parent_id)
    if parent_id is not None:
        raise InvalidInput("parent_id", parent_id, f"None (a {kind.value} has no parent; only an agent has one)")
    return None


def _principal_params(new: NewPrincipal) -> dict[str, Any]:
    kind = codec.enum_value("kind", PrincipalKind, new.kind)
    return {
        "id": codec.text_field("id", new.id),
        "kind": kind.value,
        "parent_id": _parent_of(kind, new.parent_id),
        "display_name": _display_name(new.display_name),
        "scopes": _names("scopes", new.scopes),
        "on_behalf_of": _names("on_behalf_of", new.on_behalf_of),
    }


def _by(value: Any) -> str:
    return codec.text_field("by", value)


class SqlPrincipals(PrincipalRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def create(self, new: NewPrincipal) -> Principal:
        params = _principal_params(new)
        try:
            row = await self._sql.guarded_row("insert_principal", params)
        except IntegrityViolation as exc:
            if exc.kind == "unique":
                raise Conflict("principal", params["id"], "already exists") from None
            raise
        if row is None:
            raise await self._refused_parent(params["parent_id"])
        return principal_of(row)

    async def create_if_absent(self, new: NewPrincipal) -> tuple[Principal, bool]:
        params = _principal_params(new)
        row = await self._sql.fetchrow("insert_principal_if_absent", params)
        if row is not None:
            return principal_of(row), True
        existing = await self._sql.fetchrow("get_principal", {"id": params["id"]})
        if existing is not None:
            return principal_of(existing), False
        raise await self._refused_parent(params["parent_id"])

    async def _refused_parent(self, parent_id: str | None) -> Exception:
        """Why the insert's parent condition held back the row: no such parent, or not a user."""
        parent = None if parent_id is None else await self._sql.fetchrow("get_principal", {"id": parent_id})
        if parent is None:
            return NotFound("principal", parent_id)
        return InvalidInput("parent_id", parent_id, f"a user (an agent acts for a user; this is a {parent['kind']})")

    async def get(self, principal_id: str) -> Principal:
        row = await self._sql.fetchrow("get_principal", {"id": principal_id})
        if row is None:
            raise NotFound("principal", principal_id)
        return principal_of(row)

    async def get_many(self, principal_ids: Sequence[str]) -> dict[str, Principal]:
        ids = list(dict.fromkeys(codec.ids("principal_ids", principal_ids)))
        if not ids:
            return {}
        return {r["id"]: principal_of(r) for r in await self._sql.fetch("get_principals", {"ids": ids})}

    async def set_status(
        self, principal_id: str, status: PrincipalStatus, *, expected_version: int | None = None
    ) -> Principal:
        params = {
            "id": principal_id,
            "status": codec.enum_value("status", PrincipalStatus, status).value,
            "expected_version": codec.version("expected_version", expected_version, optional=True),
        }
        row = await self._sql.fetchrow("set_principal_status", params)
        if row is None:
            current = await self.get(principal_id)
            raise Conflict("principal", principal_id, f"version is {current.version}, not {expected_version}")
        return principal_of(row)

    async def ban(self, principal_id: str, *, reason: str, by: str) -> Principal:
        params = {"id": principal_id, "reason": codec.text_field("reason", reason, max_len=4000), "by": _by(by)}
        return await self._changed(principal_id, "ban_principal", params)

    async def unban(self, principal_id: str, *, by: str) -> Principal:
        _by(by)  # who lifted it is the caller's security event; checked here all the same
        return await self._changed(principal_id, "unban_principal", {"id": principal_id})

    async def set_scopes(self, principal_id: str, scopes: Sequence[str]) -> Principal:
        params = {"id": principal_id, "scopes": _names("scopes", scopes)}
        return await self._changed(principal_id, "set_principal_scopes", params)

    async def _changed(self, principal_id: str, query: str, params: Mapping[str, Any]) -> Principal:
        row = await self._sql.fetchrow(query, params)
        if row is None:
            raise NotFound("principal", principal_id)
        return principal_of(row)

    async def query(
        self,
        *,
        kind: PrincipalKind | None = None,
        status: PrincipalStatus | None = None,
        parent_id: str | None = None,
        after_id: str | None = None,
        limit: int = 100,
    ) -> list[Principal]:
        params = {
            "kind": None if kind is None else codec.enum_value("kind", PrincipalKind, kind).value,
            "status": None if status is None else codec.enum_value("status", PrincipalStatus, status).value,
            "parent_id": parent_id,
            "after_id": after_id,
            "limit": codec.limit(limit),
        }
        return [principal_of(r) for r in await self._sql.fetch("query_principals", params)]

    async def count(self, *, kind: PrincipalKind | None = None) -> int:
        params = {"kind": None if kind is None else codec.enum_value("kind", PrincipalKind, kind).value}
        row = await self._sql.fetchrow("count_principals", params)
        return int(row["n"]) if row is not None else 0



def _api_key_params(new: NewApiKey) -> dict[str, Any]:
    return {
        "id": codec.new_id() if new.id is None else codec.text_field("id", new.id),
        "owner_id": codec.text_field("owner_id", new.owner_id),
        "key_hash": codec.text_field("key_hash", new.key_hash),
        "scopes": _names("scopes", new.scopes),
        "name": new.name if isinstance(new.name, str) else codec.text_field("name", new.name),
        "agent_id": None if new.agent_id is None else codec.text_field("agent_id", new.agent_id),
        "expires_at": codec.aware("expires_at", new.expires_at),
    }


class SqlApiKeys(ApiKeyRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def create(self, new: NewApiKey) -> ApiKey:
        params = _api_key_params(new)
        try:
            row = await self._sql.guarded_row("insert_api_key", params)
        except IntegrityViolation as exc:
            if exc.kind == "foreign_key":
                raise NotFound("principal", params["owner_id"]) from None
            raise Conflict("api_key", params["id"], "id or hash already exists") from None
        if row is None:
            raise await self._refused_agent(params["owner_id"], params["agent_id"])
        return api_key_of(row)

    async def _refused_agent(self, owner_id: str, agent_id: str) -> Exception:
        """Why the insert's agent condition held back the key: a missing owner or agent, or an
        agent that does not act for this owner (a key must never act as another user's agent)."""
        for principal_id in (owner_id, agent_id):
            if await self._sql.fetchrow("get_principal", {"id": principal_id}) is None:
                return NotFound("principal", principal_id)
        return InvalidInput("agent_id", agent_id, f"an agent of {owner_id!r} (its parent_id)")

    async def get(self, key_id: str, *, owner_id: str | None = None, agent_id: str | None = None) -> ApiKey:
        row = await self._sql.fetchrow("get_api_key", {"id": key_id, "owner_id": owner_id, "agent_id": agent_id})
        if row is None:
            raise NotFound("api_key", key_id)
        return api_key_of(row)

    async def by_hash(self, key_hash: str) -> ApiKey | None:
        row = await self._sql.fetchrow("api_key_by_hash", {"key_hash": key_hash})
        return None if row is None else api_key_of(row)

    async def for_owner(self, owner_id: str, *, agent_id: str | None = None,
                        include_dead: bool = False) -> list[ApiKey]:
        params = {"owner_id": owner_id, "agent_id": agent_id, "include_dead": bool(include_dead)}
        return [api_key_of(r) for r in await self._sql.fetch("api_keys_for_owner", params)]

    async def count_live(self, owner_id: str) -> int:
        row = await self._sql.fetchrow("count_live_api_keys", {"owner_id": owner_id})
        return int(row["n"]) if row is not None else 0

    async def revoke(self, key_id: str, *, owner_id: str | None = None, agent_id: str | None = None) -> ApiKey:
        row = await self._sql.fetchrow("revoke_api_key", {"id": key_id, "owner_id": owner_id, "agent_id": agent_id})
        if row is None:
            raise NotFound("api_key", key_id)
        return api_key_of(row)

    async def mark_replaced(self, key_id: str, replaced_by: str, grace_until: datetime) -> ApiKey:
        params = {"id": key_id, "replaced_by": codec.text_field("replaced_by", replaced_by),
                  "grace_until": codec.req_aware("grace_until", grace_until)}
        row = await self._sql.fetchrow("mark_api_key_replaced", params)
        if row is None:
            raise NotFound("api_key", key_id)
        return api_key_of(row)

    async def touch(self, key_id: str, at: datetime) -> None:
        await self._sql.fetch("touch_api_key", {"id": key_id, "at": codec.req_aware("at", at)})


#: A detail field whose lower-cased name contains one of these is refused: security events are
#: read by operators and exported, and must never hold what would let someone act as a principal.
_SECRET_NAMES = ("secret", "hash", "token", "password", "passwd", "ciphertext", "credential", "api_key", "apikey")

#: How an API key starts (``awk_<id>_<secret><crc>``): such a value is refused wherever it sits.
_KEY_PREFIX = "awk_"


def _secret_named(name: str) -> bool:
    lowered = name.lower()
    return lowered == "key" or any(secret in lowered for secret in _SECRET_NAMES)


def _refuse_secrets(path: str, value: Any) -> None:
    """Walk ``value`` (a decoded JSON document) and refuse a secret-named field or a key-like string."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            field_path = f"{path}.{name}"
            if _secret_named(str(name)):
                raise InvalidInput(field_path, "<withheld>", "no key, hash or secret in a security event")
            _refuse_secrets(field_path, item)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _refuse_secrets(f"{path}[{i}]", item)
    elif isinstance(value, str) and value.startswith(_KEY_PREFIX):
        raise InvalidInput(path, "<withheld>", "no API key in a security event (name its key id instead)")


def _security_event_params(new: NewSecurityEvent) -> dict[str, Any]:
    if not isinstance(new.detail, Mapping):
        raise InvalidInput("detail", type(new.detail).__name__, "a JSON object (a dict)")
    _refuse_secrets("detail", new.detail)
    optional = {name: getattr(new, name) for name in ("principal_id", "key_id", "actor_id")}
    return {
        "id": codec.new_id(),
        "kind": codec.text_field("kind", new.kind, max_len=100),
        **{name: None if value is None else codec.text_field(name, value) for name, value in optional.items()},
        "detail": codec.json_field("detail", dict(new.detail)),
    }


class SqlSecurityEvents(SecurityEventRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def append(self, new: NewSecurityEvent) -> SecurityEvent:
        row = await self._sql.fetchrow("insert_security_event", _security_event_params(new))
        assert row is not None
        return security_event_of(row)

    async def query(
        self, *, kind: str | None = None, principal_id: str | None = None, limit: int = 100
    ) -> list[SecurityEvent]:
        params = {"kind": kind, "principal_id": principal_id, "limit": codec.limit(limit)}
        return [security_event_of(r) for r in await self._sql.fetch("query_security_events", params)]
