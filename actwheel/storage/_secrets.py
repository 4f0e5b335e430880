"""Stored secrets: :class:`~actwheel.storage.base.StoredSecretRepository` over SQL.

The store holds ciphertext only; encryption and decryption happen above it.
"""

from __future__ import annotations

from typing import Any

from actwheel.errors import Conflict, IntegrityViolation, InvalidInput, NotFound
from actwheel.storage import _codec as codec
from actwheel.storage._rows import secret_of
from actwheel.storage._runner import SqlRunner
from actwheel.storage.base import StoredSecretRepository
from actwheel.storage.records import SecretRecord

__all__ = ["SqlSecrets"]


def _ciphertext(value: Any) -> bytes:
    if not isinstance(value, bytes | bytearray) or not value:
        raise InvalidInput("ciphertext", type(value).__name__, "non-empty bytes (ciphertext, never plaintext)")
    return bytes(value)


class SqlSecrets(StoredSecretRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def put(self, owner_id: str, name: str, ciphertext: bytes) -> SecretRecord:
        params = {
            "id": codec.new_id(),
            "owner_id": codec.text_field("owner_id", owner_id),
            "name": codec.text_field("name", name, max_len=200),
            "ciphertext": _ciphertext(ciphertext),
        }
        try:
            row = await self._sql.guarded_row("insert_secret", params)
        except IntegrityViolation:
            raise Conflict("secret", f"{owner_id}/{name}", "already exists (rotate it instead)") from None
        assert row is not None
        return secret_of(row)

    async def get(self, owner_id: str, name: str) -> SecretRecord:
        row = await self._sql.fetchrow("get_secret", {"owner_id": owner_id, "name": name})
        if row is None:
            raise NotFound("secret", f"{owner_id}/{name}")
        return secret_of(row)

    async def rotate(
        self, owner_id: str, name: str, ciphertext: bytes, *, expected_version: int | None = None
    ) -> SecretRecord:
        params = {
            "owner_id": owner_id,
            "name": name,
            "ciphertext": _ciphertext(ciphertext),
            "expected_version": codec.version("expected_version", expected_version, optional=True),
        }
        row = await self._sql.fetchrow("rotate_secret", params)
        if row is None:
            current = await self.get(owner_id, name)
            raise Conflict("secret", f"{owner_id}/{name}", f"version is {current.version}, not {expected_version}")
        return secret_of(row)

    async def delete(self, owner_id: str, name: str) -> None:
        if await self._sql.fetchrow("delete_secret", {"owner_id": owner_id, "name": name}) is None:
            raise NotFound("secret", f"{owner_id}/{name}")

    async def names(self, owner_id: str) -> list[str]:
        return [r["name"] for r in await self._sql.fetch("secret_names", {"owner_id": owner_id})]

    async def exists_any(self) -> bool:
        row = await self._sql.fetchrow("any_secret")
        return row is not None and bool(row["found"])
