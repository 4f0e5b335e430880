"""Idempotency keys: :class:`~actwheel.storage.base.IdempotencyRepository` over SQL."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from actwheel.errors import InvalidInput
from actwheel.storage import _codec as codec
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import IdempotencyRepository

__all__ = ["SqlIdempotency"]


#: The largest outcome one idempotency key may hold (a batch's ids fit: 20k uuids ≈ 0.8 MB).
MAX_OUTCOME_BYTES = 4 * 1024 * 1024


def _outcome(value: Any) -> codec.JsonText:
    if not isinstance(value, Mapping):
        raise InvalidInput("outcome", type(value).__name__, "a JSON object (a dict)")
    return codec.json_field("outcome", dict(value), limit=MAX_OUTCOME_BYTES)


class SqlIdempotency(IdempotencyRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def get(self, key: str) -> dict[str, Any] | None:
        row = await self._sql.fetchrow("get_idempotency_key", {"key": codec.text_field("key", key)})
        return None if row is None else dict(codec.loads(row["outcome"]))

    async def put(self, key: str, outcome: dict[str, Any]) -> bool:
        params = {"key": codec.text_field("key", key), "outcome": _outcome(outcome)}
        return await self._sql.fetchrow("put_idempotency_key", params) is not None

    async def purge(self, before: datetime) -> int:
        return len(await self._sql.fetch("purge_idempotency_keys", {"before": codec.aware("before", before)}))
