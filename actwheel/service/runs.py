"""The run use cases every face shares: list runs, read one with its audit trail.

Runs are the owner's, filtered in SQL. An agent-bound key reads only the runs of its agent's stored
automations (by automation: a run carries no agent of its own).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from actwheel.errors import InvalidInput, NotFound
from actwheel.service.authorize import ADMIN_READ, listing_owner, owner_by_id, require, sees
from actwheel.service.caller import Caller
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import AuditEntry, Origin, Run, RunStatus

__all__ = ["READ", "RunService", "RunWithTrail", "parse_run_cursor", "run_cursor"]

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
                    status: RunStatus | None = None, limit: int = 100,
                    statuses: Sequence[RunStatus] | None = None, created_after: datetime | None = None,
                    created_before: datetime | None = None, action_type: str | None = None,
                    origin: Origin | None = None, before: str | None = None,
                    any_owner: bool = False) -> list[Run]:
        """The caller's runs (another ``owner_id`` needs ``admin:read``) matching every filter, newest first.

        ``status`` and ``statuses`` combine (any of them); ``before``: the cursor of the next page
        (:func:`run_cursor` of the last run of this one); ``any_owner``: every owner's runs (``admin:read``).

        :raises PermissionDenied: no ``run:read``; another owner (or ``any_owner``) without ``admin:read``
        :raises InvalidInput: a cursor that is not one of :func:`run_cursor`'s
        """
        require(caller, "run.read", [READ])
        owner = _listed_owner(caller, owner_id, any_owner)
        wanted = [*([status] if status else []), *(statuses or [])]
        async with self._store.transaction() as tx:
            await _agent_may_list(tx, caller, automation_id)
            return await tx.runs.query(owner_id=owner, automation_id=automation_id, statuses=wanted or None,
                                       created_after=created_after, created_before=created_before,
                                       action_type=action_type, origin=origin,
                                       older_than=None if before is None else parse_run_cursor(before), limit=limit)

    async def waiting_ids(self, caller: Caller, *, statuses: Sequence[RunStatus], owner_id: str | None = None,
                          automation_id: str | None = None, created_after: datetime | None = None,
                          created_before: datetime | None = None, action_type: str | None = None,
                          origin: Origin | None = None, limit: int = 100) -> list[str]:
        """The ids of the caller's waiting runs (``statuses``: PENDING and/or RETRY_WAIT) matching every
        filter, newest first, at most ``limit``, in one statement through the open runs (a bulk
        cancel's dry-run count, and its targets): the same owner and agent rules as :meth:`query`.

        :raises PermissionDenied: no ``run:read``; another owner without ``admin:read``
        :raises InvalidInput: a status that is not a waiting one
        """
        require(caller, "run.read", [READ])
        owner = _listed_owner(caller, owner_id, any_owner=False)
        async with self._store.transaction() as tx:
            await _agent_may_list(tx, caller, automation_id)
            return await tx.runs.waiting_ids(statuses, owner_id=owner, automation_id=automation_id,
                                             created_after=created_after, created_before=created_before,
                                             action_type=action_type, origin=origin, limit=limit)

    async def latest_of(self, caller: Caller, automation_ids: Sequence[str], *,
                        owner_id: str | None = None) -> dict[str, Run]:
        """The newest run of each of ``automation_ids`` that is the caller's (another ``owner_id`` needs
        ``admin:read``), by automation id, in one statement (the automations page's "last run").
        An automation without a run, or not the caller's, is absent; an agent-bound key sees only the
        runs of its agent's stored automations.

        :raises PermissionDenied: no ``run:read``; another owner without ``admin:read``
        """
        require(caller, "run.read", [READ])
        owner = listing_owner(caller, owner_id)
        async with self._store.transaction() as tx:
            ids = list(automation_ids) if caller.agent_id is None else await _agent_automation_ids(
                tx, caller, automation_ids)
            return await tx.runs.latest_of(ids, owner_id=owner)

    async def get(self, caller: Caller, run_id: str) -> RunWithTrail:
        """:raises NotFound: no run ``run_id`` of the caller's (another owner's answers the same)"""
        require(caller, "run.read", [READ])
        async with self._store.transaction() as tx:
            run = await tx.runs.get(run_id, owner_id=owner_by_id(caller))
            if caller.agent_id is not None and (
                    run.automation_id is None or not await _agent_sees(tx, caller, run.automation_id)):
                raise NotFound("run", run_id)
            trail = await tx.audit.trail(run.id)
        return RunWithTrail(run, trail)


def run_cursor(run: Run) -> str:
    """The cursor of the page after ``run`` (newest first): opaque, URL-safe."""
    return base64.urlsafe_b64encode(f"{run.created_at.isoformat()}|{run.id}".encode()).decode().rstrip("=")


def parse_run_cursor(cursor: str) -> tuple[datetime, str]:
    """:raises InvalidInput: naming ``before``: not a cursor :func:`run_cursor` made"""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, _, run_id = text.partition("|")
        instant = datetime.fromisoformat(at)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput("before", cursor, "the cursor of a previous page ('next' of its answer)") from None
    if not run_id or instant.tzinfo is None:
        raise InvalidInput("before", cursor, "the cursor of a previous page ('next' of its answer)")
    return instant, run_id


async def _agent_sees(tx: Transaction, caller: Caller, automation_id: str) -> bool:
    try:
        await _agent_automation(tx, caller, automation_id)
    except NotFound:
        return False
    return True


def _listed_owner(caller: Caller, owner_id: str | None, any_owner: bool) -> str | None:
    """Whose runs a listing reads: ``owner_id`` or the caller's (another needs ``admin:read``); None,
    every owner's, for ``any_owner`` (``admin:read``)."""
    if any_owner and owner_id is None:
        require(caller, "list every owner's runs", [ADMIN_READ])
        return None
    return listing_owner(caller, owner_id)


async def _agent_may_list(tx: Transaction, caller: Caller, automation_id: str | None) -> None:
    """An agent-bound key lists the runs of one of its agent's automations only.

    :raises InvalidInput: an agent-bound key without ``automation_id``
    :raises NotFound: ``automation_id`` is not its agent's
    """
    if caller.agent_id is None:
        return
    if automation_id is None:
        raise InvalidInput("automation_id", None, "an automation of the key's agent "
                           f"{caller.agent_id!r}: an agent-bound key lists runs per automation")
    await _agent_automation(tx, caller, automation_id)


async def _agent_automation_ids(tx: Transaction, caller: Caller, automation_ids: Sequence[str]) -> list[str]:
    """Those of ``automation_ids`` that are stored automations of the caller's agent (one statement)."""
    stored = await tx.automations.get_many(automation_ids)
    return [i for i, a in stored.items() if a.owner_id == caller.owner_id and sees(caller, a.agent_id)]


async def _agent_automation(tx: Transaction, caller: Caller, automation_id: str) -> None:
    """:raises NotFound: ``automation_id`` is not an automation of the caller's agent (transient ones
    included: their runs carry their ``tr_`` id, and the agent label lives in memory — refused here)"""
    automation = await tx.automations.get(automation_id, owner_id=caller.owner_id)
    if not sees(caller, automation.agent_id):
        raise NotFound("automation", automation_id)
