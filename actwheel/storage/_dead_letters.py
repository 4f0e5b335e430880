"""Dead letters: :class:`~actwheel.storage.base.DeadLetterRepository` over SQL."""

from __future__ import annotations

from actwheel.errors import NotFound
from actwheel.storage import _codec as codec
from actwheel.storage._rows import dead_letter_of
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import DeadLetterRepository
from actwheel.storage.records import DeadLetterRecord, NewDeadLetter

__all__ = ["SqlDeadLetters"]


class SqlDeadLetters(DeadLetterRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def add(self, new: NewDeadLetter) -> DeadLetterRecord:
        params = {
            "id": codec.new_id(),
            "source": codec.text_field("source", new.source, max_len=200),
            "ref_id": new.ref_id,
            "reason": codec.text_field("reason", new.reason, max_len=4000),
            "payload": codec.json_field("payload", new.payload),
        }
        row = await self._sql.fetchrow("insert_dead_letter", params)
        assert row is not None
        return dead_letter_of(row)

    async def get(self, letter_id: str) -> DeadLetterRecord:
        row = await self._sql.fetchrow("get_dead_letter", {"id": letter_id})
        if row is None:
            raise NotFound("dead_letter", letter_id)
        return dead_letter_of(row)

    async def query(self, *, source: str | None = None, limit: int = 100) -> list[DeadLetterRecord]:
        params = {"source": source, "limit": codec.limit(limit)}
        return [dead_letter_of(r) for r in await self._sql.fetch("query_dead_letters", params)]

    async def counts(self) -> dict[str, int]:
        return {r["source"]: int(r["n"]) for r in await self._sql.fetch("dead_letter_counts")}

    async def delete(self, letter_id: str) -> None:
        if await self._sql.fetchrow("delete_dead_letter", {"id": letter_id}) is None:
            raise NotFound("dead_letter", letter_id)
