"""Partition leases: tickers share the automations (a speed-only mechanism, invariant 9).

Each instance aims at a fair share of the partitions (``ceil(P / live instances)``),
renews what it holds, takes free or expired ones, and gives back extras. Instances
announce themselves with a heartbeat lease on a membership slot (a lease number far
above the real partitions, chosen from a hash of the instance id), so a newcomer that
holds no partition yet still counts, and the others give it room. With
leases switched off every ticker loads every partition; the planner's CAS and
the runs' unique key still make each instant fire once. Leases use the
database clock.
"""

from __future__ import annotations

import math
import zlib

from actwheel.logs import get_logger
from actwheel.storage.base import Store

__all__ = ["AllPartitions", "PartitionLeases"]

_log = get_logger("actwheel.partitions")


#: Membership slots live above every real partition number.
MEMBERSHIP_BASE = 1_000_000
_MEMBERSHIP_SLOTS = 1_000_000


def membership_slot(instance: str) -> int:
    return MEMBERSHIP_BASE + zlib.crc32(instance.encode()) % _MEMBERSHIP_SLOTS


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
            await tx.partitions.acquire(self._instance, [membership_slot(self._instance)], self.ttl_s)
            now = await tx.now()
            live = [lease for lease in await tx.partitions.all() if lease.expires_at > now]
            renewed = set(await tx.partitions.renew(self._instance, sorted(self._owned), self.ttl_s))
            others = {lease.partition for lease in live
                      if lease.owner != self._instance and lease.partition < self._count}
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
