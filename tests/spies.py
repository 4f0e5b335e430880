"""Counting spies on a repository class's async methods: how often a read the code may use was called."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import pytest


def count_calls(cls: type, names: Iterable[str], monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Wrap each async method ``names`` of ``cls`` to count its calls (undone with ``monkeypatch``)."""
    counts: Counter[str] = Counter()
    for name in names:
        original = getattr(cls, name)

        async def spy(self: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            counts[_name] += 1
            return await _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, spy)
    return counts
