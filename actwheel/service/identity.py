"""Principals and API keys: the use cases behind ``/v1/principals``, ``/v1/keys`` and the CLI.

- A **user** owns automations, secrets and keys; an **agent** belongs to one user and acts for it
  with a narrower ceiling; a **service** publishes on the bus (its ``on_behalf_of`` names the owners
  it may act for). Each has a scope *ceiling*.
- A key is shown exactly once, when created or rotated; only ``sha256(key)`` is stored. A key never
  grants more than its principal holds (effective scopes = key ∩ user ceiling ∩ agent ceiling), and
  a key may only mint keys its own effective grant covers. A principal has at most
  :data:`MAX_LIVE_KEYS` live keys.
- A key's principal is a **user** (an agent's keys are the user's, bound with ``agent_id``; a service
  authenticates on the bus by its RabbitMQ ``user_id``, never by a key). ``*`` is minted only for the
  bootstrap admin, and a new key never outlives the key that minted it.
- An **agent-bound** caller acts for its agent alone: the keys it mints are bound to that agent, and
  it lists, revokes and rotates only that agent's keys (another one answers 404, like a missing id).
- Every change is a security event (ids only: never a key, a hash or a secret), in the same
  transaction as the change, and logged with its ids once the transaction has committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from actwheel.auth.bootstrap import ADMIN_ID
from actwheel.auth.keys import new_key
from actwheel.auth.scopes import ALL, Grant, validate_scopes
from actwheel.clock import Clock
from actwheel.errors import Conflict, InvalidInput, NotFound
from actwheel.logs import get_logger
from actwheel.service.authorize import ADMIN_READ, ADMIN_WRITE, owner_by_id, require
from actwheel.service.caller import Caller
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import (
    ApiKey,
    NewApiKey,
    NewPrincipal,
    NewSecurityEvent,
    Principal,
    PrincipalKind,
)

__all__ = ["DEFAULT_KEY_TTL", "MAX_LIVE_KEYS", "KeyService", "MintedKey", "PrincipalService", "describe_key",
           "describe_principal"]

#: How long a key lives unless asked otherwise.
DEFAULT_KEY_TTL = timedelta(days=90)
#: How long the old key of a rotation keeps working unless asked otherwise.
DEFAULT_ROTATION_GRACE = timedelta(hours=24)
MAX_LIVE_KEYS = 20
_MAX_TTL_S = 10 * 365 * 86400
_KINDS = ", ".join(k.value for k in PrincipalKind)
_log = get_logger("actwheel.security")


@dataclass(frozen=True, slots=True)
class MintedKey:
    """A key as created: the only time its token exists outside the client."""

    key: ApiKey
    token: str = field(repr=False)


class PrincipalService:
    def __init__(self, *, store: Store, on_change: Callable[[], None] = lambda: None) -> None:
        """``on_change``: called after a ban or unban commits (the authenticator forgets its cached rows,
        so the change bites at once on this instance; other instances within their cache bound)."""
        self._store = store
        self._on_change = on_change

    async def create(self, caller: Caller, body: Mapping[str, Any]) -> Principal:
        """``{"id", "kind", "scopes", "parent_id"?, "display_name"?, "on_behalf_of"?}`` → the principal.

        :raises PermissionDenied: no ``admin:write``
        :raises InvalidInput: naming the bad field
        :raises Conflict: the id exists
        """
        require(caller, "principal.create", [ADMIN_WRITE])
        new = _new_principal(body)
        async with self._store.transaction() as tx:
            if new.parent_id is not None:
                await _check_parent(tx, new.parent_id)
            created = await tx.principals.create(new)
            event = await _event(tx, "principal.created", caller, principal_id=created.id,
                                 detail={"kind": created.kind})
        _log_event(event)
        return created

    async def list(self, caller: Caller, *, kind: PrincipalKind | None = None, after_id: str | None = None,
                   limit: int = 100) -> list[Principal]:
        require(caller, "principal.list", [ADMIN_READ])
        async with self._store.transaction() as tx:
            return await tx.principals.query(kind=kind, after_id=after_id, limit=limit)

    async def ban(self, caller: Caller, principal_id: str, reason: Any) -> Principal:
        """Ban a principal: its keys stop working and its runs are SKIPPED(owner_inactive) from the next claim.

        :raises InvalidInput: no ``reason``
        """
        require(caller, "principal.ban", [ADMIN_WRITE])
        if not isinstance(reason, str) or not reason.strip() or len(reason) > 500:
            raise InvalidInput("reason", reason, "why, in at most 500 characters")
        if principal_id == caller.who:
            raise InvalidInput("id", principal_id, "another principal: nobody bans themselves")
        async with self._store.transaction() as tx:
            banned = await tx.principals.ban(principal_id, reason=reason, by=caller.who)
            event = await _event(tx, "principal.banned", caller, principal_id=principal_id, detail={"reason": reason})
        self._on_change()
        _log_event(event)
        return banned

    async def unban(self, caller: Caller, principal_id: str) -> Principal:
        require(caller, "principal.unban", [ADMIN_WRITE])
        async with self._store.transaction() as tx:
            unbanned = await tx.principals.unban(principal_id, by=caller.who)
            event = await _event(tx, "principal.unbanned", caller, principal_id=principal_id)
        self._on_change()
        _log_event(event)
        return unbanned

    async def set_scopes(self, caller: Caller, principal_id: str, scopes: Any) -> Principal:
        """Replace a principal's ceiling: lowering it makes the next run of its automations that needs a
        removed scope FAILED(permission) (authority is decided at dispatch), and narrows its keys at once.

        :raises InvalidInput: an unknown scope, or ``*`` (the bootstrap admin's alone)
        """
        require(caller, "principal.set_scopes", [ADMIN_WRITE])
        ceiling = validate_scopes(scopes, "scopes")
        async with self._store.transaction() as tx:
            changed = await tx.principals.set_scopes(principal_id, tuple(sorted(ceiling)))
            event = await _event(tx, "principal.scopes_set", caller, principal_id=principal_id,
                                 detail={"scopes": sorted(ceiling)})
        self._on_change()
        _log_event(event)
        return changed


class KeyService:
    def __init__(self, *, store: Store, clock: Clock, on_change: Callable[[], None] = lambda: None) -> None:
        """``on_change``: called after a revocation or rotation commits (as for :class:`PrincipalService`)."""
        self._store = store
        self._clock = clock
        self._on_change = on_change

    async def create(self, caller: Caller, body: Mapping[str, Any]) -> MintedKey:
        """``{"name", "scopes", "principal_id"?, "agent_id"?, "expires_in_s"?}`` → the key, shown once.

        The principal defaults to the caller's owner; naming another needs ``admin:write``. The new
        key's scopes must be covered by the caller's own effective scopes, and it expires no later than
        the caller's key. An agent-bound caller's key is bound to its agent (``agent_id`` omitted or
        the same), for its own user.

        :raises PermissionDenied: no ``key:write``; another principal without ``admin:write``; broader
            than the caller
        :raises InvalidInput: naming the bad field: a principal that is not a user, ``*`` for another
            than the bootstrap admin, another agent or user than an agent-bound caller's own;
            :data:`MAX_LIVE_KEYS` live keys already
        """
        require(caller, "key.create", ["key:write"])
        name = _name(body.get("name"))
        scopes = validate_scopes(body.get("scopes"), "scopes", allow_all=caller.grant.everything)
        _check_narrower(caller, Grant.of(scopes))
        principal_id = _keys_owner(caller, _text(body.get("principal_id", caller.owner_id), "principal_id"),
                                   "key.create for another principal", write=True)
        _check_everything(principal_id, list(body["scopes"]))  # a list: validate_scopes said so
        agent_id = _agent_binding(caller, body.get("agent_id"))
        ttl = _ttl(body.get("expires_in_s"))
        async with self._store.transaction() as tx:
            await self._check_owner(tx, principal_id, agent_id)
            expires_at = await _capped_expiry(tx, caller, ttl)
            minted = await self._mint(tx, principal_id, name, tuple(sorted(scopes)), agent_id, expires_at)
            event = await _event(tx, "key.created", caller, principal_id=principal_id, key_id=minted.key.id)
        _log_event(event)
        return minted

    async def list(self, caller: Caller, *, principal_id: str | None = None) -> list[ApiKey]:
        """The live keys of the caller's owner (another principal's need ``admin:read``); an agent-bound
        caller's: its agent's only.

        :raises InvalidInput: naming ``principal_id``: another principal, asked by an agent-bound caller
        """
        require(caller, "key.list", ["key:read"])
        owner = _keys_owner(caller, principal_id or caller.owner_id, "key.list for another principal", write=False)
        async with self._store.transaction() as tx:
            return await tx.api_keys.for_owner(owner, agent_id=caller.agent_id)

    async def revoke(self, caller: Caller, key_id: str) -> ApiKey:
        """:raises NotFound: no key ``key_id`` of the caller's owner (another owner's answers the same;
            so does one not bound to an agent-bound caller's agent)"""
        require(caller, "key.revoke", ["key:write"])
        async with self._store.transaction() as tx:
            revoked = await tx.api_keys.revoke(key_id, owner_id=owner_by_id(caller, write=True),
                                               agent_id=caller.agent_id)
            event = await _event(tx, "key.revoked", caller, principal_id=revoked.owner_id, key_id=key_id)
        self._on_change()
        _log_event(event)
        return revoked

    async def rotate(self, caller: Caller, key_id: str, body: Mapping[str, Any]) -> MintedKey:
        """A new key like ``key_id`` (same name, scopes, agent; expiring no later than the caller's key);
        the old one keeps working for ``grace_s`` (default a day) and then expires.

        :raises NotFound: no key ``key_id`` of the caller's owner (for an agent-bound caller: of its agent)
        """
        require(caller, "key.rotate", ["key:write"])
        grace = _grace(body.get("grace_s"))
        async with self._store.transaction() as tx:
            old = await tx.api_keys.get(key_id, owner_id=owner_by_id(caller, write=True), agent_id=caller.agent_id)
            if old.revoked:
                raise Conflict("key", key_id, "a live key (this one is revoked)")
            _check_narrower(caller, Grant.of(old.scopes))
            now = await tx.now()
            expires_at = await _capped_expiry(tx, caller, DEFAULT_KEY_TTL)
            minted = await self._mint(tx, old.owner_id, old.name, old.scopes, old.agent_id, expires_at)
            await tx.api_keys.mark_replaced(key_id, minted.key.id, now + grace)
            event = await _event(tx, "key.rotated", caller, principal_id=old.owner_id, key_id=key_id,
                                 detail={"replaced_by": minted.key.id})
        self._on_change()
        _log_event(event)
        return minted

    async def _check_owner(self, tx: Transaction, principal_id: str, agent_id: str | None) -> None:
        owner = await tx.principals.get(principal_id)
        if owner.kind is not PrincipalKind.USER:
            raise InvalidInput("principal_id", principal_id, f"a user (this is a {owner.kind.value}: an agent's keys "
                               "are its user's, with agent_id; a service authenticates on the bus by its user_id)")
        if agent_id is not None:
            agent = await tx.principals.get(agent_id)
            if agent.kind is not PrincipalKind.AGENT or agent.parent_id != owner.id:
                raise InvalidInput("agent_id", agent_id, f"an agent of {owner.id!r}")
        if await tx.api_keys.count_live(principal_id) >= MAX_LIVE_KEYS:
            raise InvalidInput("principal_id", principal_id,
                               f"a principal with fewer than {MAX_LIVE_KEYS} live keys (revoke one first)")

    async def _mint(self, tx: Transaction, owner_id: str, name: str, scopes: Sequence[str], agent_id: str | None,
                    expires_at: datetime) -> MintedKey:
        issued = new_key()
        key = await tx.api_keys.create(NewApiKey(
            id=issued.key_id, owner_id=owner_id, key_hash=issued.key_hash, scopes=tuple(scopes), name=name,
            agent_id=agent_id, expires_at=expires_at))
        return MintedKey(key, issued.token)


