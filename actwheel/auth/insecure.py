"""``--insecure-no-auth``: every request is the local owner with ``*`` (loopback listeners only)."""

from __future__ import annotations

from actwheel.service.caller import Caller

__all__ = ["NoAuthentication"]


class NoAuthentication:
    """An authenticator that asks for nothing: for local experiments, announced on every response."""

    def __init__(self, owner_id: str) -> None:
        self._caller = Caller(owner_id, frozenset({"*"}), owner_id, "user")

    async def authenticate(self, token: str | None) -> Caller:
        return self._caller
