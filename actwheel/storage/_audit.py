"""The audit trail: :class:`~actwheel.storage.base.AuditRepository` over SQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actwheel.storage import _codec as codec
from actwheel.storage._rows import audit_entry_of
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import AuditRepository
from actwheel.storage.records import AuditEntry, NewAuditEntry
from actwheel.storage.trail import expand_all

__all__ = ["SqlAudit"]


def _audit_row(i: int, e: NewAuditEntry) -> dict[str, Any]:
    f = f"entries[{i}]."
    return {
        "event_id": codec.text_field(f + "event_id", e.event_id),
        "run_id": e.run_id,
        "automation_id": e.automation_id,
        "phase": codec.text_field(f + "phase", e.phase, max_len=64),
        "actor": codec.text_field(f + "actor", e.actor),
        "details": codec.json_field(f + "details", e.details),
        "occurred_at": codec.aware(f + "occurred_at", e.occurred_at),
    }


class SqlAudit(AuditRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def append(self, entry: NewAuditEntry) -> bool:
        return await self.append_many([entry]) == 1

    async def append_many(self, entries: Sequence[NewAuditEntry]) -> int:
        rows = [_audit_row(i, e) for i, e in enumerate(entries)]
        if not rows:
            return 0
        return await self._sql.insert_rows("append_audit", rows)

    async def trail(self, run_id: str) -> list[AuditEntry]:
        return expand_all(audit_entry_of(r) for r in await self._sql.fetch("audit_trail", {"run_id": run_id}))

    async def for_automation(self, automation_id: str, limit: int = 100) -> list[AuditEntry]:
        params = {"automation_id": automation_id, "limit": codec.limit(limit)}
        rows = await self._sql.fetch("audit_for_automation", params)
        return expand_all(audit_entry_of(r) for r in rows)[-limit:]
