"""Partition leases spread over the live instances and follow them as they come and go (speed only)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from actwheel.actors.partitions import PartitionLeases
from actwheel.clock import VirtualClock
from actwheel.storage import open_store


async def test_leases_spread_over_instances_and_return_when_one_dies(tmp_path: Path) -> None:
    clock = VirtualClock()
    store = open_store(f"sqlite:///{tmp_path / 'db'}", clock=clock)
    await store.start()
    try:
        a = PartitionLeases(store=store, instance="a", partitions=64, ttl_s=30)
        b = PartitionLeases(store=store, instance="b", partitions=64, ttl_s=30)
        await a.refresh()
        assert len(a.owned() or ()) == 64  # alone: everything
        await b.refresh()  # b announces itself; all partitions are still a's
        await a.refresh()  # a sees two instances: gives back half
        await b.refresh()  # b takes the free half
        owned_a, owned_b = a.owned() or frozenset(), b.owned() or frozenset()
        assert (len(owned_a), len(owned_b)) == (32, 32)
        assert not owned_a & owned_b
        clock.advance(31)  # b dies: its leases expire
        await a.refresh()
        assert len(a.owned() or ()) == 64
    finally:
        await store.stop()


async def test_a_lease_is_never_held_by_two_instances(tmp_path: Path) -> None:
    clock = VirtualClock()
    store = open_store(f"sqlite:///{tmp_path / 'db'}", clock=clock)
    await store.start()
    try:
        leases = [PartitionLeases(store=store, instance=f"i{n}", partitions=16, ttl_s=30) for n in range(3)]
        for _ in range(4):
            for lease in leases:
                await lease.refresh()
            clock.advance(timedelta(seconds=5).total_seconds())
        held = [lease.owned() or frozenset() for lease in leases]
        assert sum(len(h) for h in held) == 16
        assert all(4 <= len(h) <= 6 for h in held)  # fair share: at most ceil(16 / 3) each
        assert len(held[0] | held[1] | held[2]) == 16  # no partition counted twice
    finally:
        await store.stop()
