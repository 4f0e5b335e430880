"""The obviously-correct model the timing wheel is checked against: a list kept sorted by (due, seq)."""

from __future__ import annotations

import bisect
import itertools
from typing import Any


class SortedListWheel:
    """Same contract as TimingWheel, O(n) everywhere, written to be read."""

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms
        self._entries: list[tuple[int, int, Any, Any]] = []  # (due, seq, key, item)
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return any(entry[2] == key for entry in self._entries)

    def due_ms_of(self, key: Any) -> int | None:
        return next((entry[0] for entry in self._entries if entry[2] == key), None)

    def schedule(self, key: Any, due_ms: int, item: Any) -> None:
        self.cancel(key)
        bisect.insort(self._entries, (due_ms, next(self._seq), key, item), key=lambda e: (e[0], e[1]))

    def cancel(self, key: Any) -> bool:
        for index, entry in enumerate(self._entries):
            if entry[2] == key:
                del self._entries[index]
                return True
        return False

    def advance(self, now_ms: int) -> list[Any]:
        self.now_ms = max(self.now_ms, now_ms)
        cut = 0
        while cut < len(self._entries) and self._entries[cut][0] <= self.now_ms:
            cut += 1
        fired = [entry[3] for entry in self._entries[:cut]]
        del self._entries[:cut]
        return fired

    def next_due_ms(self) -> int | None:
        return self._entries[0][0] if self._entries else None
