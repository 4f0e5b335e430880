"""Cluster numbers for the ops dashboard (issue 13): ``stats`` (run counts, rates and lateness from
SQL over a time window) and ``system`` (instances, partition leases, outbox, this instance's bus and
wheel), and the heartbeat that tells instances of each other.

Who sees what: ``stats`` needs ``run:read``; a caller holding ``admin:read`` gets every owner's
numbers, anyone else the numbers of their own runs, without the outbox and dead letters (shared,
cross-owner). ``system`` needs ``admin:read``.

Bounded reads: every run count reads only the runs created since the window's start through the
``runs_created`` / ``runs_owner_created`` indexes (migration 0008), never all runs; above
:data:`~actwheel.storage.records.LATENESS_SAMPLE` runs in the window the lateness percentiles rank a
deterministic sample of them (``ranked``), the counts stay exact. The "needs attention" counts are
read from ``runs_attention`` (migration 0012, kept by triggers on runs), not from runs: ``unknown``
and ``dead`` count every UNKNOWN and DEAD run whatever its age (until the retention sweeper deletes
it), ``failed`` the FAILED runs created within ``attention`` (default: the window; ``?attention=24h``),
since ``attention_since``. ``attention_in_window`` has the three counted over the stats window alone.
A status has no index on runs of its own — one would make every claim a non-HOT update (0012's
header, docs/benchmarks.md "Issue 13: page speed").

The heartbeat (:meth:`StatsService.beat`) upserts this instance's row of ``instances`` (roles, actor
states); the metrics actor calls it every sample (5 s), so an instance without the ``metrics`` role
does not appear in ``system``. Bus figures are this instance's own (its :class:`BusStats` since it
started): the cluster's are not stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from actwheel.bus.base import BusStats
from actwheel.errors import InvalidInput
from actwheel.service.authorize import ADMIN_READ, require
from actwheel.service.caller import Caller
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import (
    AttentionCounts,
    InstanceRecord,
    PartitionLease,
    Percentiles,
    RunWindowStats,
)

__all__ = ["ATTENTION_WINDOW", "MAX_WINDOW", "ClusterStats", "StatsService", "SystemReport", "parse_window"]

#: A longer look back for the "needs attention" counts, as the dashboard's queue asks for it.
ATTENTION_WINDOW = timedelta(hours=24)
#: The longest stats window.
MAX_WINDOW = timedelta(days=7)
#: An instance whose heartbeat is older than this is reported gone (``alive: false``).
ALIVE_WITHIN = timedelta(seconds=30)
#: Rows of instances not seen for this long are purged by the next heartbeat.
FORGET_AFTER = timedelta(days=1)

_WINDOW = re.compile(r"^(\d{1,6})([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_window(text: str | None, *, default: timedelta = timedelta(minutes=15)) -> timedelta:
    """``"15m"``, ``"1h"``, ``"30s"``, ``"2d"`` → a timedelta.

    :raises InvalidInput: naming ``window``: not ``<n><s|m|h|d>`` from 1 s to 7 days
    """
    if text is None:
        return default
    match = _WINDOW.match(text)
    window = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))}) if match else None
    if window is None or not timedelta(seconds=1) <= window <= MAX_WINDOW:
        raise InvalidInput("window", text, "a window like 15m, 1h or 2d (1 s to 7 d)")
    return window


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterStats:
    """What ``GET /v1/stats`` answers. ``scope``: ``cluster`` (admin) or ``owner`` (the caller's runs)."""

    scope: str
    owner_id: str | None
    now: datetime
    window_s: float
    since: datetime
    runs_per_minute: dict[str, float]
    by_status: dict[str, int]
    skipped_by_reason: dict[str, int]
    canceled_by_reason: dict[str, int]
    fire_lateness_s: Percentiles
    start_lateness_s: Percentiles
    attention: dict[str, int]
    attention_since: datetime
    outbox: dict[str, Any] | None = None
    dead_letters: dict[str, int] | None = None
    attention_in_window: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemReport:
    """What ``GET /v1/system`` answers: the cluster as the database knows it, and this instance."""

    now: datetime
    instance: str
    instances: list[dict[str, Any]]
    partitions: list[dict[str, Any]]
    outbox: dict[str, Any]
    dead_letters: dict[str, int]
    this_instance: dict[str, Any] = field(default_factory=dict)


class StatsService:
    def __init__(self, *, store: Store, instance: str, roles: Sequence[str], started_at: datetime,
                 actor_states: Callable[[], dict[str, str]], bus_stats: Callable[[], BusStats] | None = None,
                 wheel_size: Callable[[], int | None] | None = None) -> None:
        self._store = store
        self._instance = instance
        self._roles = tuple(roles)
        self._started_at = started_at
        self._actor_states = actor_states
        self._bus_stats = bus_stats
        self._wheel_size = wheel_size

    async def stats(self, caller: Caller, *, window: timedelta = timedelta(minutes=15),
                    attention: timedelta | None = None) -> ClusterStats:
        """Counts and lateness over ``window`` (reading the runs created in it: the cost grows with
        them — a 15-minute window of a busy cluster is a few thousand rows, a day can be a hundred
        thousand); the needs-attention counts from ``runs_attention``: every UNKNOWN and DEAD run, and
        the FAILED ones created within ``attention`` (default: the window).

        :raises PermissionDenied: no ``run:read``  :raises InvalidInput: a window over 7 days
        """
        require(caller, "stats.read", ["run:read"])
        for name, span in (("window", window), ("attention", attention or window)):
            if not timedelta(0) < span <= MAX_WINDOW:
                raise InvalidInput(name, str(span), "from 1 s to 7 days")
        cluster = caller.holds(ADMIN_READ) and caller.agent_id is None
        owner = None if cluster else caller.owner_id
        async with self._store.transaction() as tx:
            now = await tx.now()
            windowed = await tx.runs.window_stats(now - window, now=now, owner_id=owner)
            needing = await tx.runs.attention_counts(failed_since=now - max(window, attention or window),
                                                     owner_id=owner)
            outbox = await _outbox(tx, now) if cluster else None
            letters = await tx.dead_letters.counts() if cluster else None
        return _cluster_stats(windowed, needing, now=now, window=window, owner=owner, outbox=outbox,
                              letters=letters)

    async def system(self, caller: Caller) -> SystemReport:
        """:raises PermissionDenied: no ``admin:read``"""
        require(caller, "system.read", [ADMIN_READ])
        async with self._store.transaction() as tx:
            now = await tx.now()
            instances = await tx.instances.all()
            leases = await tx.partitions.all()
            outbox = await _outbox(tx, now)
            letters = await tx.dead_letters.counts()
        return SystemReport(now=now, instance=self._instance, instances=[_instance(i, now) for i in instances],
                            partitions=_partitions(leases, now), outbox=outbox, dead_letters=letters,
                            this_instance=self._local())

    async def beat(self) -> InstanceRecord:
        """This instance's heartbeat: its row of ``instances``, seen now; forgets long-gone instances."""
        async with self._store.transaction() as tx:
            record = await tx.instances.heartbeat(self._instance, roles=self._roles,
                                                  actor_states=self._actor_states(), started_at=self._started_at)
            await tx.instances.purge(record.seen_at - FORGET_AFTER)
        return record

    def _local(self) -> dict[str, Any]:
        """This instance's own figures: its actors, bus counters (since it started) and wheel."""
        report: dict[str, Any] = {"id": self._instance, "roles": list(self._roles),
                                  "actor_states": self._actor_states(), "bus_scope": "this instance"}
        if self._bus_stats is not None:
            stats = self._bus_stats()
            report["bus"] = {"published": stats.published, "redelivered": dict(stats.redelivered),
                             "dead_lettered": dict(stats.dead_lettered), "reconnects": stats.reconnects,
                             "consumers_restored": stats.consumers_restored, "handler_errors": stats.handler_errors}
        if self._wheel_size is not None:
            report["wheel_size"] = self._wheel_size()
        return report


async def _outbox(tx: Transaction, now: datetime) -> dict[str, Any]:
    oldest = await tx.outbox.oldest_unpublished()
    return {"backlog": await tx.outbox.backlog(),
            "oldest_unpublished_age_s": None if oldest is None else max(0.0, (now - oldest).total_seconds())}


def _attention(needing: AttentionCounts, letters: dict[str, int] | None) -> dict[str, int]:
    """The needs-attention counts: every UNKNOWN and DEAD run, the recent FAILED ones, the dead letters."""
    counts = {"unknown": needing.unknown, "dead": needing.dead, "failed": needing.failed}
    if letters is not None:
        counts["dead_letters"] = sum(letters.values())
    return counts


def _in_window(windowed: RunWindowStats) -> dict[str, int]:
    """UNKNOWN, DEAD and FAILED among the runs created in the stats window."""
    return {status.lower(): sum(windowed.by_status.get(status, {}).values())
            for status in ("UNKNOWN", "DEAD", "FAILED")}


def _cluster_stats(windowed: RunWindowStats, needing: AttentionCounts, *, now: datetime, window: timedelta,
                   owner: str | None, outbox: dict[str, Any] | None, letters: dict[str, int] | None) -> ClusterStats:
    return ClusterStats(
        scope="owner" if owner else "cluster", owner_id=owner, now=now, window_s=window.total_seconds(),
        since=windowed.since,
        runs_per_minute={"last_5m": windowed.last_5m / 5, "last_60m": windowed.last_60m / 60},
        by_status={status: sum(reasons.values()) for status, reasons in sorted(windowed.by_status.items())},
        skipped_by_reason=dict(sorted(windowed.by_status.get("SKIPPED", {}).items())),
        canceled_by_reason=dict(sorted(windowed.by_status.get("CANCELED", {}).items())),
        fire_lateness_s=windowed.fire_lateness, start_lateness_s=windowed.start_lateness,
        attention=_attention(needing, letters), attention_since=needing.failed_since, outbox=outbox,
        dead_letters=letters, attention_in_window=_in_window(windowed))


def _instance(record: InstanceRecord, now: datetime) -> dict[str, Any]:
    return {"id": record.id, "roles": list(record.roles), "actor_states": record.actor_states,
            "started_at": record.started_at, "seen_at": record.seen_at,
            "alive": now - record.seen_at <= ALIVE_WITHIN}


def _partitions(leases: list[PartitionLease], now: datetime) -> list[dict[str, Any]]:
    """The leases grouped by holder: which instance ticks which partitions, until when."""
    by_owner: dict[str, list[PartitionLease]] = {}
    for lease in leases:
        by_owner.setdefault(lease.owner, []).append(lease)
    return [{"owner": owner, "partitions": [lease.partition for lease in held],
             "until": max(lease.expires_at for lease in held),
             "expired": [lease.partition for lease in held if lease.expires_at < now]}
            for owner, held in sorted(by_owner.items())]
