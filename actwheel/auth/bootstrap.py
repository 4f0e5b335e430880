"""First start: one admin and one key, written to a file only its owner can read.

On an empty database the first instance to start creates the user ``admin`` with ``*`` and one key,
and writes the key — alone, one line — to :meth:`~actwheel.settings.Settings.admin_key_path` with
mode 0600, *before* its transaction commits: a committed admin always has its key on disk. It logs
the file's path and the key's public id, never the key. A later start, or a second instance racing
on PostgreSQL (the insert is ``ON CONFLICT DO NOTHING`` on the principal's id), changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from actwheel.auth.keys import new_key
from actwheel.logs import get_logger
from actwheel.settings import Settings
from actwheel.storage.base import Store
from actwheel.storage.records import NewApiKey, NewPrincipal, NewSecurityEvent, PrincipalKind

__all__ = ["ADMIN_ID", "ensure_admin", "write_key_file"]

_log = get_logger("actwheel.auth")
#: The bootstrap admin's principal id.
ADMIN_ID = "admin"


async def ensure_admin(store: Store, settings: Settings) -> Path | None:
    """Create the bootstrap admin and its key file on first start; the file's path if created now."""
    path = settings.admin_key_path()
    async with store.transaction() as tx:
        _, created = await tx.principals.create_if_absent(NewPrincipal(
            id=ADMIN_ID, kind=PrincipalKind.USER, scopes=("*",), display_name="bootstrap admin"))
        if not created:
            return None
        issued = new_key()
        await tx.api_keys.create(NewApiKey(id=issued.key_id, owner_id=ADMIN_ID, key_hash=issued.key_hash,
                                           scopes=("*",), name="bootstrap"))
        await tx.security_events.append(NewSecurityEvent(kind="principal.created", principal_id=ADMIN_ID,
                                                         key_id=issued.key_id, actor_id="bootstrap"))
        write_key_file(path, issued.token)
    _log.warning("bootstrap_admin_created", principal_id=ADMIN_ID, key_id=issued.key_id, key_file=str(path))
    return path


def write_key_file(path: Path, token: str) -> None:
    """Write ``token`` and a newline to ``path`` with mode 0600 (replacing a stale file of a wiped database)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)
