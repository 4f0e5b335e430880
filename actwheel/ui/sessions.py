"""The dashboard's session resolver while authentication is off (``--insecure-no-auth``)."""

from __future__ import annotations

import secrets

from actwheel.service import Authenticates
from actwheel.service.sessions import UiSessionCaller, csrf_token

__all__ = ["LocalSessions"]


class LocalSessions:
    """Every browser is the local caller; forms still carry a CSRF token, one per process."""

    def __init__(self, authenticator: Authenticates) -> None:
        self._authenticator = authenticator
        self._csrf = csrf_token(secrets.token_urlsafe(32))

    async def resolve(self, token: str | None) -> UiSessionCaller:
        return UiSessionCaller(await self._authenticator.authenticate(None), self._csrf)
