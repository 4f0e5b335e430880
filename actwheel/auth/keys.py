"""API keys: ``awk_<id>_<secret><checksum>``, issued once, stored only as a hash.

- ``<id>`` — 12 lowercase hex characters, public: it names the key in listings, logs
  and audit rows, so nobody ever needs the token to talk about a key.
- ``<secret>`` — 32 bytes from :mod:`secrets` (256 bits), base62, always 43 characters.
- ``<checksum>`` — CRC32 of ``awk_<id>_<secret>``, base62, always 6 characters. It is no
  protection against forgery (the hash lookup is); it lets a truncated or mistyped key be
  refused before any IO, and lets secret scanners recognise a real key.

Neither base62 nor hex contains ``_``, so the token splits unambiguously, and the secret
and checksum have fixed lengths, so no separator is needed between them.

Only ``sha256(token)`` is stored. A token is shown once, in :class:`IssuedKey`, whose
repr (like :class:`ParsedKey`'s and :class:`MalformedKey`'s message) never holds it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import zlib
from dataclasses import dataclass, field

from actwheel.errors import MalformedKey

__all__ = [
    "KEY_PREFIX",
    "IssuedKey",
    "MalformedKey",
    "ParsedKey",
    "hash_key",
    "keys_equal",
    "new_key",
    "parse_key",
]

KEY_PREFIX = "awk_"
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_BYTES = 6
_ID_CHARS = 2 * _ID_BYTES
_SECRET_BYTES = 32
_SECRET_CHARS = 43  # ceil(256 / log2(62))
_CHECKSUM_CHARS = 6  # ceil(32 / log2(62))
_ID_RE = re.compile(rf"[0-9a-f]{{{_ID_CHARS}}}")
_TAIL_RE = re.compile(rf"[0-9A-Za-z]{{{_SECRET_CHARS + _CHECKSUM_CHARS}}}")
KEY_LENGTH = len(KEY_PREFIX) + _ID_CHARS + 1 + _SECRET_CHARS + _CHECKSUM_CHARS


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A freshly minted key: show ``token`` to its owner once, store ``key_hash``."""

    key_id: str
    token: str = field(repr=False)
    key_hash: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """A presented token that is well formed: the id to look up, the hash to compare."""

    key_id: str
    key_hash: str = field(repr=False)


def _base62(number: int, width: int) -> str:
    """``number`` in base62, left-padded with ``0`` to exactly ``width`` characters."""
    digits = []
    for _ in range(width):
        number, digit = divmod(number, 62)
        digits.append(_ALPHABET[digit])
    if number:
        raise ValueError(f"{width} base62 digits are too few")
    return "".join(reversed(digits))


def _checksum(body: str) -> str:
    return _base62(zlib.crc32(body.encode("ascii")), _CHECKSUM_CHARS)


def hash_key(token: str) -> str:
    """The stored form of a key: sha256 hex of the whole token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def keys_equal(stored_hash: str, presented_hash: str) -> bool:
    """Compare two key hashes in constant time, so timing tells nothing about the stored one."""
    return hmac.compare_digest(stored_hash.encode("ascii", "replace"), presented_hash.encode("ascii", "replace"))


def new_key() -> IssuedKey:
    """Mint a key with a fresh public id and a 256-bit secret."""
    key_id = secrets.token_hex(_ID_BYTES)
    secret = _base62(int.from_bytes(secrets.token_bytes(_SECRET_BYTES), "big"), _SECRET_CHARS)
    body = f"{KEY_PREFIX}{key_id}_{secret}"
    token = body + _checksum(body)
    return IssuedKey(key_id=key_id, token=token, key_hash=hash_key(token))


def _malformed(part: str, length: int) -> MalformedKey:
    return MalformedKey(part, length, KEY_LENGTH)


def parse_key(token: str) -> ParsedKey:
    """Check a presented token's shape and checksum; no IO happens before this passes.

    :raises MalformedKey: wrong prefix, id, secret or checksum (naming which, never the token)
    """
    length = len(token)
    if not token.startswith(KEY_PREFIX):
        raise _malformed("prefix", length)
    key_id, _, tail = token[len(KEY_PREFIX) :].partition("_")
    if not _ID_RE.fullmatch(key_id):
        raise _malformed("id", length)
    if not _TAIL_RE.fullmatch(tail):
        raise _malformed("secret", length)
    body, checksum = token[:-_CHECKSUM_CHARS], token[-_CHECKSUM_CHARS:]
    if not hmac.compare_digest(checksum, _checksum(body)):
        raise _malformed("checksum", length)
    return ParsedKey(key_id=key_id, key_hash=hash_key(token))
