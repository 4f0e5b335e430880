"""What planning reads from the database besides the automation: runs still going and owners' status.

Shared by the planner (stored automations) and the transient timers (``durable: false``), so that
overlap and banned owners are judged the same way for both.
"""

from __future__ import annotations

from actwheel.errors import NotFound
from actwheel.storage.base import Transaction
from actwheel.storage.records import ACTIVE_RUN_STATUSES, Automation, PrincipalStatus

__all__ = ["active_runs", "owner_activity"]


async def active_runs(tx: Transaction, automations: list[Automation]) -> dict[str, int]:
    """Runs still going per automation: a set for most, a count (up to 2) where ``buffer_one`` needs it."""
    if not automations:
        return {}
    busy = await tx.runs.active_automation_ids([a.id for a in automations])
    counts = dict.fromkeys(busy, 1)
    for a in automations:
        if a.id in busy and a.policy.get("overlap") == "buffer_one":
            going = await tx.runs.query(automation_id=a.id, statuses=list(ACTIVE_RUN_STATUSES), limit=2)
            counts[a.id] = len(going)
    return counts


async def owner_activity(tx: Transaction, owners: set[str]) -> dict[str, bool]:
    """Per owner: False when banned (their instants are SKIPPED(owner_inactive))."""
    activity = {}
    for owner in owners:
        try:
            activity[owner] = (await tx.principals.get(owner)).status is not PrincipalStatus.BANNED
        except NotFound:
            activity[owner] = True  # owners without a principal row are the local, implicit ones
    return activity
