"""Who asks: the identity every face hands to the service layer with each use case.

A face authenticates (an API key over HTTP, the broker-validated ``user_id`` on the bus) and builds
a :class:`Caller`; the service layer decides with it alone. ``owner_id`` is the user whose
automations, runs, secrets and keys these are — for an agent-bound key, the agent's user — and
``scopes`` the effective grant (key ∩ user ceiling ∩ agent ceiling), wildcards kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actwheel.auth.scopes import ALL, Grant, grant_of
from actwheel.run_context import owner_snapshot

__all__ = ["Caller", "caller_snapshot", "grant_of"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks, with what authority.

    :ivar owner_id: the user who owns what this caller creates and sees
    :ivar scopes: the effective scopes, as written (``*``, ``noun:*`` or concrete)
    :ivar principal_id: who authenticated (a user, an agent or a service); ``""``: the owner
    :ivar kind: that principal's kind: ``user``, ``agent`` or ``service``
    :ivar key_id: the public id of the API key used, if any (for audit rows; never authority)
    :ivar agent_id: set for an agent-bound key: it sees and changes only that agent's automations
    """

    owner_id: str
    scopes: frozenset[str] = frozenset({ALL})
    principal_id: str = ""
    kind: str = "user"
    key_id: str | None = None
    agent_id: str | None = None

    @property
    def grant(self) -> Grant:
        return grant_of(self.scopes)

    @property
    def who(self) -> str:
        """The principal to name in an error or an audit row."""
        return self.principal_id or self.owner_id

    def holds(self, scope: str) -> bool:
        return self.grant.allows(scope)


def caller_snapshot(caller: Caller) -> dict[str, Any]:
    """The run-context owner snapshot of a run ``caller`` asked for: its concrete scopes today
    (the router intersects them with the owner's ceiling when the run is dispatched)."""
    return owner_snapshot(caller.owner_id, caller.grant.expanded(), caller.agent_id)
