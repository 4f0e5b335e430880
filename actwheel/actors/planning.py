"""Pure planning: which runs an automation's due instants become. No IO.

Given an automation whose cursor is at ``next_run_at`` and a due announcement
for ``scheduled_for``, every instant from the cursor up to ``scheduled_for``
is planned (announcements may arrive late or out of order; the dedupe key
``schedule:<instant>`` makes planning one twice harmless):

- misfire: an instant older than ``grace_s`` is late. ``fire_once`` fires the
  latest late instant up to ``scheduled_for`` (none of this plan's when the
  cap cut it short: the plan that reaches ``scheduled_for`` fires it) and records the others
  SKIPPED(misfire); ``skip`` records them all SKIPPED(misfire);
- overlap: while previous runs are still going, ``skip`` records the instant
  SKIPPED(overlap); ``buffer_one`` queues at most one beyond the running one;
  ``allow`` queues every instant;
- a banned owner: SKIPPED(owner_inactive);
- with fire-ahead on (``plan_ahead``), an instant still ahead of ``now`` (the ticker announced it up to
  its lead window early) is planned *ahead*: PENDING with ``not_before`` = the instant, and the overlap
  rule is not applied to it here but when it is claimed, at the instant
  (:meth:`ExecutorRouter.claim_and_start`), against the runs going then;
- parked overlap (``overlapped_until``, see :mod:`actwheel.actors.parking`): the instants up to the last
  time the automation was seen busy are SKIPPED(overlap), folded into ONE row, a *range*
  (``through`` / ``count``), whatever the misfire rule would have said of them by now;
- the cursor moves to the first fire after ``scheduled_for`` (``None``: COMPLETED).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from actwheel.messages import DueItem
from actwheel.policy import Policy
from actwheel.storage.records import Automation, AutomationStatus
from actwheel.triggers import Trigger, parse

__all__ = ["MAX_INSTANTS", "ParsedSpecs", "Plan", "PlannedInstant", "keep_latest", "latest_per_automation",
           "only_overlapped", "plan_instants", "plannable"]

#: At most this many instants are planned per announcement; a longer backlog is
#: recorded up to here and the cursor continues from the last one (the next
#: announcement plans the rest).
MAX_INSTANTS = 1000


@dataclass(frozen=True, slots=True)
class PlannedInstant:
    at: datetime
    skip_reason: str | None  # None = fire (PENDING)
    #: A range: the last of the ``count`` consecutive instants from ``at`` this one row records.
    through: datetime | None = None
    count: int = 1
    #: Planned before its instant (fire-ahead): the run may not start before ``at`` (``not_before``), and
    #: its overlap check is taken when it is claimed.
    ahead: bool = False


@dataclass(frozen=True, slots=True)
class Plan:
    instants: tuple[PlannedInstant, ...]
    new_next_run_at: datetime | None


def plan_instants(
    *,
    trigger: Trigger,
    cursor: datetime,
    scheduled_for: datetime,
    now: datetime,
    policy: Policy,
    busy: int,
    owner_active: bool,
    overlapped_until: datetime | None = None,
    plan_ahead: bool = False,
) -> Plan:
    """The plan for moving ``cursor`` past ``scheduled_for`` (``cursor <= scheduled_for``).

    ``plan_ahead`` (fire-ahead on): an instant after ``now`` is planned ahead (see the module's notes);
    off, every instant is planned as due, as an announcement that came early by a clock's skew always was.

    ``busy``: how many runs of the automation are still going (``True`` counts as one).
    ``overlapped_until``: a parked automation's last busy sighting; its instants up to then are one
    SKIPPED(overlap) range (unless the owner is banned: owner_inactive, one row each, as always).
    """
    instants, following = _instants(trigger, cursor, scheduled_for)
    overlapped: list[datetime] = []
    if overlapped_until is not None and owner_active:  # overlapped under the policy of their time: skip
        overlapped = [at for at in instants if at <= overlapped_until]
        instants = instants[len(overlapped):]
    grace = timedelta(seconds=policy.grace_s)
    late = [at for at in instants if now - at > grace]
    backlog_goes_on = following is not None and following <= scheduled_for  # the cap cut this plan short
    fire_late = late[-1] if late and policy.misfire == "fire_once" and not backlog_goes_on else None
    planned = []
    queued = 0
    for at in instants:
        reason = _skip_reason(at, late_set=late, fire_late=fire_late, owner_active=owner_active)
        if plan_ahead and at > now:  # ahead: overlap is judged at the instant, against what is going then
            planned.append(PlannedInstant(at, reason, ahead=reason is None))
            continue
        if reason is None and _overlaps(policy.overlap, busy=int(busy), queued=queued):
            reason = "overlap"
        if reason is None:
            queued += 1
        planned.append(PlannedInstant(at, reason))
    return Plan((*_overlap_range(overlapped), *planned), following)


def only_overlapped(plan: Plan) -> bool:
    """Every instant of ``plan`` is SKIPPED(overlap), and the plan neither completes the automation nor
    was cut short by the cap: what a busy automation's plan may be parked as (nothing to write yet)."""
    return (0 < len(plan.instants) < MAX_INSTANTS and plan.new_next_run_at is not None
            and all(i.skip_reason == "overlap" and i.count == 1 for i in plan.instants))


def _overlap_range(overlapped: list[datetime]) -> tuple[PlannedInstant, ...]:
    if not overlapped:
        return ()
    if len(overlapped) == 1:
        return (PlannedInstant(overlapped[0], "overlap"),)
    return (PlannedInstant(overlapped[0], "overlap", through=overlapped[-1], count=len(overlapped)),)


def latest_per_automation(items: Sequence[DueItem]) -> list[DueItem]:
    """One item per automation, its latest instant: planning up to it covers the earlier ones."""
    latest: dict[str, DueItem] = {}
    keep_latest(latest, items)
    return list(latest.values())


def keep_latest(latest: dict[str, DueItem], items: Sequence[DueItem]) -> None:
    """Merge ``items`` into ``latest`` (by automation id), keeping each automation's latest instant.

    In place, so that a queue of due items waiting to be fired (the ticker's transient firing) merges
    what arrives meanwhile by the same rule as one announcement's items.
    """
    for item in items:
        seen = latest.get(item.automation_id)
        if seen is None or item.scheduled_for > seen.scheduled_for:
            latest[item.automation_id] = item


class ParsedSpecs:
    """Parsed trigger and policy per automation version: a per-second schedule is parsed once, not every second.

    Speed only: keyed by ``(id, version)`` (every change bumps the version, stored or transient), bounded,
    and parsing is a pure function of the spec. The planner and the transient timers each hold one.
    """

    def __init__(self, capacity: int = 100_000) -> None:
        self._capacity = capacity
        self._specs: dict[tuple[str, int], tuple[Trigger, Policy]] = {}

    def get(self, automation: Automation) -> tuple[Trigger, Policy]:
        """:raises InvalidTrigger, InvalidInput: the trigger or the policy does not parse (nothing is cached)"""
        key = (automation.id, automation.version)
        specs = self._specs.get(key)
        if specs is None:
            specs = (parse(automation.trigger), Policy.parse(automation.policy))
            if len(self._specs) >= self._capacity:
                self._specs.clear()
            self._specs[key] = specs
        return specs


def plannable(automation: Automation, scheduled_for: datetime) -> bool:
    """Enabled, ACTIVE and not already past this instant (a repeated or stale announcement plans nothing)."""
    return (automation.enabled and automation.status is AutomationStatus.ACTIVE
            and automation.next_run_at is not None and automation.next_run_at <= scheduled_for)


def _overlaps(overlap: str, *, busy: int, queued: int) -> bool:
    """Whether one more run would break the overlap policy (``queued``: fired in this plan)."""
    if overlap == "allow":
        return False
    going = busy + queued
    return going >= (2 if overlap == "buffer_one" else 1)


def _instants(trigger: Trigger, cursor: datetime, scheduled_for: datetime) -> tuple[list[datetime], datetime | None]:
    """The instants from ``cursor`` up to ``scheduled_for`` (at most MAX_INSTANTS), and the one after them."""
    instants = [cursor]
    following = trigger.next_after(cursor)
    while following is not None and following <= scheduled_for and len(instants) < MAX_INSTANTS:
        instants.append(following)
        following = trigger.next_after(following)
    return instants, following


def _skip_reason(at: datetime, *, late_set: list[datetime], fire_late: datetime | None,
                 owner_active: bool) -> str | None:
    if not owner_active:
        return "owner_inactive"
    if at in late_set and at != fire_late:
        return "misfire"
    return None
