"""Partition leases: tickers share the automations (a speed-only mechanism, invariant 9).

Each instance aims at a fair share of the partitions (``ceil(P / live owners)``),
renews what it holds, takes free or expired ones, and gives back extras. With
leases switched off every ticker loads every partition; the planner's CAS and
the runs' unique key still make each instant fire once. Leases use the
database clock.
"""

from __future__ import annotations

import math

from actwheel.logs import get_logger
from actwheel.storage.base import Store

__all__ = ["AllPartitions", "PartitionLeases"]

_log = get_logger("actwheel.partitions")


class AllPartitions:
    """Leases switched off: own everything."""

    def owned(self) -> frozenset[int] | None:
        return None

    async def refresh(self) -> bool:
        return False


class PartitionLeases:
    def __init__(self, *, store: Store, instance: str, partitions: int = 64, ttl_s: float = 30.0) -> None:
        self._store = store
        self._instance = instance
        self._count = partitions
        self.ttl_s = ttl_s
        self._owned: frozenset[int] = frozenset()

    def owned(self) -> frozenset[int] | None:
        return self._owned

    async def refresh(self) -> bool:
        """Renew, rebalance; returns True when the owned set changed (the ticker refills)."""
        async with self._store.transaction() as tx:
            now = await tx.now()
            leases = await tx.partitions.all()
            live = [lease for lease in leases if lease.expires_at > now]
            renewed = set(await tx.partitions.renew(self._instance, sorted(self._owned), self.ttl_s))
            others = {lease.partition for lease in live if lease.owner != self._instance}
            owners = {lease.owner for lease in live} | {self._instance}
            target = math.ceil(self._count / len(owners))
            if len(renewed) < target:
                free = [p for p in range(self._count) if p not in others and p not in renewed]
                renewed |= set(await tx.partitions.acquire(self._instance, free[: target - len(renewed)],
                                                           self.ttl_s))
            elif len(renewed) > target:
                extra = sorted(renewed)[target:]
                await tx.partitions.release(self._instance, extra)
                renewed -= set(extra)
        changed = frozenset(renewed) != self._owned
        if changed:
            _log.info("partitions_rebalanced", owned=len(renewed), target=target, owners=len(owners))
        self._owned = frozenset(renewed)
        return changed
