"""The dashboard's sign-in sessions: :class:`~actwheel.storage.base.UiSessionRepository` over SQL."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from actwheel.errors import Conflict, IntegrityViolation
from actwheel.storage import _codec as codec
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import UiSessionRepository
from actwheel.storage.records import NewUiSession, UiSession

__all__ = ["SqlUiSessions"]



def _session_of(row: Mapping[str, Any]) -> UiSession:
    return UiSession(
        id=row["id"], session_hash=row["session_hash"], key_id=row["key_id"], owner_id=row["owner_id"],
        principal_id=row["principal_id"], created_at=codec.req_dt(row["created_at"]),
        expires_at=codec.req_dt(row["expires_at"]), revoked_at=codec.to_dt(row["revoked_at"]))


class SqlUiSessions(UiSessionRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def create(self, new: NewUiSession) -> UiSession:
        params = {
            "id": codec.text_field("id", new.id), "session_hash": codec.text_field("session_hash", new.session_hash),
            "key_id": codec.text_field("key_id", new.key_id), "owner_id": codec.text_field("owner_id", new.owner_id),
            "principal_id": codec.text_field("principal_id", new.principal_id),
            "created_at": codec.req_aware("created_at", new.created_at),
            "expires_at": codec.req_aware("expires_at", new.expires_at),
        }
        try:
            row = await self._sql.guarded_row("insert_ui_session", params)
        except IntegrityViolation:
            raise Conflict("ui_session", new.id, "id or session hash already exists") from None
        assert row is not None
        return _session_of(row)

    async def by_hash(self, session_hash: str) -> UiSession | None:
        row = await self._sql.fetchrow("ui_session_by_hash",
                                       {"session_hash": codec.text_field("session_hash", session_hash)})
        return None if row is None else _session_of(row)

    async def revoke(self, session_hash: str, *, at: datetime) -> bool:
        rows = await self._sql.fetch("revoke_ui_session", {
            "session_hash": codec.text_field("session_hash", session_hash), "at": codec.req_aware("at", at)})
        return bool(rows)

    async def purge(self, before: datetime) -> int:
        return len(await self._sql.fetch("purge_ui_sessions", {"before": codec.req_aware("before", before)}))
