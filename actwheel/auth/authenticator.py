"""Bearer API key → :class:`~actwheel.service.Caller`, cheaply, honouring revocation within a second.

A key is refused before any IO when malformed (:func:`~actwheel.auth.keys.parse_key` checks its
shape and checksum). A well-formed one is looked up by its sha256 with its principal (and its agent,
for an agent-bound key) in one short transaction; that row set is kept for at most
:data:`CACHE_TTL_S` (0.9 s), counted from the instant the read *began* — a row read is only as fresh
as that instant — so a revocation, an expiry, a ban or a lowered ceiling bites within 1 s on every
instance, the read included (a read slower than 0.1 s is the database's problem, and is seen). The
cache only makes authentication cheaper; pull it and every request reads the database, which is
slower, never wrong. Expiry is checked against the clock on every request, cached or not.

The effective scopes of a request are the key's ∩ the user's ceiling (∩ the agent's, for an
agent-bound key). ``last_used_at`` is written at most once a minute per key per instance.
"""

from __future__ import annotations

from dataclasses import dataclass

from actwheel.auth.keys import MalformedKey, parse_key
from actwheel.auth.scopes import Grant
from actwheel.clock import Clock
from actwheel.errors import NotFound, Unauthenticated
from actwheel.logs import get_logger
from actwheel.service.caller import Caller
from actwheel.storage.base import Store
from actwheel.storage.records import ApiKey, NewSecurityEvent, Principal, PrincipalStatus

__all__ = ["CACHE_TTL_S", "FAILED_BURST", "Authenticator"]

_log = get_logger("actwheel.auth")
#: How long a key's rows are reused before they are read again, from the start of their read: with the
#: read itself (milliseconds), a revocation bites within the 1 s the design promises.
CACHE_TTL_S = 0.9
#: How often ``last_used_at`` is written at most, per key.
TOUCH_EVERY_S = 60.0
#: This many refused credentials within a minute is a security event (once per minute).
FAILED_BURST = 20
_CACHE_MAX = 10_000


@dataclass(frozen=True, slots=True)
class _Entry:
    key: ApiKey
    owner: Principal
    agent: Principal | None
    read_at: float
    caller: Caller  # built once per read: the grants' intersection is the costly part of a cached hit


class Authenticator:
    def __init__(self, *, store: Store, clock: Clock, cache_ttl_s: float = CACHE_TTL_S) -> None:
        self._store = store
        self._clock = clock
        self._ttl_ms = round(cache_ttl_s * 1000)
        self._cache: dict[str, _Entry] = {}
        self._touched: dict[str, float] = {}
        self._hash_of: dict[str, str] = {}
        self._failures: list[float] = []

    async def authenticate(self, token: str | None) -> Caller:
        """:raises Unauthenticated: no token, or a malformed, unknown, revoked or expired key, or a banned
        principal (the message names the key id at most)"""
        if not token:
            raise Unauthenticated("an API key is required: Authorization: Bearer awk_…", token_sent=False)
        try:
            parsed = parse_key(token)
        except MalformedKey as exc:
            await self._failed()
            raise Unauthenticated(str(exc), token_sent=True) from None
        entry = await self._entry(parsed.key_hash)
        if entry is None:
            await self._failed()
            raise Unauthenticated("unknown API key", token_sent=True, key_id=parsed.key_id)
        self._check_live(entry)
        await self._touch(entry.key)
        return entry.caller

    async def authenticate_key_id(self, key_id: str) -> Caller:
        """The caller of the stored key ``key_id`` (a dashboard session's key), checked as a presented key
        is: revoked, expired, banned and a lowered ceiling bite within the same cache bound.

        :raises Unauthenticated: no such key, or one that is no longer good
        """
        key_hash = self._hash_of.get(key_id)
        if key_hash is None:
            async with self._store.transaction() as tx:
                try:
                    key_hash = (await tx.api_keys.get(key_id)).key_hash
                except NotFound:
                    raise Unauthenticated("unknown API key", token_sent=True, key_id=key_id) from None
            if len(self._hash_of) >= _CACHE_MAX:
                self._hash_of.clear()
            self._hash_of[key_id] = key_hash  # a key's hash never changes
        entry = await self._entry(key_hash)
        if entry is None:
            raise Unauthenticated("unknown API key", token_sent=True, key_id=key_id)
        self._check_live(entry)
        return entry.caller

    def forget(self) -> None:
        """Drop every cached key (after a local revocation: it bites at once on this instance)."""
        self._cache.clear()

    async def _entry(self, key_hash: str) -> _Entry | None:
        now_ms = self._clock.now_ms()  # before the read: the entry is as old as the read's start
        now = now_ms / 1000
        cached = self._cache.get(key_hash)
        # In whole milliseconds: a float difference of 0.9 s can come out a hair under 0.9.
        if cached is not None and now_ms - round(cached.read_at * 1000) < self._ttl_ms:
            return cached
        entry = await self._read(key_hash, now)
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        if entry is None:
            self._cache.pop(key_hash, None)
        else:
            self._cache[key_hash] = entry
        return entry

    async def _read(self, key_hash: str, now: float) -> _Entry | None:
        async with self._store.transaction() as tx:
            key = await tx.api_keys.by_hash(key_hash)
            if key is None:
                return None
            owners = await tx.principals.get_many([p for p in (key.owner_id, key.agent_id) if p is not None])
        owner = owners.get(key.owner_id)
        if owner is None:
            return None
        agent = owners.get(key.agent_id) if key.agent_id else None
        return _Entry(key, owner, agent, now, _caller(key, owner, agent))

    def _check_live(self, entry: _Entry) -> None:
        key, now = entry.key, self._clock.now()
        if key.revoked:
            raise Unauthenticated("revoked API key", token_sent=True, key_id=key.id)
        if key.expires_at is not None and key.expires_at <= now:
            raise Unauthenticated("expired API key", token_sent=True, key_id=key.id)
        for principal in (entry.owner, entry.agent):
            if principal is not None and principal.status is PrincipalStatus.BANNED:
                raise Unauthenticated(f"principal {principal.id!r} is banned", token_sent=True, key_id=key.id)
        if entry.key.agent_id is not None and entry.agent is None:
            raise Unauthenticated("the key's agent no longer exists", token_sent=True, key_id=key.id)

    async def _touch(self, key: ApiKey) -> None:
        now = self._clock.now_ms() / 1000
        if now - self._touched.get(key.id, -TOUCH_EVERY_S) < TOUCH_EVERY_S:
            return
        self._touched[key.id] = now
        try:
            async with self._store.transaction() as tx:
                await tx.api_keys.touch(key.id, self._clock.now())
        except NotFound:  # revoked and gone meanwhile: the next request is refused by its row
            pass

    async def _failed(self) -> None:
        now = self._clock.now_ms() / 1000
        self._failures = [t for t in self._failures if now - t < 60.0]
        self._failures.append(now)
        if len(self._failures) == FAILED_BURST:
            _log.warning("auth_failed_burst", failures=FAILED_BURST, window_s=60)
            async with self._store.transaction() as tx:
                await tx.security_events.append(NewSecurityEvent(
                    kind="auth.failed_burst", detail={"failures": FAILED_BURST, "window_s": 60}))


def _caller(key: ApiKey, owner: Principal, agent: Principal | None) -> Caller:
    grant = Grant.of(key.scopes).intersect(Grant.of(owner.scopes))
    if agent is not None:
        grant = grant.intersect(Grant.of(agent.scopes))
    principal = agent or owner
    return Caller(owner.id, frozenset(grant.to_list()), principal.id, principal.kind.value, key.id,
                  agent.id if agent is not None else None)