def describe_principal(principal: Principal) -> dict[str, Any]:
    """A principal as the API answers it."""
    return {"id": principal.id, "kind": principal.kind.value, "display_name": principal.display_name,
            "status": principal.status.value, "scopes": list(principal.scopes), "parent_id": principal.parent_id,
            "on_behalf_of": list(principal.on_behalf_of), "ban_reason": principal.ban_reason,
            "banned_by": principal.banned_by, "banned_at": principal.banned_at,
            "created_at": principal.created_at, "updated_at": principal.updated_at}


def describe_key(key: ApiKey) -> dict[str, Any]:
    """A key as the API lists it: its public id, never the key or its hash."""
    return {"id": key.id, "name": key.name, "principal_id": key.owner_id, "agent_id": key.agent_id,
            "scopes": list(key.scopes), "expires_at": key.expires_at, "revoked": key.revoked,
            "revoked_at": key.revoked_at, "last_used_at": key.last_used_at, "replaced_by": key.replaced_by,
            "created_at": key.created_at}


def _new_principal(body: Mapping[str, Any]) -> NewPrincipal:
    principal_id = _text(body.get("id"), "id")
    try:
        kind = PrincipalKind(str(body.get("kind")))
    except ValueError:
        raise InvalidInput("kind", body.get("kind"), f"one of {_KINDS}") from None
    parent_id = body.get("parent_id")
    if (kind is PrincipalKind.AGENT) != (parent_id is not None):
        raise InvalidInput("parent_id", parent_id, "the agent's user (an agent has one; a user or service none)")
    on_behalf_of = body.get("on_behalf_of", [])
    if not isinstance(on_behalf_of, list) or not all(isinstance(o, str) and o for o in on_behalf_of):
        raise InvalidInput("on_behalf_of", on_behalf_of, "a list of owner ids a service may act for ('*': any)")
    display_name = body.get("display_name", "")
    if not isinstance(display_name, str) or len(display_name) > 200:
        raise InvalidInput("display_name", display_name, "a string of at most 200 characters")
    scopes = validate_scopes(body.get("scopes"), "scopes")
    return NewPrincipal(id=principal_id, kind=kind, scopes=tuple(sorted(scopes)),
                        parent_id=None if parent_id is None else _text(parent_id, "parent_id"),
                        display_name=display_name, on_behalf_of=tuple(on_behalf_of))


