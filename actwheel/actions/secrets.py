"""Secrets: encrypted at rest, referenced in configs, resolved only inside executors.

A config never holds a secret value; it holds a reference ``{"$secret": "name"}``.
Snapshots, logs, audit rows, errors and API answers carry the reference (or
``"***"``). An executor calls :func:`resolve_config` at execution time, and
scrubs its result with :meth:`ResolvedConfig.scrub` before returning it, so a
receiver that echoes a token back cannot leak it into a run's result.
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from actwheel.errors import InvalidInput, NotFound

__all__ = [
    "KEY_ENV",
    "KEY_FILE_ENV",
    "MASK",
    "SECRET_REF",
    "CipherSecretResolver",
    "InMemorySecretRepository",
    "NoSecrets",
    "ResolvedConfig",
    "SecretCipher",
    "SecretRepository",
    "SecretResolver",
    "StaticSecrets",
    "find_secret_refs",
    "is_secret_ref",
    "mask_secrets",
    "masked",
    "resolve_config",
]

KEY_ENV = "ACTWHEEL_SECRET_KEY"
KEY_FILE_ENV = "ACTWHEEL_SECRET_KEY_FILE"
SECRET_REF = "$secret"
MASK = "***"
_NONCE_BYTES = 12
_SENSITIVE_KEYS = ("password", "secret", "token", "authorization", "api_key", "apikey", "signature")
#: Any of them, in one scan (``masked`` runs it over every run's config, result and audit details).
_SENSITIVE_RE = re.compile("|".join(map(re.escape, _SENSITIVE_KEYS)))


def _decode_key(raw: str, source: str) -> bytes:
    try:
        key = base64.b64decode(raw.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(source, MASK, "base64 of exactly 32 random bytes") from None
    if len(key) != 32:
        raise InvalidInput(source, MASK, f"base64 of exactly 32 bytes (got {len(key)} bytes)")
    return key


class SecretCipher:
    """AES-256-GCM over secret values; the AAD binds a ciphertext to its owner and name.

    Ciphertext layout: 12-byte nonce followed by the GCM output.
    """

    __slots__ = ("_aead",)

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) != 32:
            raise InvalidInput("secret_key", MASK, "exactly 32 bytes")
        self._aead = AESGCM(key)

    def __repr__(self) -> str:
        return "SecretCipher(key=***)"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SecretCipher:
        """The key from ``ACTWHEEL_SECRET_KEY`` (base64), else from the file ``ACTWHEEL_SECRET_KEY_FILE``.

        :raises InvalidInput: neither is set, or the key is not base64 of 32 bytes
        """
        env = os.environ if environ is None else environ
        if env.get(KEY_ENV):
            return cls(_decode_key(env[KEY_ENV], KEY_ENV))
        if env.get(KEY_FILE_ENV):
            return cls.from_key_file(Path(env[KEY_FILE_ENV]))
        raise InvalidInput(KEY_ENV, None, f"a base64 32-byte key in {KEY_ENV} or a key file in {KEY_FILE_ENV}")

    @classmethod
    def from_key_file(cls, path: Path) -> SecretCipher:
        """:raises InvalidInput: the file is missing or does not hold base64 of 32 bytes"""
        try:
            raw = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            raise InvalidInput(KEY_FILE_ENV, str(path), "a readable file holding a base64 32-byte key") from None
        return cls(_decode_key(raw, KEY_FILE_ENV))

    @staticmethod
    def generate_key() -> str:
        """A fresh key, base64-encoded, for ``ACTWHEEL_SECRET_KEY``."""
        return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode("ascii")

    def encrypt(self, value: str, *, owner_id: str, name: str) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, value.encode("utf-8"), _aad(owner_id, name))

    def decrypt(self, blob: bytes, *, owner_id: str, name: str) -> str:
        """:raises InvalidInput: the ciphertext was tampered with, or belongs to another owner/name/key"""
        try:
            plain = self._aead.decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], _aad(owner_id, name))
        except (InvalidTag, ValueError):
            raise InvalidInput(f"secret {name}", MASK, "a ciphertext made with this key for this owner") from None
        return plain.decode("utf-8")


def _aad(owner_id: str, name: str) -> bytes:
    return f"{owner_id}\x00{name}".encode()


class SecretRepository(Protocol):
    """Where ciphertexts live (the storage's secrets table implements this).

    ``get_ciphertext`` returns the stored blob for ``(owner_id, name)``.
    :raises NotFound: no such secret for that owner
    """

    async def get_ciphertext(self, name: str, owner_id: str) -> bytes: ...


class SecretResolver(ABC):
    """Turns a secret name into its value, for one owner, at execution time only."""

    @abstractmethod
    async def resolve(self, name: str, owner_id: str) -> str:
        """The plaintext value of ``owner_id``'s secret ``name``.

        :raises NotFound: no secret ``name`` for that owner
        :raises InvalidInput: the stored value cannot be decrypted with the current key
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NoSecrets(SecretResolver):
    """The resolver of a host without a secret store: every name is unknown."""

    async def resolve(self, name: str, owner_id: str) -> str:
        raise NotFound("secret", name)


class StaticSecrets(SecretResolver):
    """Values held in memory per (owner, name); for tests and the embedded default."""

    def __init__(self, values: Mapping[tuple[str, str], str] | None = None) -> None:
        self._values = dict(values or {})

    def put(self, owner_id: str, name: str, value: str) -> None:
        self._values[(owner_id, name)] = value

    async def resolve(self, name: str, owner_id: str) -> str:
        try:
            return self._values[(owner_id, name)]
        except KeyError:
            raise NotFound("secret", name) from None


class CipherSecretResolver(SecretResolver):
    """Decrypts ciphertexts from a :class:`SecretRepository` with a :class:`SecretCipher`."""

    def __init__(self, repository: SecretRepository, cipher: SecretCipher) -> None:
        self._repository = repository
        self._cipher = cipher

    async def resolve(self, name: str, owner_id: str) -> str:
        blob = await self._repository.get_ciphertext(name, owner_id)
        return self._cipher.decrypt(blob, owner_id=owner_id, name=name)


class InMemorySecretRepository:
    """A :class:`SecretRepository` in a dict; stores only ciphertexts, like the real table."""

    def __init__(self, cipher: SecretCipher) -> None:
        self._cipher = cipher
        self._blobs: dict[tuple[str, str], bytes] = {}

    def __repr__(self) -> str:
        return f"InMemorySecretRepository({len(self._blobs)} secrets)"

    def put(self, owner_id: str, name: str, value: str) -> None:
        self._blobs[(owner_id, name)] = self._cipher.encrypt(value, owner_id=owner_id, name=name)

    async def get_ciphertext(self, name: str, owner_id: str) -> bytes:
        try:
            return self._blobs[(owner_id, name)]
        except KeyError:
            raise NotFound("secret", name) from None


def is_secret_ref(value: Any) -> bool:
    """True for ``{"$secret": "<name>"}`` and nothing else."""
    return (
        isinstance(value, dict)
        and len(value) == 1
        and isinstance(value.get(SECRET_REF), str)
        and bool(value[SECRET_REF])
    )


def _walk(value: Any, path: str) -> list[tuple[str, str]]:
    if is_secret_ref(value):
        return [(path, value[SECRET_REF])]
    if isinstance(value, dict):
        return [ref for k, v in value.items() for ref in _walk(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [ref for i, v in enumerate(value) for ref in _walk(v, f"{path}[{i}]")]
    return []


def find_secret_refs(config: Any) -> list[tuple[str, str]]:
    """Every ``(field path, secret name)`` referenced in ``config``."""
    return _walk(config, "")


def _is_sensitive(key: Any) -> bool:
    return isinstance(key, str) and _is_sensitive_name(key)


@functools.lru_cache(maxsize=4096)
def _is_sensitive_name(key: str) -> bool:
    """Keys repeat (every result has ``summary``, ``data``...): the substring scan is done once per name."""
    return _names_sensitive(key)


def _names_sensitive(text: str) -> bool:
    """Whether a sensitive name occurs in ``text``, compared as a key is: lowered, ``-`` read as ``_``."""
    lowered = text.lower().replace("-", "_")
    return _SENSITIVE_RE.search(lowered) is not None


def mask_secrets(config: Any) -> Any:
    """A copy fit for logs and API answers: references kept, literals under sensitive keys → ``***``."""
    if is_secret_ref(config):
        return dict(config)
    if isinstance(config, dict):
        return {k: (MASK if _is_sensitive(k) and isinstance(v, str) else mask_secrets(v)) for k, v in config.items()}
    if isinstance(config, list):
        return [mask_secrets(v) for v in config]
    return config


def masked(value: Any) -> Any:
    """:func:`mask_secrets`, or ``value`` itself (no copy) when masking could change nothing: no key of it
    can be sensitive, because no sensitive name occurs anywhere in its JSON text (lowered, ``-`` as ``_``,
    as :func:`_is_sensitive_name` sees a key). One encode and a substring scan instead of a walk that
    copies every dict and list: a run's config, result and audit details go through here. Conservative:
    a sensitive word in a value, or a value JSON cannot hold, takes the walk."""
    if not isinstance(value, dict | list):
        return mask_secrets(value)
    try:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return mask_secrets(value)
    return mask_secrets(value) if _names_sensitive(text) else value


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """A config with its secret references replaced by values. Never log or return ``config``."""

    config: Any = field(repr=False)
    values: tuple[str, ...] = field(repr=False, default=())

    def __repr__(self) -> str:
        return f"ResolvedConfig({len(self.values)} secrets resolved)"

    def scrub(self, value: Any) -> Any:
        """``value`` with any resolved secret value replaced by ``***`` (strings, dicts, lists)."""
        if not self.values:
            return value
        if isinstance(value, str):
            return self._scrub_text(value)
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value

    def _scrub_text(self, text: str) -> str:
        for secret in sorted(self.values, key=len, reverse=True):
            if secret:
                text = text.replace(secret, MASK)
        return text


async def _resolve(value: Any, resolver: SecretResolver, owner_id: str, found: list[str]) -> Any:
    if is_secret_ref(value):
        secret = await resolver.resolve(value[SECRET_REF], owner_id)
        found.append(secret)
        return secret
    if isinstance(value, dict):
        return {k: await _resolve(v, resolver, owner_id, found) for k, v in value.items()}
    if isinstance(value, list):
        return [await _resolve(v, resolver, owner_id, found) for v in value]
    return copy.copy(value)


async def resolve_config(config: Any, resolver: SecretResolver, owner_id: str) -> ResolvedConfig:
    """Replace every ``{"$secret": name}`` in ``config`` with ``owner_id``'s value. Executors only.

    :raises NotFound: a referenced secret does not exist for that owner
    """
    found: list[str] = []
    resolved = await _resolve(config, resolver, owner_id, found)
    return ResolvedConfig(resolved, tuple(found))
