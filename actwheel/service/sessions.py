"""The dashboard's sign-in: an API key, presented once on a form, exchanged for a server-side session.

The browser keeps only a random session id (an HttpOnly cookie); the store keeps ``sha256`` of it with
the key it was made from (table ``ui_sessions``). Every request resolves the session and then the key
through the :class:`KeyAuthenticator`, so a revoked or expired key, a ban or a lowered ceiling ends the
session's authority within the authenticator's cache bound, exactly as for a bearer key. Sign-out
revokes the row. The CSRF token of a session is derived from its id (HMAC), so it needs no column and
is unknown to any page that cannot read the cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from actwheel.clock import Clock
from actwheel.errors import Unauthenticated
from actwheel.service.caller import Caller
from actwheel.storage.base import Store
from actwheel.storage.records import NewUiSession

__all__ = ["SESSION_TTL", "KeyAuthenticator", "SessionService", "SignedIn", "UiSessionCaller", "csrf_token"]

#: How long a dashboard session lasts from sign-in.
SESSION_TTL = timedelta(hours=8)


class KeyAuthenticator(Protocol):
    """What sessions need of the authenticator: a bearer key, and later the same key by its id."""

    async def authenticate(self, token: str | None) -> Caller:
        """:raises Unauthenticated: a bad key"""
        ...

    async def authenticate_key_id(self, key_id: str) -> Caller:
        """The caller of the stored key ``key_id``, checked as :meth:`authenticate` checks a key.

        :raises Unauthenticated: no such key, or a revoked, expired or banned one
        """
        ...


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A new session: ``token`` goes into the cookie and nowhere else."""

    token: str
    csrf: str
    caller: Caller
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class UiSessionCaller:
    """A resolved session: who it acts as and the CSRF token its forms must carry."""

    caller: Caller
    csrf: str


def csrf_token(session_token: str) -> str:
    """The CSRF token of a session (HMAC of its id): stable for the session, useless without it."""
    return hmac.new(session_token.encode(), b"actwheel-ui-csrf", hashlib.sha256).hexdigest()


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class SessionService:
    def __init__(self, *, store: Store, clock: Clock, authenticator: KeyAuthenticator,
                 ttl: timedelta = SESSION_TTL) -> None:
        self._store = store
        self._clock = clock
        self._authenticator = authenticator
        self._ttl = ttl

    async def sign_in(self, api_key: str) -> SignedIn:
        """Exchange ``api_key`` for a session.

        :raises Unauthenticated: a bad key, or a key without an id (none is ever stored then)
        """
        caller = await self._authenticator.authenticate(api_key.strip() or None)
        if caller.key_id is None:
            raise Unauthenticated("this credential cannot open a dashboard session", token_sent=True)
        token = secrets.token_urlsafe(32)
        now = self._clock.now()
        async with self._store.transaction() as tx:
            await tx.ui_sessions.create(NewUiSession(
                id=f"uis_{secrets.token_hex(8)}", session_hash=_hash(token), key_id=caller.key_id,
                owner_id=caller.owner_id, principal_id=caller.who, created_at=now, expires_at=now + self._ttl))
        return SignedIn(token, csrf_token(token), caller, now + self._ttl)

    async def resolve(self, token: str | None) -> UiSessionCaller:
        """The caller of a session cookie.

        :raises Unauthenticated: no cookie, or an unknown, revoked or expired session, or its key is no
            longer good
        """
        if not token:
            raise Unauthenticated("sign in to the dashboard", token_sent=False)
        async with self._store.transaction() as tx:
            session = await tx.ui_sessions.by_hash(_hash(token))
        if session is None or session.revoked_at is not None or session.expires_at <= self._clock.now():
            raise Unauthenticated("the dashboard session has ended", token_sent=True)
        caller = await self._authenticator.authenticate_key_id(session.key_id)
        return UiSessionCaller(caller, csrf_token(token))

    async def sign_out(self, token: str | None) -> bool:
        """Revoke the session of ``token``; ``False``: there was none."""
        if not token:
            return False
        async with self._store.transaction() as tx:
            return await tx.ui_sessions.revoke(_hash(token), at=self._clock.now())