async def _check_parent(tx: Transaction, parent_id: str) -> None:
    try:
        parent = await tx.principals.get(parent_id)
    except NotFound:
        raise InvalidInput("parent_id", parent_id, "an existing user") from None
    if parent.kind is not PrincipalKind.USER:
        raise InvalidInput("parent_id", parent_id, "a user (agents belong to users)")


def _check_narrower(caller: Caller, wanted: Grant) -> None:
    if not caller.grant.covers(wanted):
        require(caller, "mint a key broader than itself", sorted(wanted.expanded() - caller.grant.expanded())
                or wanted.to_list())


def _keys_owner(caller: Caller, requested: str, action: str, *, write: bool) -> str:
    """Whose keys the caller names: its owner's; another principal's needs ``admin:write`` (a change) or
    ``admin:read``, and is never an agent-bound caller's (it acts for its own user alone).

    :raises InvalidInput: naming ``principal_id``: another principal, for an agent-bound caller
    :raises PermissionDenied: another principal without the admin scope
    """
    if requested == caller.owner_id:
        return requested
    if caller.agent_id is not None:
        raise InvalidInput("principal_id", requested, f"{caller.owner_id!r}: an agent-bound key reaches only "
                           "its own user's keys")
    require(caller, action, [ADMIN_WRITE if write else ADMIN_READ])
    return requested


