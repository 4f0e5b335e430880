"""Secrets in the store's ``secrets`` table: encrypted at rest, resolved only inside executors.

- :class:`StorageSecretRepository` adapts ``tx.secrets`` to the
  :class:`~actwheel.actions.secrets.SecretRepository` protocol that
  :class:`~actwheel.actions.secrets.CipherSecretResolver` reads ciphertexts through.
- :class:`SecretStore` writes: ``put`` / ``rotate`` / ``delete`` encrypt with a
  :class:`~actwheel.actions.secrets.SecretCipher`; answers carry the name and a mask
  (:class:`StoredSecret`), never the value.
- :func:`secret_resolver_from_env` is what a host calls at start: a key configured →
  a :class:`CipherSecretResolver`; no key and no secrets → :class:`NoSecrets`; no key but
  secrets stored → :class:`SecretKeyMissing` (refuse to start rather than fail every run).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from actwheel.actions.secrets import (
    KEY_ENV,
    KEY_FILE_ENV,
    MASK,
    SECRET_REF,
    CipherSecretResolver,
    NoSecrets,
    SecretCipher,
    SecretResolver,
)
from actwheel.errors import InvalidInput, NotFound, SecretKeyMissing
from actwheel.storage.base import Store

__all__ = [
    "SecretStore",
    "StorageSecretRepository",
    "StoredSecret",
    "secret_resolver_from_env",
    "validate_secret_name",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
_MAX_VALUE_BYTES = 64 * 1024
#: Principals checked for stored secrets when looking for "secrets exist" (see the function).
_PRINCIPAL_SCAN = 1000


def validate_secret_name(name: Any) -> str:
    """:raises InvalidInput: ``name`` is not 1–200 of ``[A-Za-z0-9_.-]`` starting with a letter or digit"""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInput(
            "name", name, "1-200 characters of A-Z a-z 0-9 _ . - starting with a letter or digit"
        )
    return name


def _validate_value(value: Any) -> str:
    # the value itself never appears in the error: only its type or size
    if not isinstance(value, str) or not value:
        raise InvalidInput(
            "value", MASK if isinstance(value, str) else type(value).__name__, "a non-empty string"
        )
    if len(value.encode("utf-8")) > _MAX_VALUE_BYTES:
        raise InvalidInput("value", MASK, f"at most {_MAX_VALUE_BYTES} bytes")
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredSecret:
    """What callers may see of a stored secret: its name, version, a mask and how to reference it."""

    name: str
    version: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": MASK,
            "version": self.version,
            "reference": {SECRET_REF: self.name},
        }


class StorageSecretRepository:
    """Ciphertexts from the ``secrets`` table, one short transaction per read."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __repr__(self) -> str:
        return f"StorageSecretRepository({self._store.dialect})"

    async def get_ciphertext(self, name: str, owner_id: str) -> bytes:
        """:raises NotFound: ``owner_id`` has no secret ``name``"""
        try:
            async with self._store.transaction() as tx:
                return (await tx.secrets.get(owner_id, name)).ciphertext
        except NotFound:
            raise NotFound("secret", name) from None


class SecretStore:
    """Writes secrets encrypted with ``cipher``; reads names only.

    :raises InvalidInput: (every method) a bad name or value — the value is never echoed
    """

    def __init__(self, store: Store, cipher: SecretCipher) -> None:
        self._store = store
        self._cipher = cipher

    def __repr__(self) -> str:
        return f"SecretStore({self._store.dialect}, cipher=***)"

    def resolver(self) -> SecretResolver:
        """The resolver executors use to read these secrets back."""
        return CipherSecretResolver(StorageSecretRepository(self._store), self._cipher)

    async def put(self, owner_id: str, name: str, value: str) -> StoredSecret:
        """Store a new secret.  :raises Conflict: ``owner_id`` already has ``name`` (rotate it)"""
        blob = self._encrypt(owner_id, name, value)
        async with self._store.transaction() as tx:
            rec = await tx.secrets.put(owner_id, name, blob)
        return StoredSecret(name=rec.name, version=rec.version)

    async def rotate(
        self, owner_id: str, name: str, value: str, *, expected_version: int | None = None
    ) -> StoredSecret:
        """Replace the value; version + 1.

        :raises NotFound: no such secret  :raises Conflict: ``expected_version`` does not hold
        """
        blob = self._encrypt(owner_id, name, value)
        async with self._store.transaction() as tx:
            rec = await tx.secrets.rotate(owner_id, name, blob, expected_version=expected_version)
        return StoredSecret(name=rec.name, version=rec.version)

    async def delete(self, owner_id: str, name: str) -> None:
        """:raises NotFound: no such secret"""
        async with self._store.transaction() as tx:
            await tx.secrets.delete(owner_id, validate_secret_name(name))

    async def names(self, owner_id: str) -> list[str]:
        """``owner_id``'s secret names, sorted."""
        async with self._store.transaction() as tx:
            return await tx.secrets.names(owner_id)

    def _encrypt(self, owner_id: str, name: str, value: str) -> bytes:
        validate_secret_name(name)
        return self._cipher.encrypt(_validate_value(value), owner_id=owner_id, name=name)


def _key_configured(env: Mapping[str, str]) -> bool:
    return bool(env.get(KEY_ENV) or env.get(KEY_FILE_ENV))


async def _owners_with_secrets(store: Store, owners: Iterable[str]) -> list[str]:
    """Those of ``owners`` and of the principals that have at least one stored secret."""
    async with store.transaction() as tx:
        candidates = set(owners) | {p.id for p in await tx.principals.query(limit=_PRINCIPAL_SCAN)}
        return sorted([owner for owner in candidates if await tx.secrets.names(owner)])


async def secret_resolver_from_env(
    store: Store, env: Mapping[str, str] | None = None, *, owners: Iterable[str] = ()
) -> SecretResolver:
    """The resolver a host should use, decided at start from ``env`` and the stored secrets.

    "Secrets exist" is checked for ``owners`` (pass the local owner) and for every principal:
    the storage port lists secret names per owner only.

    :param store: a started store
    :raises InvalidInput: a key is configured but is not base64 of 32 bytes (or its file is unreadable)
    :raises SecretKeyMissing: no key is configured and some owner has stored secrets
    """
    environ = os.environ if env is None else env
    if _key_configured(environ):
        return CipherSecretResolver(StorageSecretRepository(store), SecretCipher.from_env(environ))
    holders = await _owners_with_secrets(store, owners)
    if holders:
        raise SecretKeyMissing(
            KEY_ENV,
            None,
            f"a key: secrets of {', '.join(holders[:5])} are stored encrypted; set {KEY_ENV} "
            f"(base64 of 32 bytes) or {KEY_FILE_ENV} to the key they were written with",
        )
    return NoSecrets()
