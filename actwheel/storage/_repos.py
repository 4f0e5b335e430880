"""The remaining repositories of the port and the unit of work that holds them all.

Each adapter supplies a :class:`~actwheel.storage._runner.SqlRunner` that runs the named
queries of its dialect (``sql/<dialect>/queries.sql``); the repositories check input, choose
the query and map rows to records. Automations, runs and the ontology have modules of their
own (``_automations``, ``_runs``, ``_ontology``); the row mappers live in ``_rows``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from actwheel.errors import Conflict, IntegrityViolation, InvalidInput, NotFound
from actwheel.storage import _codec as codec
from actwheel.storage._automations import SqlAutomations
from actwheel.storage._codec import JsonText
from actwheel.storage._ontology import SqlOntology
from actwheel.storage._operations import SqlAutomationHistory, SqlInstances
from actwheel.storage._retention import SqlRetention
from actwheel.storage._rows import (
    api_key_of,
    audit_entry_of,
    dead_letter_of,
    lease_of,
    outbox_message_of,
    principal_of,
    secret_of,
    security_event_of,
)
from actwheel.storage._runner import SqlRunner
from actwheel.storage._runs import SqlRuns
from actwheel.storage._sessions import SqlUiSessions
from actwheel.storage.base import (
    ApiKeyRepository,
    AuditRepository,
    ConfirmationRepository,
    DeadLetterRepository,
    IdempotencyRepository,
    OutboxRepository,
    PartitionLeaseRepository,
    PrincipalRepository,
    SecurityEventRepository,
    StoredSecretRepository,
    Transaction,
)
from actwheel.storage.records import (
    ApiKey,
    AuditEntry,
    Confirmation,
    DeadLetterRecord,
    NewApiKey,
    NewAuditEntry,
    NewConfirmation,
    NewDeadLetter,
    NewOutboxMessage,
    NewPrincipal,
    NewSecurityEvent,
    OutboxMessage,
    PartitionLease,
    Principal,
    PrincipalKind,
    PrincipalStatus,
    SecretRecord,
    SecurityEvent,
)
from actwheel.storage.trail import expand_all

__all__ = ["SqlTransaction"]


def _outbox_row(i: int, m: NewOutboxMessage) -> dict[str, Any]:
    body, headers = m.body, m.headers
    if type(body) is not bytes:
        if not isinstance(body, bytes | bytearray):
            raise InvalidInput(f"messages[{i}].body", type(body).__name__, "bytes")
        body = bytes(body)
    if len(body) > codec.MAX_JSON_BYTES * 4:
        raise InvalidInput(f"messages[{i}].body", f"<{len(body)} bytes>", f"at most {codec.MAX_JSON_BYTES * 4} bytes")
    return {
        "exchange": _name_at(i, "exchange", m.exchange),
        "routing_key": _name_at(i, "routing_key", m.routing_key),
        "body": body,
        "headers": _NO_HEADERS if type(headers) is dict and not headers else codec.json_at(
            "messages", i, "headers", headers),
    }


_NO_HEADERS = JsonText("{}")


def _name_at(i: int, name: str, value: Any) -> str:
    if type(value) is str and 0 < len(value) <= 255:
        return value
    return codec.text_field(f"messages[{i}].{name}", value, max_len=255)


class SqlOutbox(OutboxRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def append(self, message: NewOutboxMessage) -> None:
        await self.append_many([message])

    async def append_many(self, messages: Sequence[NewOutboxMessage]) -> None:
        rows = [_outbox_row(i, m) for i, m in enumerate(messages)]
        if rows:
            await self._sql.copy_rows("copy_outbox", rows, guarded=False)
            self._sql.outbox_touched = True

    async def take_batch(self, limit: int = 500, *, exclusive: bool = False) -> list[OutboxMessage]:
        query = "take_outbox_exclusive" if exclusive else "take_outbox"
        return [outbox_message_of(r) for r in await self._sql.fetch(query, {"limit": codec.limit(limit)})]

    async def mark_published(self, ids: Sequence[int]) -> int:
        if not ids:
            return 0
        return len(await self._sql.fetch("mark_published", {"ids": [int(i) for i in ids]}))

    async def purge_published(self, before: datetime) -> int:
        return len(await self._sql.fetch("purge_published", {"before": codec.aware("before", before)}))

    async def backlog(self) -> int:
        row = await self._sql.fetchrow("outbox_backlog")
        return int(row["n"]) if row is not None else 0

    async def oldest_unpublished(self) -> datetime | None:
        row = await self._sql.fetchrow("oldest_unpublished")
        return None if row is None else codec.req_dt(row["created_at"])

    async def requeue(self, message_id: int) -> bool:
        if isinstance(message_id, bool) or not isinstance(message_id, int) or message_id < 1:
            raise InvalidInput("message_id", message_id, "a positive outbox row id")
        return await self._sql.fetchrow("requeue_outbox_message", {"id": message_id}) is not None


def _audit_row(i: int, e: NewAuditEntry) -> dict[str, Any]:
    f = f"entries[{i}]."
    return {
        "event_id": codec.text_field(f + "event_id", e.event_id),
        "run_id": e.run_id,
        "automation_id": e.automation_id,
        "phase": codec.text_field(f + "phase", e.phase, max_len=64),
        "actor": codec.text_field(f + "actor", e.actor),
        "details": codec.json_field(f + "details", e.details),
        "occurred_at": codec.aware(f + "occurred_at", e.occurred_at),
    }


class SqlAudit(AuditRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def append(self, entry: NewAuditEntry) -> bool:
        return await self.append_many([entry]) == 1

    async def append_many(self, entries: Sequence[NewAuditEntry]) -> int:
        rows = [_audit_row(i, e) for i, e in enumerate(entries)]
        if not rows:
            return 0
        return len(await self._sql.fetch_rows("append_audit", rows))

    async def trail(self, run_id: str) -> list[AuditEntry]:
        return expand_all(audit_entry_of(r) for r in await self._sql.fetch("audit_trail", {"run_id": run_id}))

    async def for_automation(self, automation_id: str, limit: int = 100) -> list[AuditEntry]:
        params = {"automation_id": automation_id, "limit": codec.limit(limit)}
        rows = await self._sql.fetch("audit_for_automation", params)
        return expand_all(audit_entry_of(r) for r in rows)[-limit:]


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


def _instant(field: str, value: Any) -> datetime:
    """A required timezone-aware instant (UTC)."""
    when = codec.aware(field, value)
    if when is None:
        raise InvalidInput(field, value, "a timezone-aware datetime")
    return when


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

    async def get(self, key_id: str, *, owner_id: str | None = None) -> ApiKey:
        row = await self._sql.fetchrow("get_api_key", {"id": key_id, "owner_id": owner_id})
        if row is None:
            raise NotFound("api_key", key_id)
        return api_key_of(row)

    async def by_hash(self, key_hash: str) -> ApiKey | None:
        row = await self._sql.fetchrow("api_key_by_hash", {"key_hash": key_hash})
        return None if row is None else api_key_of(row)

    async def for_owner(self, owner_id: str, *, include_dead: bool = False) -> list[ApiKey]:
        params = {"owner_id": owner_id, "include_dead": bool(include_dead)}
        return [api_key_of(r) for r in await self._sql.fetch("api_keys_for_owner", params)]

    async def count_live(self, owner_id: str) -> int:
        row = await self._sql.fetchrow("count_live_api_keys", {"owner_id": owner_id})
        return int(row["n"]) if row is not None else 0

    async def revoke(self, key_id: str, *, owner_id: str | None = None) -> ApiKey:
        row = await self._sql.fetchrow("revoke_api_key", {"id": key_id, "owner_id": owner_id})
        if row is None:
            raise NotFound("api_key", key_id)
        return api_key_of(row)

    async def mark_replaced(self, key_id: str, replaced_by: str, grace_until: datetime) -> ApiKey:
        params = {"id": key_id, "replaced_by": codec.text_field("replaced_by", replaced_by),
                  "grace_until": _instant("grace_until", grace_until)}
        row = await self._sql.fetchrow("mark_api_key_replaced", params)
        if row is None:
            raise NotFound("api_key", key_id)
        return api_key_of(row)

    async def touch(self, key_id: str, at: datetime) -> None:
        await self._sql.fetch("touch_api_key", {"id": key_id, "at": _instant("at", at)})


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


def _ciphertext(value: Any) -> bytes:
    if not isinstance(value, bytes | bytearray) or not value:
        raise InvalidInput("ciphertext", type(value).__name__, "non-empty bytes (ciphertext, never plaintext)")
    return bytes(value)


class SqlSecrets(StoredSecretRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def put(self, owner_id: str, name: str, ciphertext: bytes) -> SecretRecord:
        params = {
            "id": codec.new_id(),
            "owner_id": codec.text_field("owner_id", owner_id),
            "name": codec.text_field("name", name, max_len=200),
            "ciphertext": _ciphertext(ciphertext),
        }
        try:
            row = await self._sql.guarded_row("insert_secret", params)
        except IntegrityViolation:
            raise Conflict("secret", f"{owner_id}/{name}", "already exists (rotate it instead)") from None
        assert row is not None
        return secret_of(row)

    async def get(self, owner_id: str, name: str) -> SecretRecord:
        row = await self._sql.fetchrow("get_secret", {"owner_id": owner_id, "name": name})
        if row is None:
            raise NotFound("secret", f"{owner_id}/{name}")
        return secret_of(row)

    async def rotate(
        self, owner_id: str, name: str, ciphertext: bytes, *, expected_version: int | None = None
    ) -> SecretRecord:
        params = {
            "owner_id": owner_id,
            "name": name,
            "ciphertext": _ciphertext(ciphertext),
            "expected_version": codec.version("expected_version", expected_version, optional=True),
        }
        row = await self._sql.fetchrow("rotate_secret", params)
        if row is None:
            current = await self.get(owner_id, name)
            raise Conflict("secret", f"{owner_id}/{name}", f"version is {current.version}, not {expected_version}")
        return secret_of(row)

    async def delete(self, owner_id: str, name: str) -> None:
        if await self._sql.fetchrow("delete_secret", {"owner_id": owner_id, "name": name}) is None:
            raise NotFound("secret", f"{owner_id}/{name}")

    async def names(self, owner_id: str) -> list[str]:
        return [r["name"] for r in await self._sql.fetch("secret_names", {"owner_id": owner_id})]

    async def exists_any(self) -> bool:
        row = await self._sql.fetchrow("any_secret")
        return row is not None and bool(row["found"])


#: The largest outcome one idempotency key may hold (a batch's ids fit: 20k uuids ≈ 0.8 MB).
MAX_OUTCOME_BYTES = 4 * 1024 * 1024


def _outcome(value: Any) -> codec.JsonText:
    if not isinstance(value, Mapping):
        raise InvalidInput("outcome", type(value).__name__, "a JSON object (a dict)")
    return codec.json_field("outcome", dict(value), limit=MAX_OUTCOME_BYTES)


class SqlIdempotency(IdempotencyRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def get(self, key: str) -> dict[str, Any] | None:
        row = await self._sql.fetchrow("get_idempotency_key", {"key": codec.text_field("key", key)})
        return None if row is None else dict(codec.loads(row["outcome"]))

    async def put(self, key: str, outcome: dict[str, Any]) -> bool:
        params = {"key": codec.text_field("key", key), "outcome": _outcome(outcome)}
        return await self._sql.fetchrow("put_idempotency_key", params) is not None

    async def purge(self, before: datetime) -> int:
        return len(await self._sql.fetch("purge_idempotency_keys", {"before": codec.aware("before", before)}))


def _confirmation_of(row: Mapping[str, Any]) -> Confirmation:
    return Confirmation(
        id=row["id"], token_hash=row["token_hash"], owner_id=row["owner_id"], key_id=row["key_id"],
        automation_id=row["automation_id"], automation_version=int(row["automation_version"]),
        created_at=codec.req_dt(row["created_at"]), expires_at=codec.req_dt(row["expires_at"]),
        used_at=codec.to_dt(row["used_at"]), run_id=row["run_id"])


_MIN_SERVER_KEY = 32


class SqlConfirmations(ConfirmationRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def create(self, new: NewConfirmation) -> Confirmation:
        params = {
            "id": codec.text_field("id", new.id), "token_hash": codec.text_field("token_hash", new.token_hash),
            "owner_id": codec.text_field("owner_id", new.owner_id), "key_id": str(new.key_id),
            "automation_id": codec.text_field("automation_id", new.automation_id),
            "automation_version": codec.version("automation_version", new.automation_version),
            "created_at": _instant("created_at", new.created_at), "expires_at": _instant("expires_at", new.expires_at),
        }
        try:
            row = await self._sql.guarded_row("insert_mcp_confirmation", params)
        except IntegrityViolation:
            raise Conflict("confirmation", new.id, "id or token hash already exists") from None
        assert row is not None
        return _confirmation_of(row)

    async def by_hash(self, token_hash: str) -> Confirmation | None:
        row = await self._sql.fetchrow("mcp_confirmation_by_hash",
                                       {"token_hash": codec.text_field("token_hash", token_hash)})
        return None if row is None else _confirmation_of(row)

    async def mark_used(self, confirmation_id: str, *, at: datetime, run_id: str) -> Confirmation:
        row = await self._sql.fetchrow("use_mcp_confirmation", {
            "id": codec.text_field("confirmation_id", confirmation_id), "at": _instant("at", at),
            "run_id": codec.text_field("run_id", run_id)})
        if row is None:
            raise NotFound("confirmation", confirmation_id)
        return _confirmation_of(row)

    async def purge(self, before: datetime) -> int:
        return len(await self._sql.fetch("purge_mcp_confirmations", {"before": _instant("before", before)}))

    async def server_key(self, name: str, candidate: bytes) -> bytes:
        if not isinstance(candidate, bytes) or len(candidate) < _MIN_SERVER_KEY:
            raise InvalidInput("candidate", f"<{len(candidate)} bytes>", f"at least {_MIN_SERVER_KEY} random bytes")
        name = codec.text_field("name", name)
        await self._sql.fetch("ensure_mcp_server_key", {"name": name, "secret": candidate})
        row = await self._sql.fetchrow("get_mcp_server_key", {"name": name})
        assert row is not None
        return bytes(row["secret"])


class SqlDeadLetters(DeadLetterRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def add(self, new: NewDeadLetter) -> DeadLetterRecord:
        params = {
            "id": codec.new_id(),
            "source": codec.text_field("source", new.source, max_len=200),
            "ref_id": new.ref_id,
            "reason": codec.text_field("reason", new.reason, max_len=4000),
            "payload": codec.json_field("payload", new.payload),
        }
        row = await self._sql.fetchrow("insert_dead_letter", params)
        assert row is not None
        return dead_letter_of(row)

    async def get(self, letter_id: str) -> DeadLetterRecord:
        row = await self._sql.fetchrow("get_dead_letter", {"id": letter_id})
        if row is None:
            raise NotFound("dead_letter", letter_id)
        return dead_letter_of(row)

    async def query(self, *, source: str | None = None, limit: int = 100) -> list[DeadLetterRecord]:
        params = {"source": source, "limit": codec.limit(limit)}
        return [dead_letter_of(r) for r in await self._sql.fetch("query_dead_letters", params)]

    async def counts(self) -> dict[str, int]:
        return {r["source"]: int(r["n"]) for r in await self._sql.fetch("dead_letter_counts")}

    async def delete(self, letter_id: str) -> None:
        if await self._sql.fetchrow("delete_dead_letter", {"id": letter_id}) is None:
            raise NotFound("dead_letter", letter_id)


class SqlPartitionLeases(PartitionLeaseRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def _run(self, query: str, owner: str, partitions: Sequence[int], ttl_s: float | None) -> list[int]:
        params: dict[str, Any] = {"owner": codec.text_field("owner", owner), "partitions": codec.partitions(partitions)}
        if not params["partitions"]:
            return []
        if ttl_s is not None:
            params["ttl_s"] = codec.positive("ttl_s", ttl_s)
        return sorted(r["partition"] for r in await self._sql.fetch(query, params))

    async def acquire(self, owner: str, partitions: Sequence[int], ttl_s: float) -> list[int]:
        return await self._run("acquire_partitions", owner, partitions, ttl_s)

    async def renew(self, owner: str, partitions: Sequence[int], ttl_s: float) -> list[int]:
        return await self._run("renew_partitions", owner, partitions, ttl_s)

    async def release(self, owner: str, partitions: Sequence[int]) -> int:
        return len(await self._run("release_partitions", owner, partitions, None))

    async def all(self) -> list[PartitionLease]:
        return [lease_of(r) for r in await self._sql.fetch("all_partitions")]


class SqlTransaction(Transaction):
    """The repositories of one transaction, all sharing its :class:`SqlRunner`."""

    def __init__(self, sql: SqlRunner, *, partitions: int) -> None:
        self._sql = sql
        self.automations = SqlAutomations(sql, partitions)
        self.runs = SqlRuns(sql)
        self.outbox = SqlOutbox(sql)
        self.audit = SqlAudit(sql)
        self.ontology = SqlOntology(sql)
        self.principals = SqlPrincipals(sql)
        self.api_keys = SqlApiKeys(sql)
        self.security_events = SqlSecurityEvents(sql)
        self.secrets = SqlSecrets(sql)
        self.dead_letters = SqlDeadLetters(sql)
        self.partitions = SqlPartitionLeases(sql)
        self.idempotency = SqlIdempotency(sql)
        self.retention = SqlRetention(sql)
        self.confirmations = SqlConfirmations(sql)
        self.ui_sessions = SqlUiSessions(sql)
        self.automation_history = SqlAutomationHistory(sql)
        self.instances = SqlInstances(sql)

    @property
    def outbox_touched(self) -> bool:
        return self._sql.outbox_touched

    async def now(self) -> datetime:
        return await self._sql.now()
