"""Test clocks shared across suites: a virtual clock whose sleeps return at once."""

from __future__ import annotations

from actwheel.clock import VirtualClock


class FastClock(VirtualClock):
    """A virtual clock whose ``sleep`` returns at once, moving time forward and recording the wait."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if seconds > 0:
            self.advance(seconds)
