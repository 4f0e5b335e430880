"""Every identity change is logged once it has committed, as a ``security_event`` line with ids only
(kind, principal, key, actor and the actor's key): never a key, its hash, a secret or a ban's reason."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest

from actwheel.engine import Engine
from actwheel.errors import NotFound
from actwheel.logs import configure_logging
from actwheel.service import Caller

pytestmark = pytest.mark.usefixtures("process_logging_restored")

ADMIN = Caller("admin", frozenset({"*"}), "admin", "user", key_id="adminkey0001")
REASON = "posted the secret sauce"


def security_lines(err: str) -> list[dict[str, Any]]:
    lines = [orjson.loads(line) for line in err.splitlines() if line.strip()]
    return [line for line in lines if line["event"] == "security_event"]


async def test_identity_changes_are_logged_with_ids_only(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", json=True)
    principals, keys = engine.control.principals, engine.control.keys
    await principals.create(ADMIN, {"id": "alice", "kind": "user", "scopes": ["automation:read"]})
    minted = await keys.create(ADMIN, {"name": "ci", "scopes": ["automation:read"], "principal_id": "alice"})
    rotated = await keys.rotate(ADMIN, minted.key.id, {"grace_s": 0})
    await keys.revoke(ADMIN, rotated.key.id)
    await principals.ban(ADMIN, "alice", REASON)
    await principals.unban(ADMIN, "alice")
    await principals.set_scopes(ADMIN, "alice", ["run:read"])
    err = capsys.readouterr().err
    logged = [(line["kind"], line["principal_id"], line["key_id"], line["actor_id"]) for line in security_lines(err)]
    assert logged == [
        ("principal.created", "alice", None, "admin"),
        ("key.created", "alice", minted.key.id, "admin"),
        ("key.rotated", "alice", minted.key.id, "admin"),
        ("key.revoked", "alice", rotated.key.id, "admin"),
        ("principal.banned", "alice", None, "admin"),
        ("principal.unbanned", "alice", None, "admin"),
        ("principal.scopes_set", "alice", None, "admin"),
    ]
    lines = security_lines(err)
    assert {line["by_key"] for line in lines} == {"adminkey0001"}
    assert lines[2]["replaced_by"] == rotated.key.id
    assert all(line["level"] == "info" and line["logger_name"] == "actwheel.security" for line in lines)
    for token in (minted.token, rotated.token):
        assert token not in err
        assert hashlib.sha256(token.encode()).hexdigest() not in err
    assert "awk_" not in err
    assert REASON not in err


async def test_a_change_that_did_not_commit_is_not_logged(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", json=True)
    with pytest.raises(NotFound):
        await engine.control.keys.revoke(ADMIN, "nosuchkey000")
    with pytest.raises(NotFound):
        await engine.control.principals.ban(ADMIN, "nobody", REASON)
    assert security_lines(capsys.readouterr().err) == []
