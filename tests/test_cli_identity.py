"""``actwheel users`` and ``actwheel keys`` on a SQLite file: each command, exit codes, and that the key
printed once authenticates against the same store — and stops doing so once revoked or rotated out."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from pathlib import Path

import pytest

from actwheel.auth.authenticator import CACHE_TTL_S, Authenticator
from actwheel.cli import main
from actwheel.clock import SystemClock, VirtualClock
from actwheel.errors import Unauthenticated
from actwheel.service.caller import Caller
from actwheel.storage import open_store

Capsys = pytest.CaptureFixture[str]
pytestmark = pytest.mark.usefixtures("process_logging_restored")  # the identity commands configure logging


@pytest.fixture
def database(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'identity.db'}"


def _cli(capsys: Capsys, database: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--database", database])
    out, err = capsys.readouterr()
    return code, out, err


def _authenticate(database: str, token: str, *, clock: VirtualClock | None = None) -> Caller:
    async def go() -> Caller:
        store = open_store(database, clock=SystemClock())
        await store.start()
        try:
            return await Authenticator(store=store, clock=clock or SystemClock()).authenticate(token)
        finally:
            await store.stop()

    return asyncio.run(go())


def _user(capsys: Capsys, database: str, principal: str = "alice",
          scopes: str = "automation:*,run:read,key:read") -> None:
    code, _, err = _cli(capsys, database, "users", "create", principal, "--kind", "user", "--scopes", scopes)
    assert (code, err) == (0, "")


def _key(capsys: Capsys, database: str, *extra: str) -> tuple[str, str]:
    code, out, err = _cli(capsys, database, "keys", "create", "--principal", "alice", "--name", "ci",
                          "--scopes", "automation:read,run:read", *extra)
    assert code == 0, err
    return out, err


def test_users_create_and_list_show_each_principal_with_its_ceiling(capsys: Capsys, database: str) -> None:
    _user(capsys, database)
    code, out, _ = _cli(capsys, database, "users", "create", "helper", "--kind", "agent", "--parent", "alice",
                        "--scopes", "automation:read", "--display-name", "Alice's helper")
    assert code == 0
    assert out.startswith("created agent helper")
    _cli(capsys, database, "users", "create", "orders", "--kind", "service", "--scopes", "bus:publish",
         "--on-behalf-of", "alice,bob")

    code, out, err = _cli(capsys, database, "users", "list")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}

    assert (code, err) == (0, "")
    assert out.splitlines()[0].split()[:4] == ["id", "kind", "status", "scopes"]
    assert rows["alice"][1:4] == ["user", "ACTIVE", "automation:*,key:read,run:read"]
    assert rows["helper"][1:5] == ["agent", "ACTIVE", "automation:read", "alice"]
    assert rows["orders"][1:6] == ["service", "ACTIVE", "bus:publish", "-", "alice,bob"]
    code, out, _ = _cli(capsys, database, "users", "list", "--kind", "agent")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["helper"]


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["users", "create", "x", "--kind", "robot", "--scopes", "run:read"], "kind="),
        (["users", "create", "x", "--kind", "user", "--scopes", "run:read,run:fly"], "scopes[1]="),
        (["users", "create", "x", "--kind", "user", "--scopes", "*"], "scopes[0]="),
        (["users", "create", "x", "--kind", "agent", "--scopes", "run:read"], "parent_id="),
        (["users", "create", "x", "--kind", "agent", "--parent", "nobody", "--scopes", "run:read"], "parent_id="),
        (["users", "list", "--kind", "robot"], "kind="),
        (["users", "ban", "alice", "--reason", " "], "reason="),
        (["keys", "create", "--principal", "alice", "--name", "k", "--scopes", "key:fly"], "scopes[0]="),
        (["keys", "create", "--principal", "alice", "--name", " ", "--scopes", "run:read"], "name="),
        (["keys", "create", "--principal", "alice", "--name", "k", "--scopes", "run:read", "--expires-in-s", "0"],
         "expires_in_s="),
        (["keys", "create", "--principal", "alice", "--name", "k", "--scopes", "run:read", "--agent", "alice"],
         "agent_id="),
        (["keys", "rotate", "KEY", "--grace-s", "-5"], "grace_s="),
    ],
)
def test_bad_input_exits_2_naming_the_field(capsys: Capsys, database: str, argv: list[str], field: str) -> None:
    _user(capsys, database)
    out, _ = _key(capsys, database)
    argv = [out.strip().split("_")[1] if a == "KEY" else a for a in argv]

    code, out, err = _cli(capsys, database, *argv)

    assert (code, out) == (2, "")
    assert err.startswith(f"actwheel {argv[0]} {argv[1]}: ")
    assert field in err


def test_an_argument_of_the_wrong_type_exits_2_naming_the_option(capsys: Capsys, database: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["keys", "create", "--principal", "alice", "--name", "k", "--scopes", "run:read",
              "--expires-in-s", "soon", "--database", database])
    assert exited.value.code == 2
    assert "--expires-in-s" in capsys.readouterr().err


def test_unknown_ids_exit_1_naming_them(capsys: Capsys, database: str) -> None:
    code, out, err = _cli(capsys, database, "keys", "revoke", "nokey")
    assert (code, out) == (1, "")
    assert "'nokey' not found" in err
    code, _, err = _cli(capsys, database, "users", "unban", "nobody")
    assert code == 1
    assert "'nobody'" in err


def test_keys_create_prints_the_key_alone_on_stdout_and_it_authenticates(capsys: Capsys, database: str) -> None:
    _user(capsys, database)

    out, err = _key(capsys, database)
    token = out.removesuffix("\n")
    caller = _authenticate(database, token)

    assert out.count("\n") == 1
    assert token.startswith("awk_")
    assert " " not in token
    assert token not in err
    assert "shown once" in err
    assert (caller.owner_id, caller.key_id) == ("alice", token.split("_")[1])
    assert caller.scopes == frozenset({"automation:read", "run:read"})


def test_a_key_never_grants_more_than_its_principal_ceiling(capsys: Capsys, database: str) -> None:
    _user(capsys, database, scopes="run:read")

    out, _ = _key(capsys, database)

    assert _authenticate(database, out.strip()).scopes == frozenset({"run:read"})


def test_an_agent_bound_key_acts_for_the_agent_of_its_user(capsys: Capsys, database: str) -> None:
    _user(capsys, database)
    _cli(capsys, database, "users", "create", "helper", "--kind", "agent", "--parent", "alice",
         "--scopes", "automation:read")

    out, _ = _key(capsys, database, "--agent", "helper")
    caller = _authenticate(database, out.strip())

    assert (caller.owner_id, caller.principal_id, caller.agent_id) == ("alice", "helper", "helper")
    assert caller.scopes == frozenset({"automation:read"})


def test_keys_list_shows_ids_names_scopes_and_expiry_never_the_key_or_its_hash(
        capsys: Capsys, database: str, tmp_path: Path) -> None:
    _user(capsys, database)
    token = _key(capsys, database, "--expires-in-s", "3600")[0].strip()
    key_id = token.split("_")[1]
    stored_hash = sqlite3.connect(tmp_path / "identity.db").execute(
        "SELECT key_hash FROM api_keys WHERE id = ?", (key_id,)).fetchone()[0]

    code, out, err = _cli(capsys, database, "keys", "list", "--principal", "alice")
    header, row = out.splitlines()

    assert (code, err) == (0, "")
    assert header.split() == ["id", "name", "scopes", "agent", "expires_at", "last_used_at", "replaced_by"]
    assert row.split()[:3] == [key_id, "ci", "automation:read,run:read"]
    assert stored_hash
    assert stored_hash not in out
    assert token not in out
    assert token.split("_")[2] not in out
    assert hashlib.sha256(token.encode()).hexdigest() not in out


def test_keys_revoke_makes_the_key_fail_within_the_cache_bound(capsys: Capsys, database: str) -> None:
    _user(capsys, database)
    token = _key(capsys, database)[0].strip()
    key_id = token.split("_")[1]

    async def before_and_after() -> tuple[Caller, Caller | None, str]:
        clock = VirtualClock(SystemClock().now())
        store = open_store(database, clock=SystemClock())
        await store.start()
        try:
            authenticator = Authenticator(store=store, clock=clock)
            first = await authenticator.authenticate(token)
            code, _, _ = await asyncio.to_thread(_cli, capsys, database, "keys", "revoke", key_id)
            assert code == 0
            cached = await authenticator.authenticate(token)  # within the bound: the cached rows may answer
            clock.advance(CACHE_TTL_S)
            try:
                await authenticator.authenticate(token)
            except Unauthenticated as exc:
                return first, cached, str(exc)
            return first, cached, "accepted"
        finally:
            await store.stop()

    first, cached, refused = asyncio.run(before_and_after())

    assert first.key_id == key_id
    assert cached is not None
    assert refused.startswith("revoked API key")
    _code, out, _ = _cli(capsys, database, "keys", "list", "--principal", "alice")
    assert key_id not in out


def test_keys_rotate_prints_a_new_key_and_the_old_one_lasts_only_the_grace(capsys: Capsys, database: str) -> None:
    _user(capsys, database)
    old = _key(capsys, database)[0].strip()

    code, out, err = _cli(capsys, database, "keys", "rotate", old.split("_")[1], "--grace-s", "0")
    new = out.strip()

    assert code == 0
    assert out.count("\n") == 1
    assert new.startswith("awk_")
    assert new != old
    assert new not in err
    assert old not in err
    assert _authenticate(database, new).scopes == frozenset({"automation:read", "run:read"})
    with pytest.raises(Unauthenticated, match="expired API key"):
        _authenticate(database, old)
    listed = _cli(capsys, database, "keys", "list", "--principal", "alice")[1]
    assert f"{new.split('_')[1]}  ci" in listed


def test_users_ban_refuses_the_principal_keys_and_unban_restores_them(capsys: Capsys, database: str) -> None:
    _user(capsys, database)
    token = _key(capsys, database)[0].strip()

    code, out, _ = _cli(capsys, database, "users", "ban", "alice", "--reason", "left the team")
    assert code == 0
    assert "BANNED" in out
    assert "left the team" in out
    with pytest.raises(Unauthenticated, match="banned"):
        _authenticate(database, token)
    assert "BANNED" in _cli(capsys, database, "users", "list")[1]

    code, out, _ = _cli(capsys, database, "users", "unban", "alice")
    assert code == 0
    assert "ACTIVE" in out
    assert _authenticate(database, token).owner_id == "alice"


def test_every_change_is_a_security_event_by_the_cli(capsys: Capsys, database: str, tmp_path: Path) -> None:
    _user(capsys, database)
    key_id = _key(capsys, database)[0].strip().split("_")[1]
    _cli(capsys, database, "keys", "revoke", key_id)

    rows = sqlite3.connect(tmp_path / "identity.db").execute(
        "SELECT kind, actor_id FROM security_events ORDER BY kind").fetchall()

    assert sorted(rows) == [("key.created", "cli"), ("key.revoked", "cli"), ("principal.created", "cli")]