def _agent_binding(caller: Caller, value: Any) -> str | None:
    """The agent a new key is bound to: as asked (``None``: none); an agent-bound caller's own agent,
    always.

    :raises InvalidInput: naming ``agent_id``: not an id, or another agent than an agent-bound caller's
    """
    if value is None:
        return caller.agent_id
    agent_id = _text(value, "agent_id")
    if caller.agent_id is not None and agent_id != caller.agent_id:
        raise InvalidInput("agent_id", agent_id, f"{caller.agent_id!r} or none: an agent-bound key mints keys "
                           "of its own agent only")
    return agent_id


def _check_everything(principal_id: str, scopes: Sequence[str]) -> None:
    """:raises InvalidInput: naming ``scopes[i]``: ``*`` for another principal than the bootstrap admin"""
    if ALL in scopes and principal_id != ADMIN_ID:
        raise InvalidInput(f"scopes[{list(scopes).index(ALL)}]", ALL,
                           f"concrete scopes: '*' is for the bootstrap admin ({ADMIN_ID!r}) alone")


async def _capped_expiry(tx: Transaction, caller: Caller, ttl: timedelta) -> datetime:
    """``ttl`` from now, but never later than the key the caller authenticated with expires: a key
    cannot mint (or rotate into) one that outlives it. A caller without a key (the CLI) is not capped."""
    expires_at: datetime = await tx.now() + ttl
    if caller.key_id is None:
        return expires_at
    try:
        minting = await tx.api_keys.get(caller.key_id)
    except NotFound:
        return expires_at
    return expires_at if minting.expires_at is None else min(expires_at, minting.expires_at)


