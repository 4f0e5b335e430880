"""Bounded history: :class:`~actwheel.storage.base.RetentionRepository` over SQL (migration 0010).

Each call is one bounded batch of two or three statements: read at most ``limit`` candidates in
index order after a cursor, delete those that still qualify (the condition is checked again by
the DELETE, on the row it removes), and for runs delete their audit rows. The repository never
loops: the sweeper decides how many batches to run and pauses between them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from actwheel.errors import InvalidInput
from actwheel.storage import _codec as codec
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import RetentionRepository
from actwheel.storage.records import PurgedOutbox, PurgedRuns

__all__ = ["SqlRetention"]

#: The cursor before every run: no run was created before the epoch.
_START = (datetime(1970, 1, 1, tzinfo=UTC), "")


def _before(value: Any) -> datetime:
    when = codec.aware("before", value)
    if when is None:
        raise InvalidInput("before", value, "a timezone-aware datetime")
    return when


def _text(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, value, "a non-empty string")
    return value


def _finished_before(row: Mapping[str, Any], before: datetime) -> bool:
    finished = codec.to_dt(row["finished_at"])
    return finished is not None and finished < before


def _published_before(row: Mapping[str, Any], before: datetime) -> bool:
    published = codec.to_dt(row["published_at"])
    return published is not None and published < before


class SqlRetention(RetentionRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def purge_runs(
        self, before: datetime, *, limit: int, after: tuple[datetime, str] | None = None
    ) -> PurgedRuns:
        before = _before(before)
        after_created, after_id = after or _START
        params = {"before": before, "after_created": codec.aware("after", after_created),
                  "after_id": after_id, "limit": codec.limit(limit)}
        scanned = await self._sql.fetch("retention_scan_runs", params)
        doomed = [row["id"] for row in scanned if _finished_before(row, before)]
        deleted = await self._delete_runs(doomed, before)
        audit = await self._sql.fetch("retention_delete_audit", {"ids": deleted}) if deleted else []
        cursor = (codec.req_dt(scanned[-1]["created_at"]), scanned[-1]["id"]) if len(scanned) == limit else None
        return PurgedRuns(scanned=len(scanned), runs=len(deleted), audit=len(audit), after=cursor)

    async def _delete_runs(self, ids: Sequence[str], before: datetime) -> list[str]:
        if not ids:
            return []
        rows = await self._sql.fetch("retention_delete_runs", {"ids": sorted(ids), "before": before})
        return [row["id"] for row in rows]

    async def purge_outbox(self, before: datetime, *, limit: int, after: int = 0) -> PurgedOutbox:
        before = _before(before)
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise InvalidInput("after", after, "an outbox row id (0 for the start)")
        scanned = await self._sql.fetch("retention_scan_outbox", {"after_id": after, "limit": codec.limit(limit)})
        reached = next((i for i, row in enumerate(scanned) if codec.req_dt(row["created_at"]) >= before), None)
        window = scanned if reached is None else scanned[:reached]
        doomed = [int(row["id"]) for row in window if _published_before(row, before)]
        rows = await self._sql.fetch("retention_delete_outbox", {"ids": doomed, "before": before}) if doomed else []
        done = reached is not None or len(scanned) < limit or not window
        return PurgedOutbox(scanned=len(window), rows=len(rows), after=None if done else int(window[-1]["id"]))

    async def purge_dead_letters(self, before: datetime, *, limit: int) -> int:
        params = {"before": _before(before), "limit": codec.limit(limit)}
        return len(await self._sql.fetch("retention_delete_dead_letters", params))

    async def purge_idempotency_keys(self, before: datetime, *, limit: int) -> int:
        params = {"before": _before(before), "limit": codec.limit(limit)}
        return len(await self._sql.fetch("retention_delete_idempotency_keys", params))

    async def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float) or not 0 < ttl_s < 86_400 * 365:
            raise InvalidInput("ttl_s", ttl_s, "a number of seconds > 0")
        params = {"name": _text("name", name), "owner": _text("owner", owner), "ttl_s": float(ttl_s)}
        return bool(await self._sql.fetch("acquire_job_lease", params))

    async def release_lease(self, name: str, owner: str) -> bool:
        params = {"name": _text("name", name), "owner": _text("owner", owner)}
        return bool(await self._sql.fetch("release_job_lease", params))
