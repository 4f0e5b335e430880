"""The reserved keys of a run's ``context`` and the words the engine writes on runs it cancels.

A run's context is free-form JSON for templates, except for keys starting with ``$``: the engine
owns those. They live here, once, because three layers read or write them — the service layer and
the planner when they build runs, the router when it dispatches them — and none of those may import
the others' helpers. Pure: no IO, no imports beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = ["CANCELED_DELETED", "CANCELED_DISABLED", "CANCELED_UPDATED", "DRY_RUN_KEY", "OWNER_KEY", "RESERVED_PREFIX",
           "SKIPPED_KEY", "TRANSIENT_KEY", "acting_agent", "instants_of", "owner_snapshot", "skipped_range"]

#: Every engine-owned context key starts with this; a request's own context may not use it.
RESERVED_PREFIX: Final = "$"
#: The owner snapshot ``{id, scopes[, agent_id]}`` taken when the run was created (who asked, with what
#: authority, and the owner's agent it acts as, if any).
OWNER_KEY: Final = "$owner"
#: The transient (``durable: false``) automation that fired the run.
TRANSIENT_KEY: Final = "$transient"
#: On a SKIPPED row that records a *range* of instants (a parked overlap): ``{through, instants}``, the
#: last instant (ISO UTC) and how many consecutive instants from ``scheduled_for`` the one row stands for.
SKIPPED_KEY: Final = "$skipped"
#: ``True`` on an ad hoc request asked as a dry run: the executor's ``dry_run`` runs instead of ``execute``.
DRY_RUN_KEY: Final = "$dry_run"

#: The reason of a run canceled by disabling / deleting its automation — the store's word for stored ones
#: (on the run row), used for transient ones' rows and for every ``run.canceled`` event alike.
CANCELED_DISABLED: Final = "automation_disabled"
CANCELED_DELETED: Final = "automation_deleted"
#: The reason of a run planned ahead of its instant (fire-ahead) that an edit withdrew before it started: the
#: instant is planned again from the edited automation (the withdrawn row's dedupe key is ``withdrawn:<id>``).
CANCELED_UPDATED: Final = "automation_updated"


def owner_snapshot(owner_id: str, scopes: Iterable[str], agent_id: str | None = None) -> dict[str, Any]:
    """The value of :data:`OWNER_KEY`: the owner and the scopes the run may use, sorted (stable JSON),
    and the agent of the owner's it acts as (an agent-bound key's request, an agent's automation)."""
    snapshot: dict[str, Any] = {"id": owner_id, "scopes": sorted(scopes)}
    if agent_id is not None:
        snapshot["agent_id"] = agent_id
    return snapshot


def acting_agent(context: Mapping[str, Any]) -> str | None:
    """The agent id of a run's owner snapshot; None when the run acts as its owner itself."""
    owner = context.get(OWNER_KEY)
    agent = owner.get("agent_id") if isinstance(owner, Mapping) else None
    return agent if isinstance(agent, str) else None


def skipped_range(through: str, instants: int) -> dict[str, Any]:
    """The value of :data:`SKIPPED_KEY`."""
    return {"through": through, "instants": instants}


def instants_of(context: Mapping[str, Any]) -> int:
    """How many scheduled instants a run's row records: a range's count, else one."""
    skipped = context.get(SKIPPED_KEY)
    count = skipped.get("instants") if isinstance(skipped, Mapping) else None
    return count if isinstance(count, int) and count > 0 else 1
