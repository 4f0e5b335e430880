"""The permission rules of the service layer, shared by every face.

- A use case names the resource scope it needs (``automation:write``, ``run:read``, …).
- **The double-scope rule**: a change that leaves an automation able to fire (create enabled,
  enable, update while enabled, run now) needs ``automation:write`` *and* the action's own scopes
  (``required_scopes_for(config)``, a composite's steps included); a change that cannot make it
  fire (create disabled, update while disabled, disable, delete) needs ``automation:write`` only.
  Turning off is always easier than turning on.
- **Owner isolation**: reads and writes are filtered by the caller's owner, in SQL; another owner's
  id answers 404 exactly like an id that does not exist. Naming another owner needs ``admin:read``
  (reads) or ``admin:write`` (writes).

A refusal is :class:`~actwheel.errors.PermissionDenied` naming every missing scope.
"""

from __future__ import annotations

from collections.abc import Iterable

from actwheel.errors import PermissionDenied
from actwheel.service.caller import Caller

__all__ = ["ADMIN_READ", "ADMIN_WRITE", "listing_owner", "owner_by_id", "require", "sees"]

ADMIN_READ = "admin:read"
ADMIN_WRITE = "admin:write"


def require(caller: Caller, action: str, scopes: Iterable[str]) -> None:
    """:raises PermissionDenied: naming every scope of ``scopes`` the caller does not hold"""
    missing = caller.grant.missing(scopes)
    if missing:
        raise PermissionDenied(caller.who, action, missing)


def listing_owner(caller: Caller, requested: str | None = None, *, write: bool = False) -> str:
    """The owner a listing (or a change by filter) is limited to: the caller's own, or ``requested``
    — another owner needs ``admin:read`` (``admin:write`` for a change).

    :raises PermissionDenied: another owner without the admin scope
    """
    if requested is None or requested == caller.owner_id:
        return caller.owner_id
    require(caller, f"act for owner {requested!r}", [ADMIN_WRITE if write else ADMIN_READ])
    return requested


def owner_by_id(caller: Caller, *, write: bool = False) -> str | None:
    """The owner a read or change of one record by its id is filtered by, in SQL: the caller's own;
    ``None`` (any owner) for an admin (``admin:read``, or ``admin:write`` for a change)."""
    admin = caller.holds(ADMIN_WRITE if write else ADMIN_READ) and caller.agent_id is None
    return None if admin else caller.owner_id


def sees(caller: Caller, agent_id: str | None) -> bool:
    """Whether a record the owner filter let through is the caller's: an agent-bound key reaches
    only its agent's automations."""
    return caller.agent_id is None or agent_id == caller.agent_id
