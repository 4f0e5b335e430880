"""Which automations an incoming business event fires.

Business events are published by other services to the events exchange under
their own routing keys (anything outside actwheel's namespaces). The planner's
event queue is bound to the pattern of every enabled event automation, and
unbound from a pattern once no enabled automation uses it, so that a mandatory
event nobody waits for comes back unroutable. The index counts the entries of
each pattern; a change that drops the last one *releases* the pattern
(:attr:`Applied.released`). The index is per instance while the automations are
shared, so a released pattern is only a candidate: the planner unbinds it, then
asks the database (:meth:`EventIndex.in_use`) and binds it again if an enabled
event automation still uses it (another instance's, or one created meanwhile).

The index is read in full at start, then kept by applying each change from
the changed automation alone (:meth:`EventIndex.apply`): a change costs one
row, not a read of every automation (creating N automations used to cost
O(N²) reads, on the loop that also executes runs), and a change whose message says
the automation listens to no event (``AutomationChanged.may_listen``: another trigger
type, a delete) costs no read at all unless this index holds it. The change queue is shared
by the planners of every instance, so each change reaches one of them: the
full read is repeated at least every ``max_age_s`` (another instance's change
is seen within that window), and it reads only the enabled event automations,
through their own index (``event_automations``), not the whole table.

Speed and routing only: the planner re-reads the matched rows before it
creates a run, so a stale entry (disabled, edited, deleted meanwhile) fires
nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from actwheel.clock import Clock
from actwheel.storage.base import Store
from actwheel.storage.records import Automation, AutomationStatus
from actwheel.topics import topic_matches

__all__ = ["Applied", "EventIndex", "event_pattern", "trigger_pattern"]


@dataclass(frozen=True, slots=True)
class _Entry:
    pattern: str
    automation: Automation


@dataclass(frozen=True, slots=True)
class Applied:
    """What one change did to the index.

    :ivar pattern: the pattern the automation is indexed under now (bind it), or ``None``
    :ivar released: a pattern the automation used before the change that no entry of this index uses
        any more (a candidate to unbind, see the module docstring), or ``None``
    """

    pattern: str | None
    released: str | None = None


def trigger_pattern(automation: Automation) -> str | None:
    """The routing-key pattern of ``automation``'s event trigger, enabled or not; ``None`` for other triggers."""
    if automation.trigger.get("type") != "event":
        return None
    pattern = automation.trigger.get("routing_key")
    return pattern if isinstance(pattern, str) else None


def event_pattern(automation: Automation) -> str | None:
    """The routing-key pattern ``automation`` listens to, or ``None`` when it fires on no event now
    (another trigger type, disabled, paused or completed)."""
    if not automation.enabled or automation.status is not AutomationStatus.ACTIVE:
        return None
    return trigger_pattern(automation)


class EventIndex:
    def __init__(self, *, store: Store, clock: Clock, max_age_s: float = 30.0, page: int = 5_000) -> None:
        self._store = store
        self._clock = clock
        self._max_age = timedelta(seconds=max_age_s)
        self._page = page
        self._entries: dict[str, _Entry] = {}
        self._uses: Counter[str] = Counter()
        self._loaded_at: datetime | None = None

    @property
    def patterns(self) -> frozenset[str]:
        return frozenset(self._uses)

    def stale(self) -> bool:
        return self._loaded_at is None or self._clock.now() - self._loaded_at > self._max_age

    def invalidate(self) -> None:
        self._loaded_at = None

    async def refresh(self) -> frozenset[str]:
        """Reload every enabled event automation (paged, through the store's event index); returns the
        patterns now indexed."""
        entries: dict[str, _Entry] = {}
        after_id = ""
        while True:
            async with self._store.transaction() as tx:
                page = await tx.automations.event_automations(after_id=after_id, limit=self._page)
            entries.update(_entries_of(page))
            if len(page) < self._page:
                break
            after_id = page[-1].id
        self._entries = entries
        self._uses = Counter(e.pattern for e in entries.values())
        self._loaded_at = self._clock.now()
        return self.patterns

    def holds(self, automation_id: str) -> bool:
        """Whether ``automation_id`` is indexed here (an enabled event automation as last read)."""
        return automation_id in self._entries

    def apply(self, automation_id: str, current: Automation | None) -> Applied:
        """Apply one change: ``current`` is the automation as stored now (``None``: deleted).

        Indexed while it is an enabled event automation, dropped otherwise (a disable, a delete, an
        edit to another trigger). A read older than the entry (a slower handler of an earlier change)
        changes nothing. The pattern it used before (its entry's, else its stored trigger's: a change
        another instance indexed) is released when no entry uses it any more.
        """
        seen = self._entries.get(automation_id)
        if current is not None and seen is not None and current.version < seen.automation.version:
            return Applied(seen.pattern)
        before = seen.pattern if seen is not None else (None if current is None else trigger_pattern(current))
        pattern = None if current is None else event_pattern(current)
        if seen is not None:
            self._uses.subtract((seen.pattern,))
            self._uses += Counter()  # drops the patterns whose count reached zero
        if pattern is None or current is None:
            self._entries.pop(automation_id, None)
        else:
            self._entries[automation_id] = _Entry(pattern, current)
            self._uses[pattern] += 1
        released = before if before is not None and before != pattern and before not in self._uses else None
        return Applied(pattern, released)

    async def in_use(self, patterns: Collection[str]) -> frozenset[str]:
        """Which of ``patterns`` an enabled event automation in the database uses now, whoever indexed it:
        the truth a release is checked against (paged like :meth:`refresh`, stops once all are found)."""
        wanted, found = frozenset(patterns), set[str]()
        after_id = ""
        while wanted - found:
            async with self._store.transaction() as tx:
                page = await tx.automations.event_automations(after_id=after_id, limit=self._page)
            found.update(p for p in map(event_pattern, page) if p in wanted)
            if len(page) < self._page:
                break
            after_id = page[-1].id
        return frozenset(found)

    def matching(self, routing_key: str) -> list[Automation]:
        return [e.automation for e in self._entries.values() if topic_matches(e.pattern, routing_key)]


def _entries_of(page: list[Automation]) -> dict[str, _Entry]:
    """The page's event automations by id (the query filters already; this keeps the rule in one place)."""
    patterns = {a.id: (event_pattern(a), a) for a in page}
    return {i: _Entry(p, a) for i, (p, a) in patterns.items() if p is not None}
