"""The reserved keys of a run's ``context`` and the words the engine writes on runs it cancels.

A run's context is free-form JSON for templates, except for keys starting with ``$``: the engine
owns those. They live here, once, because three layers read or write them — the service layer and
the planner when they build runs, the router when it dispatches them — and none of those may import
the others' helpers. Pure: no IO, no imports beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

__all__ = ["CANCELED_DELETED", "CANCELED_DISABLED", "DRY_RUN_KEY", "OWNER_KEY", "RESERVED_PREFIX",
           "TRANSIENT_KEY", "owner_snapshot"]

#: Every engine-owned context key starts with this; a request's own context may not use it.
RESERVED_PREFIX: Final = "$"
#: The owner snapshot ``{id, scopes}`` taken when the run was created (who asked, with what authority).
OWNER_KEY: Final = "$owner"
#: The transient (``durable: false``) automation that fired the run.
TRANSIENT_KEY: Final = "$transient"
#: ``True`` on an ad hoc request asked as a dry run: the executor's ``dry_run`` runs instead of ``execute``.
DRY_RUN_KEY: Final = "$dry_run"

#: The reason of a run canceled by disabling / deleting its automation — the store's word for stored ones
#: (on the run row), used for transient ones' rows and for every ``run.canceled`` event alike.
CANCELED_DISABLED: Final = "automation_disabled"
CANCELED_DELETED: Final = "automation_deleted"


def owner_snapshot(owner_id: str, scopes: Iterable[str]) -> dict[str, Any]:
    """The value of :data:`OWNER_KEY`: the owner and the scopes the run may use, sorted (stable JSON)."""
    return {"id": owner_id, "scopes": sorted(scopes)}
