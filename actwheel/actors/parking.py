"""Parked overlaps: busy ``overlap: skip`` automations whose instants wait in memory, not as rows.

Under overload every instant of a busy automation with the default overlap policy ``skip`` is
SKIPPED(overlap). Writing each as its own row (and its ``run.skipped`` event, and its CDC) costs
about what running it would: planning then starves execution, which is what made it overloaded.

So the planner *parks* such an automation instead: it writes nothing, leaves the cursor where it
is, and keeps here the latest instant announced and the latest instant *after which* it saw a run
still going (an instant, never a clock reading: instances' and the database's clocks differ). When
its run has ended (:meth:`ParkedOverlaps.to_check`, then :meth:`ParkedOverlaps.release`), the
planner plans from the cursor as usual with ``overlapped_until`` = that last sighting: every
instant up to it becomes ONE SKIPPED(overlap) row, a range, and the ones after it are judged by the
ordinary rules (the first fires). This instance's ticker does not announce a parked automation's
instants: it hands them to the planner (``Planner.keep_announced``), which keeps them here as it
would an announcement.

Speed only (invariant 5's "removable"): the truth is the cursor in the database. Losing this
memory (a crash, a restart, another instance planning the automation) loses no instant: the cursor
never moved, so the next plan of the automation records every instant from it, by the misfire rule
rather than the overlap one. Bounded: at :data:`PARK_CAPACITY` nothing more is parked (planned
row by row, as without parking). Pure: no IO, no clock of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

__all__ = ["PARK_CAPACITY", "PARK_CHECK_S", "PARK_FULL_CHECK_S", "ParkedOverlaps", "Release"]

#: How often the planner asks whether the parked automations with an instant waiting are still busy.
PARK_CHECK_S = 0.1
#: How often it asks that of every parked automation (one with no instant waiting: its range is written
#: at most this long after its run ends).
PARK_FULL_CHECK_S = 2.0
#: At most this many automations are parked per planner.
PARK_CAPACITY = 100_000


@dataclass(slots=True)
class _Parked:
    version: int
    scheduled_for: datetime  # the latest instant announced
    seen_busy_at: datetime  # a run of it was seen going after this instant had been announced
    ranged: bool = False  # parked again after a release that wrote a range and fired nothing


@dataclass(frozen=True, slots=True)
class Release:
    """Plan ``automation_id`` up to ``scheduled_for``: its instants up to ``seen_busy_at`` overlapped (the
    planner bounds that by the automation's last change when ``version`` is no longer its version)."""

    automation_id: str
    scheduled_for: datetime
    seen_busy_at: datetime
    version: int
    #: Its previous release wrote a range and fired nothing (its run had ended between two instants): the
    #: instant this release fires is no sign that it keeps up with its schedule.
    ranged: bool = False


class ParkedOverlaps:
    def __init__(self, capacity: int = PARK_CAPACITY) -> None:
        self._capacity = capacity
        self._parked: dict[str, _Parked] = {}

    def __len__(self) -> int:
        return len(self._parked)

    def __contains__(self, automation_id: object) -> bool:
        return automation_id in self._parked

    def park(self, automation_id: str, version: int, scheduled_for: datetime, seen_busy_at: datetime, *,
             ranged: bool = False) -> bool:
        """Park it (its plan up to ``scheduled_for`` was overlap skips only, a run seen going at
        ``seen_busy_at``; ``ranged``: see :attr:`Release.ranged`); ``False`` when full (plan it row by
        row instead)."""
        parked = self._parked.get(automation_id)
        if parked is None:
            if len(self._parked) >= self._capacity:
                return False
            self._parked[automation_id] = _Parked(version, scheduled_for, seen_busy_at, ranged)
            return True
        parked.version = version
        parked.scheduled_for = max(parked.scheduled_for, scheduled_for)
        parked.seen_busy_at = max(parked.seen_busy_at, seen_busy_at)
        parked.ranged = parked.ranged or ranged
        return True

    def absorb(self, automation_id: str, scheduled_for: datetime) -> bool:
        """An announcement of ``automation_id``: ``True`` when it is parked (its instant is kept here,
        to be judged at the next check), ``False`` when it should be planned."""
        parked = self._parked.get(automation_id)
        if parked is None:
            return False
        parked.scheduled_for = max(parked.scheduled_for, scheduled_for)
        return True

    def to_check(self, *, everything: bool) -> dict[str, datetime]:
        """The parked automations with an instant not yet seen overlapped (``everything``: all of them),
        each with the latest instant announced so far: a reading taken now covers up to there."""
        return {a: p.scheduled_for for a, p in self._parked.items() if everything or p.scheduled_for > p.seen_busy_at}

    def seen_busy(self, latest: dict[str, datetime]) -> None:
        """A run of each was still going after ``latest[id]`` had been announced (:meth:`to_check`'s
        instants, read before the query). The instant, not a clock reading, is what is kept: another
        instance's clock or the database's may differ from the ticker's that announced it."""
        for automation_id, instant in latest.items():
            parked = self._parked.get(automation_id)
            if parked is not None:
                parked.seen_busy_at = max(parked.seen_busy_at, instant)

    def release(self, automation_ids: Iterable[str]) -> list[Release]:
        """Unpark these (their runs have ended), each with what was kept of it."""
        released = []
        for automation_id in automation_ids:
            parked = self._parked.pop(automation_id, None)
            if parked is not None:
                released.append(Release(automation_id, parked.scheduled_for, parked.seen_busy_at, parked.version,
                                        parked.ranged))
        return released

    def restore(self, releases: Iterable[Release]) -> None:
        """Park again what a release that failed had taken (its plan did not commit)."""
        for r in releases:
            self.park(r.automation_id, r.version, r.scheduled_for, r.seen_busy_at, ranged=r.ranged)

    def clear(self) -> None:
        self._parked.clear()