async def _event(tx: Transaction, kind: str, caller: Caller, *, principal_id: str | None = None,
                 key_id: str | None = None, detail: Mapping[str, Any] | None = None) -> NewSecurityEvent:
    """Store a security event in ``tx``; log it with :func:`_log_event` once ``tx`` has committed."""
    event = NewSecurityEvent(kind=kind, principal_id=principal_id, key_id=key_id, actor_id=caller.who,
                             detail={**(detail or {}), "by_key": caller.key_id})
    await tx.security_events.append(event)
    return event


#: The detail fields of a security event that are ids, and so logged: the key the actor used, the key
#: a rotation replaced the old one with.
_LOGGED_DETAIL = ("by_key", "replaced_by")


def _log_event(event: NewSecurityEvent) -> None:
    """Log a committed security event with its ids only: never its detail's text (a ban's reason is
    anyone's prose), never a key, a hash or a secret."""
    ids = {name: event.detail[name] for name in _LOGGED_DETAIL if event.detail.get(name) is not None}
    _log.info("security_event", kind=event.kind, principal_id=event.principal_id, key_id=event.key_id,
              actor_id=event.actor_id, **ids)


def _text(value: Any, field_name: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 100 or not value.isprintable():
        raise InvalidInput(field_name, value, "a non-empty id of at most 100 printable characters")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 100:
        raise InvalidInput("name", value, "a non-empty name of at most 100 characters")
    return value


def _ttl(value: Any) -> timedelta:
    if value is None:
        return DEFAULT_KEY_TTL
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= _MAX_TTL_S:
        raise InvalidInput("expires_in_s", value, f"whole seconds from 1 to {_MAX_TTL_S}")
    return timedelta(seconds=value)


def _grace(value: Any) -> timedelta:
    if value is None:
        return DEFAULT_ROTATION_GRACE
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 30 * 86400:
        raise InvalidInput("grace_s", value, "whole seconds from 0 to 2592000 (30 days)")
    return timedelta(seconds=value)
