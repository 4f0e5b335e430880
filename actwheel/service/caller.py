"""Who asks: the identity every face hands to the service layer with each use case."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actwheel.run_context import owner_snapshot

__all__ = ["Caller", "caller_snapshot"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks: the owner of what gets created, and the scopes they hold."""

    owner_id: str
    scopes: frozenset[str] = frozenset({"*"})


def caller_snapshot(caller: Caller) -> dict[str, Any]:
    """The run-context owner snapshot of a run ``caller`` asked for."""
    return owner_snapshot(caller.owner_id, caller.scopes)
