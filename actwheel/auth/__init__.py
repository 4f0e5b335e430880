"""Identity and scopes: API keys (:mod:`.keys`) and the scope algebra (:mod:`.scopes`).

Pure: nothing here does IO, so the HTTP layer, the service and the CLI share one rule.
"""

from __future__ import annotations

from actwheel.auth.keys import IssuedKey, MalformedKey, ParsedKey, hash_key, keys_equal, new_key, parse_key
from actwheel.auth.scopes import ALL, KNOWN_SCOPES, Grant, validate_scopes

__all__ = [
    "ALL",
    "KNOWN_SCOPES",
    "Grant",
    "IssuedKey",
    "MalformedKey",
    "ParsedKey",
    "hash_key",
    "keys_equal",
    "new_key",
    "parse_key",
    "validate_scopes",
]
