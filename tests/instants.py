"""The instants a set of run rows records, for the "every instant exactly once" checkers.

A row records its ``scheduled_for``; a SKIPPED(overlap) *range* (a parked overlap, docs/design.md
invariant 8) records ``$skipped.instants`` consecutive instants of the trigger from there. The
checkers expand ranges against the instants the trigger itself expects, so a range that covers an
instant twice or one the trigger never had is still caught (as a duplicate or an extra).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from actwheel.run_context import instants_of

__all__ = ["recorded_instants"]


def recorded_instants(rows: Iterable[tuple[datetime, Mapping[str, Any] | str | bytes | None]],
                      expected: Sequence[datetime]) -> Counter[datetime]:
    """How often each instant is recorded by ``rows`` (``(scheduled_for, context)``; the context as
    read: a mapping, or its JSON text). ``expected``: the trigger's instants, in order."""
    ordered = sorted(at.astimezone(UTC) for at in expected)
    seen: Counter[datetime] = Counter()
    for scheduled_for, context in rows:
        first = scheduled_for.astimezone(UTC)
        count = instants_of(_mapping(context))
        start = bisect.bisect_left(ordered, first)
        if count == 1 or start == len(ordered) or ordered[start] != first:
            seen[first] += 1
            continue
        seen.update(ordered[start:start + count])
        if start + count > len(ordered):  # the range runs past what the trigger expects: an extra
            seen[datetime.max.replace(tzinfo=UTC)] += 1
    return seen


def _mapping(context: Mapping[str, Any] | str | bytes | None) -> Mapping[str, Any]:
    if context is None:
        return {}
    if isinstance(context, str | bytes):
        loaded = orjson.loads(context)
        return loaded if isinstance(loaded, dict) else {}
    return context
