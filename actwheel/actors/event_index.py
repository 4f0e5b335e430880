"""Which automations an incoming business event fires.

Business events are published by other services to the events exchange under
their own routing keys (anything outside actwheel's namespaces). The planner's
event queue is bound to the pattern of every enabled event automation;
bindings only ever grow (a stale binding brings events nobody matches, which
are acked and dropped). The index is read from storage at start, refreshed
when an automation changes on this instance, and at least every
``max_age_s`` (another instance's change is seen within that window).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from actwheel.clock import Clock
from actwheel.storage.base import Store
from actwheel.storage.records import Automation, AutomationStatus
from actwheel.topics import topic_matches

__all__ = ["EventIndex"]


@dataclass(frozen=True, slots=True)
class _Entry:
    pattern: str
    automation: Automation


class EventIndex:
    def __init__(self, *, store: Store, clock: Clock, max_age_s: float = 30.0, page: int = 5_000) -> None:
        self._store = store
        self._clock = clock
        self._max_age = timedelta(seconds=max_age_s)
        self._page = page
        self._entries: tuple[_Entry, ...] = ()
        self._loaded_at: datetime | None = None

    @property
    def patterns(self) -> frozenset[str]:
        return frozenset(e.pattern for e in self._entries)

    def stale(self) -> bool:
        return self._loaded_at is None or self._clock.now() - self._loaded_at > self._max_age

    def invalidate(self) -> None:
        self._loaded_at = None

    async def refresh(self) -> frozenset[str]:
        """Reload from storage; returns the patterns now indexed."""
        entries: list[_Entry] = []
        after_id: str | None = None
        while True:
            async with self._store.transaction() as tx:
                page = await tx.automations.query(enabled=True, status=AutomationStatus.ACTIVE,
                                                  after_id=after_id, limit=self._page)
            entries.extend(_Entry(a.trigger["routing_key"], a) for a in page if a.trigger.get("type") == "event")
            if len(page) < self._page:
                break
            after_id = page[-1].id
        self._entries = tuple(entries)
        self._loaded_at = self._clock.now()
        return self.patterns

    def matching(self, routing_key: str) -> list[Automation]:
        return [e.automation for e in self._entries if topic_matches(e.pattern, routing_key)]
