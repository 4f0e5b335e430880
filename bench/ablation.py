"""``bench/e2e.py --ablate auditor,pipeline``: what a hop costs, measured by taking it out.

A diagnostic, never a figure of the engine: the named hop is replaced in this process by a stub, so
that a run's CPU with and without it, alternated in one window, says what the hop costs end to end —
its own code, the SQLite or PostgreSQL work it causes, the bus traffic it handles, the garbage it
makes. A profiler's shares of the event loop miss most of that (round 12 in docs/benchmarks.md).

- ``auditor``: the auditor acknowledges every event and writes nothing. Since the router writes the
  LIFECYCLE / ACTION rows of its own finishes (round 12), this takes out only the auditor's handling of
  the deliveries (and the rows of other lifecycle events: SKIPPED at planning, recovery, cancels).
- ``lifecycle``: the router writes no LIFECYCLE / ACTION entries with its finishes (and, as with
  ``auditor``, the auditor writes none). The sustained row's ``runs_per_s`` is then 0 (it counts
  audited runs); read ``succeeded_per_s``.
- ``trail``: the router writes no PIPELINE row (the pipeline's phases) with its finishes; the lifecycle
  entries it would carry are written as rows of their own.
- ``pipeline``: the dispatch pipeline returns SUCCEEDED with one EXECUTE trail record at once (no
  resolve, permission, validation, executor, trail of five phases, metrics).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actwheel.actions.base import ActionResult
from actwheel.actions.pipeline import AuditRecord, DispatchOutcome, DispatchPipeline, DispatchRequest
from actwheel.actors import router
from actwheel.actors.auditor import Auditor
from actwheel.bus.base import Delivery
from actwheel.storage.records import NewAuditEntry, NewOutboxMessage

__all__ = ["HOPS", "ablate"]


async def _ack_only(self: Auditor, delivery: Delivery) -> None:
    return None


async def _succeed_at_once(self: DispatchPipeline, request: DispatchRequest) -> DispatchOutcome:
    now = self._clock.now()
    return DispatchOutcome(status="SUCCEEDED", reason=None, result=ActionResult.ok("ablated"),
                           executor_type=request.action_type, audit=(AuditRecord("EXECUTE", {}, now),))


def _no_trail(*_: Any) -> list[NewAuditEntry]:
    return []


def _unaudited(rows: Sequence[NewOutboxMessage]) -> tuple[list[NewOutboxMessage], list[NewAuditEntry]]:
    return list(rows), []


HOPS: dict[str, list[tuple[Any, str, Any]]] = {
    "auditor": [(Auditor, "on_event", _ack_only)],
    "lifecycle": [(Auditor, "on_event", _ack_only), (router, "audited_in_place", _unaudited)],
    "pipeline": [(DispatchPipeline, "dispatch", _succeed_at_once)],
    "trail": [(router, "_audit_rows", _no_trail)],
}


def ablate(hops: Sequence[str]) -> list[str]:
    """Replace each named hop in this process for good; returns the names applied, in order.

    :raises SystemExit: a name that is not a hop (the bench's usage error)"""
    unknown = [h for h in hops if h not in HOPS]
    if unknown:
        raise SystemExit(f"--ablate: unknown hop(s) {unknown}; known: {sorted(HOPS)}")
    for hop in hops:
        for owner, attribute, stub in HOPS[hop]:
            setattr(owner, attribute, stub)
    return list(hops)
