"""A token bucket on an injected clock: how much of something may pass per second, with a burst.

The planner lets small due announcements (a quiet automation's instant) pass its backlog bound through
one of these, so that a burst of others does not hold them, while the extra planning they cost stays
bounded (:data:`actwheel.actors.planner.QUIET_PER_S`). Speed only: what passes is planned exactly as a
held announcement would be once the backlog drains.
"""

from __future__ import annotations

from datetime import datetime

from actwheel.clock import Clock

__all__ = ["Allowance"]


class Allowance:
    """``per_s`` tokens a second, at most ``burst`` saved up; :meth:`take` is all or nothing."""

    def __init__(self, clock: Clock, *, per_s: float, burst: float) -> None:
        self._clock = clock
        self._per_s = per_s
        self._burst = burst
        self._tokens = burst
        self._at: datetime = clock.now()

    def take(self, count: float) -> bool:
        """Spend ``count`` tokens if there are that many now; ``False`` (and nothing spent) otherwise."""
        self._refill()
        if count > self._tokens:
            return False
        self._tokens -= count
        return True

    def charge(self, count: float) -> None:
        """Spend ``count`` more after the fact (what a pass turned out to cost beyond what it took): the
        tokens may go below zero, and nothing passes until they are back."""
        if count > 0:
            self._refill()
            self._tokens -= count

    def _refill(self) -> None:
        now = self._clock.now()
        elapsed = max(0.0, (now - self._at).total_seconds())
        self._tokens = min(self._burst, self._tokens + elapsed * self._per_s)
        self._at = now
