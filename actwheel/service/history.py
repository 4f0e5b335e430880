"""An automation's change history: who created, edited, enabled, disabled or deleted it, when, and
the before/after of each change (table ``automation_history``, migration 0008).

:func:`record_change` is called by :mod:`actwheel.service.automations` inside the transaction of the
change itself, so a change and its history row commit together or not at all. What is recorded is
the automation's own fields (name, trigger, action type and config, policy, labels, enabled, status,
version): action configs hold secret *references* (``{"$secret": name}``), never values, and the
row names the principal and the key id only. Non-durable (``tr_``) automations live in memory and
have no history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actwheel.errors import NotFound
from actwheel.service.authorize import owner_by_id, require, sees
from actwheel.service.caller import Caller
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import Automation, AutomationHistoryEntry, NewAutomationHistory

__all__ = ["HistoryService", "automation_view", "record_change", "record_creates"]

READ = "automation:read"

#: The fields a history row compares (what an edit can change).
_FIELDS = ("name", "trigger", "action_type", "action_config", "policy", "labels", "enabled", "status",
           "next_run_at", "version")


def automation_view(automation: Automation) -> dict[str, Any]:
    """The recorded fields of ``automation`` as JSON values."""
    view: dict[str, Any] = {name: getattr(automation, name) for name in _FIELDS}
    view["status"] = str(automation.status)
    view["next_run_at"] = None if automation.next_run_at is None else automation.next_run_at.isoformat()
    return view


def _diff(before: Automation, after: Automation) -> tuple[dict[str, Any], dict[str, Any]]:
    old, new = automation_view(before), automation_view(after)
    changed = [name for name in _FIELDS if old[name] != new[name]]
    return {k: old[k] for k in changed}, {k: new[k] for k in changed}


async def record_change(tx: Transaction, caller: Caller, change: str, *, before: Automation | None = None,
                        after: Automation | None = None) -> AutomationHistoryEntry:
    """Record one change in ``tx`` (the transaction of the change). ``created``: ``after`` only;
    ``deleted``: ``before`` only; otherwise both, and only the fields that differ are kept."""
    subject = after or before
    assert subject is not None, "a change has a before or an after"
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    if before is not None and after is not None:
        old, new = _diff(before, after)
    else:
        old = None if before is None else automation_view(before)
        new = None if after is None else automation_view(after)
    return await tx.automation_history.append(NewAutomationHistory(
        automation_id=subject.id, owner_id=subject.owner_id, change=change, actor_id=caller.who,
        key_id=caller.key_id, before=old, after=new))


async def record_creates(tx: Transaction, created: Sequence[tuple[Caller, Automation]]) -> None:
    """Record a batch of creates in ``tx`` in one statement: :func:`record_change` ``"created"`` each."""
    await tx.automation_history.append_many([NewAutomationHistory(
        automation_id=a.id, owner_id=a.owner_id, change="created", actor_id=caller.who, key_id=caller.key_id,
        before=None, after=automation_view(a)) for caller, a in created])


class HistoryService:
    """Reading the history: ``automation:read`` and owner isolation, deleted automations included."""

    def __init__(self, *, store: Store) -> None:
        self._store = store

    async def history(self, caller: Caller, automation_id: str, *, after_seq: int | None = None,
                      limit: int = 100) -> list[AutomationHistoryEntry]:
        """The changes of ``automation_id``, oldest first (page with ``after_seq``: the last ``seq`` seen).

        :raises PermissionDenied: no ``automation:read``
        :raises NotFound: nothing recorded for an automation of the caller's (another owner's answers the
            same; an agent-bound key sees only its agent's automations)
        """
        require(caller, "automation.history", [READ])
        async with self._store.transaction() as tx:
            entries = await tx.automation_history.for_automation(
                automation_id, owner_id=owner_by_id(caller), after_seq=after_seq, limit=limit)
            if not entries and after_seq is None:
                raise NotFound("automation", automation_id)
            if caller.agent_id is not None and not await _agent_reaches(tx, caller, automation_id, entries):
                raise NotFound("automation", automation_id)
        return entries


async def _agent_reaches(tx: Transaction, caller: Caller, automation_id: str,
                         entries: list[AutomationHistoryEntry]) -> bool:
    """An agent-bound key reads the history of its agent's automations: by the stored automation's
    label, or for a deleted one by the labels it had."""
    try:
        automation = await tx.automations.get(automation_id, owner_id=caller.owner_id)
    except NotFound:
        labels = next((e.before or e.after or {} for e in reversed(entries) if (e.before or e.after or {})
                       .get("labels") is not None), {}).get("labels") or {}
        return sees(caller, labels.get("agent_id"))
    return sees(caller, automation.agent_id)
