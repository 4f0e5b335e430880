"""actwheel.wheel: the hierarchical timing wheel that holds the near horizon of timers.

See :mod:`actwheel.wheel.timing_wheel` for the design (buckets, overflow levels, cost).
"""

from __future__ import annotations

from actwheel.wheel.timing_wheel import TimingWheel

__all__ = ["TimingWheel"]
