"""Partition leases: :class:`~actwheel.storage.base.PartitionLeaseRepository` over SQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actwheel.storage import _codec as codec
from actwheel.storage._rows import lease_of
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import PartitionLeaseRepository
from actwheel.storage.records import PartitionLease

__all__ = ["SqlPartitionLeases"]


class SqlPartitionLeases(PartitionLeaseRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def _run(self, query: str, owner: str, partitions: Sequence[int], ttl_s: float | None) -> list[int]:
        params: dict[str, Any] = {"owner": codec.text_field("owner", owner), "partitions": codec.partitions(partitions)}
        if not params["partitions"]:
            return []
        if ttl_s is not None:
            params["ttl_s"] = codec.positive("ttl_s", ttl_s)
        return sorted(r["partition"] for r in await self._sql.fetch(query, params))

    async def acquire(self, owner: str, partitions: Sequence[int], ttl_s: float) -> list[int]:
        return await self._run("acquire_partitions", owner, partitions, ttl_s)

    async def renew(self, owner: str, partitions: Sequence[int], ttl_s: float) -> list[int]:
        return await self._run("renew_partitions", owner, partitions, ttl_s)

    async def release(self, owner: str, partitions: Sequence[int]) -> int:
        return len(await self._run("release_partitions", owner, partitions, None))

    async def all(self) -> list[PartitionLease]:
        return [lease_of(r) for r in await self._sql.fetch("all_partitions")]
