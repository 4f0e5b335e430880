"""The transactional outbox: :class:`~actwheel.storage.base.OutboxRepository` over SQL.

Messages are appended in the transaction of the change they announce (one ``COPY`` of
rows); the CDC emitter (``actors/cdc.py``) takes them in batches and marks them published.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from actwheel.errors import InvalidInput
from actwheel.storage import _codec as codec
from actwheel.storage._codec import JsonText
from actwheel.storage._rows import outbox_message_of
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import OutboxRepository
from actwheel.storage.records import NewOutboxMessage, OutboxMessage

__all__ = ["SqlOutbox"]


def _outbox_row(i: int, m: NewOutboxMessage) -> dict[str, Any]:
    body, headers = m.body, m.headers
    if type(body) is not bytes:
        if not isinstance(body, bytes | bytearray):
            raise InvalidInput(f"messages[{i}].body", type(body).__name__, "bytes")
        body = bytes(body)
    if len(body) > codec.MAX_JSON_BYTES * 4:
        raise InvalidInput(f"messages[{i}].body", f"<{len(body)} bytes>", f"at most {codec.MAX_JSON_BYTES * 4} bytes")
    return {
        "exchange": _name_at(i, "exchange", m.exchange),
        "routing_key": _name_at(i, "routing_key", m.routing_key),
        "body": body,
        "headers": _NO_HEADERS if type(headers) is dict and not headers else codec.json_at(
            "messages", i, "headers", headers),
    }


_NO_HEADERS = JsonText("{}")


def _name_at(i: int, name: str, value: Any) -> str:
    if type(value) is str and 0 < len(value) <= 255:
        return value
    return codec.text_field(f"messages[{i}].{name}", value, max_len=255)


class SqlOutbox(OutboxRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def append(self, message: NewOutboxMessage) -> None:
        await self.append_many([message])

    async def append_many(self, messages: Sequence[NewOutboxMessage]) -> None:
        rows = [_outbox_row(i, m) for i, m in enumerate(messages)]
        if rows:
            await self._sql.copy_rows("copy_outbox", rows, guarded=False)
            self._sql.outbox_touched = True

    async def take_batch(self, limit: int = 500, *, exclusive: bool = False) -> list[OutboxMessage]:
        query = "take_outbox_exclusive" if exclusive else "take_outbox"
        return [outbox_message_of(r) for r in await self._sql.fetch(query, {"limit": codec.limit(limit)})]

    async def mark_published(self, ids: Sequence[int]) -> int:
        if not ids:
            return 0
        return len(await self._sql.fetch("mark_published", {"ids": [int(i) for i in ids]}))

    async def purge_published(self, before: datetime) -> int:
        return len(await self._sql.fetch("purge_published", {"before": codec.aware("before", before)}))

    async def backlog(self) -> int:
        row = await self._sql.fetchrow("outbox_backlog")
        return int(row["n"]) if row is not None else 0

    async def oldest_unpublished(self) -> datetime | None:
        row = await self._sql.fetchrow("oldest_unpublished")
        return None if row is None else codec.req_dt(row["created_at"])

    async def requeue(self, message_id: int) -> bool:
        if isinstance(message_id, bool) or not isinstance(message_id, int) or message_id < 1:
            raise InvalidInput("message_id", message_id, "a positive outbox row id")
        return await self._sql.fetchrow("requeue_outbox_message", {"id": message_id}) is not None
