"""One exponential backoff for every retry loop: actors, timers, webhooks, transactions, run retries.

Each caller keeps its own numbers (base, cap, multiplier, jitter); the formula lives here once::

    delay = min(max_s, base_s * multiplier ** (attempt - 1)) * U(jitter)

Jitter is a range of factors: :data:`NO_JITTER` for a fixed schedule, :data:`EQUAL_JITTER`
(half fixed, half random: losers of one race spread out yet never retry at once), or
:func:`spread` for ``±fraction`` around the delay.
"""

from __future__ import annotations

import math
import random

__all__ = ["EQUAL_JITTER", "NO_JITTER", "exponential_delay", "spread"]

#: No randomness: the delay is the capped exponential itself.
NO_JITTER: tuple[float, float] = (1.0, 1.0)
#: Between half and all of the capped delay ("equal jitter").
EQUAL_JITTER: tuple[float, float] = (0.5, 1.0)


def spread(fraction: float) -> tuple[float, float]:
    """Jitter of ``±fraction`` around the delay (``0.1`` → factors 0.9 to 1.1)."""
    return (1.0 - fraction, 1.0 + fraction)


def exponential_delay(
    attempt: int,
    *,
    base_s: float,
    max_s: float,
    multiplier: float = 2.0,
    jitter: tuple[float, float] = NO_JITTER,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based; below 1 counts as 1), never negative.

    Huge attempt numbers (a supervisor restarting an actor for days) saturate at ``max_s``
    instead of overflowing.
    """
    ceiling = min(max_s, _grown(base_s, multiplier, max(0, attempt - 1)))
    low, high = jitter
    if low == high == 1.0:
        return float(ceiling)
    return max(0.0, ceiling * (rng or random).uniform(low, high))  # jitter, not cryptography


def _grown(base_s: float, multiplier: float, exponent: int) -> float:
    try:
        return float(base_s * multiplier**exponent)
    except OverflowError:
        return math.inf
