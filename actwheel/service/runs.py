"""The run use cases every face shares: list runs, read one with its audit trail."""

from __future__ import annotations

from dataclasses import dataclass

from actwheel.service.authorize import listing_owner, owner_by_id, require
from actwheel.service.caller import Caller
from actwheel.storage.base import Store
from actwheel.storage.records import AuditEntry, Run, RunStatus

__all__ = ["READ", "RunService", "RunWithTrail"]

READ = "run:read"


@dataclass(frozen=True, slots=True)
class RunWithTrail:
    """A run and its append-only audit trail, oldest entry first."""

    run: Run
    audit: list[AuditEntry]


class RunService:
    def __init__(self, *, store: Store) -> None:
        self._store = store

    async def query(self, caller: Caller, *, owner_id: str | None = None, automation_id: str | None = None,
                    status: RunStatus | None = None, limit: int = 100) -> list[Run]:
        """The caller's runs (another ``owner_id`` needs ``admin:read``) matching every filter, newest first.

        :raises PermissionDenied: no ``run:read``; another owner without ``admin:read``
        """
        require(caller, "run.read", [READ])
        owner = listing_owner(caller, owner_id)
        async with self._store.transaction() as tx:
            return await tx.runs.query(owner_id=owner, automation_id=automation_id,
                                       statuses=[status] if status else None, limit=limit)

    async def get(self, caller: Caller, run_id: str) -> RunWithTrail:
        """:raises NotFound: no run ``run_id`` of the caller's (another owner's answers the same)"""
        require(caller, "run.read", [READ])
        async with self._store.transaction() as tx:
            run = await tx.runs.get(run_id, owner_id=owner_by_id(caller))
            trail = await tx.audit.trail(run.id)
        return RunWithTrail(run, trail)
