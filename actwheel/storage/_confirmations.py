"""MCP confirmations: :class:`~actwheel.storage.base.ConfirmationRepository` over SQL.

One-use run-now confirmation tokens (stored as hashes) and the server keys (insert-if-absent).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from actwheel.errors import Conflict, IntegrityViolation, InvalidInput, NotFound
from actwheel.storage import _codec as codec
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import ConfirmationRepository
from actwheel.storage.records import Confirmation, NewConfirmation

__all__ = ["SqlConfirmations"]



def _confirmation_of(row: Mapping[str, Any]) -> Confirmation:
    return Confirmation(
        id=row["id"], token_hash=row["token_hash"], owner_id=row["owner_id"], key_id=row["key_id"],
        automation_id=row["automation_id"], automation_version=int(row["automation_version"]),
        created_at=codec.req_dt(row["created_at"]), expires_at=codec.req_dt(row["expires_at"]),
        used_at=codec.to_dt(row["used_at"]), run_id=row["run_id"])


_MIN_SERVER_KEY = 32


class SqlConfirmations(ConfirmationRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def create(self, new: NewConfirmation) -> Confirmation:
        params = {
            "id": codec.text_field("id", new.id), "token_hash": codec.text_field("token_hash", new.token_hash),
            "owner_id": codec.text_field("owner_id", new.owner_id), "key_id": str(new.key_id),
            "automation_id": codec.text_field("automation_id", new.automation_id),
            "automation_version": codec.version("automation_version", new.automation_version),
            "created_at": codec.req_aware("created_at", new.created_at),
            "expires_at": codec.req_aware("expires_at", new.expires_at),
        }
        try:
            row = await self._sql.guarded_row("insert_mcp_confirmation", params)
        except IntegrityViolation:
            raise Conflict("confirmation", new.id, "id or token hash already exists") from None
        assert row is not None
        return _confirmation_of(row)

    async def by_hash(self, token_hash: str) -> Confirmation | None:
        row = await self._sql.fetchrow("mcp_confirmation_by_hash",
                                       {"token_hash": codec.text_field("token_hash", token_hash)})
        return None if row is None else _confirmation_of(row)

    async def mark_used(self, confirmation_id: str, *, at: datetime, run_id: str) -> Confirmation:
        row = await self._sql.fetchrow("use_mcp_confirmation", {
            "id": codec.text_field("confirmation_id", confirmation_id), "at": codec.req_aware("at", at),
            "run_id": codec.text_field("run_id", run_id)})
        if row is None:
            raise NotFound("confirmation", confirmation_id)
        return _confirmation_of(row)

    async def purge(self, before: datetime) -> int:
        return len(await self._sql.fetch("purge_mcp_confirmations", {"before": codec.req_aware("before", before)}))

    async def server_key(self, name: str, candidate: bytes) -> bytes:
        if not isinstance(candidate, bytes) or len(candidate) < _MIN_SERVER_KEY:
            raise InvalidInput("candidate", f"<{len(candidate)} bytes>", f"at least {_MIN_SERVER_KEY} random bytes")
        name = codec.text_field("name", name)
        await self._sql.fetch("ensure_mcp_server_key", {"name": name, "secret": candidate})
        row = await self._sql.fetchrow("get_mcp_server_key", {"name": name})
        assert row is not None
        return bytes(row["secret"])
