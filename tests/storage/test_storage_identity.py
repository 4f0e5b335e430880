"""Contract: identity and scopes (issue 11) — principals, API keys, security events and owner
isolation in SQL, on SQLite and real PostgreSQL; and the upgrade of a database made before 0006."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, closing
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest
from storage_harness import Backend, make_automation, make_run, new_automation

from actwheel.errors import Conflict, InvalidInput, NotFound
from actwheel.storage import Store, Transaction
from actwheel.storage import postgres as postgres_adapter
from actwheel.storage import sqlite as sqlite_adapter
from actwheel.storage._sql import load_migrations
from actwheel.storage.records import (
    AutomationChanges,
    NewApiKey,
    NewPrincipal,
    NewSecurityEvent,
    PrincipalKind,
    PrincipalStatus,
)

USER, AGENT, SERVICE = PrincipalKind.USER, PrincipalKind.AGENT, PrincipalKind.SERVICE


def user(principal_id: str, scopes: tuple[str, ...] = ("*",)) -> NewPrincipal:
    return NewPrincipal(id=principal_id, kind=USER, scopes=scopes, display_name=principal_id.title())


def agent(principal_id: str, parent_id: str, scopes: tuple[str, ...] = ("runs:read",)) -> NewPrincipal:
    return NewPrincipal(id=principal_id, kind=AGENT, scopes=scopes, parent_id=parent_id)


async def with_people(tx: Transaction) -> None:
    """alice and bob (users), alice's agent a-1, and a service that may act for alice."""
    await tx.principals.create(user("alice"))
    await tx.principals.create(user("bob"))
    await tx.principals.create(agent("a-1", "alice"))
    await tx.principals.create(NewPrincipal(id="svc", kind=SERVICE, scopes=("bus:publish",), on_behalf_of=("alice",)))


def key(owner_id: str, n: int, **overrides: Any) -> NewApiKey:
    return NewApiKey(owner_id=owner_id, key_hash=f"sha256:{owner_id}-{n}", scopes=("runs:read",), **overrides)


# --- principals -----------------------------------------------------------------------------


async def test_users_agents_and_services_are_stored_with_their_ceilings(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        alice, a1, svc = [await tx.principals.get(p) for p in ("alice", "a-1", "svc")]
    assert (alice.kind, alice.parent_id, alice.scopes, alice.display_name) == (USER, None, ("*",), "Alice")
    assert (alice.status, alice.version, alice.ban_reason, alice.banned_by, alice.banned_at) == (
        PrincipalStatus.ACTIVE, 1, None, None, None)
    assert (a1.kind, a1.parent_id, a1.scopes) == (AGENT, "alice", ("runs:read",))
    assert (svc.kind, svc.parent_id, svc.on_behalf_of) == (SERVICE, None, ("alice",))


async def test_create_refuses_a_duplicate_id_a_missing_parent_and_a_wrong_shape(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        with pytest.raises(Conflict):
            await tx.principals.create(user("alice"))
        with pytest.raises(NotFound) as missing:
            await tx.principals.create(agent("a-2", "ghost"))
        with pytest.raises(InvalidInput) as orphan:
            await tx.principals.create(NewPrincipal(id="a-3", kind=AGENT, scopes=()))
        with pytest.raises(InvalidInput) as parented:
            await tx.principals.create(NewPrincipal(id="u-2", kind=USER, scopes=(), parent_id="alice"))
        with pytest.raises(InvalidInput) as agent_of_agent:
            await tx.principals.create(agent("a-4", "a-1"))
        with pytest.raises(InvalidInput) as one_string:
            await tx.principals.create(NewPrincipal(id="u-3", kind=USER, scopes="*"))  # type: ignore[arg-type]
        assert await tx.principals.count() == 4  # the transaction is still usable, nothing was written
    assert missing.value.key == "ghost"
    assert (orphan.value.field, parented.value.field, agent_of_agent.value.field) == ("parent_id",) * 3
    assert one_string.value.field == "scopes"


async def test_get_many_reads_the_principals_of_a_batch_in_one_statement(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        statements = _count_statements(tx)
        found = await tx.principals.get_many(["alice", "ghost", "a-1", "alice"])
        assert len(statements) == 1
        assert await tx.principals.get_many([]) == {}
        with pytest.raises(InvalidInput):
            await tx.principals.get_many("alice")
    assert sorted(found) == ["a-1", "alice"]
    assert found["a-1"].parent_id == "alice"


async def test_query_filters_by_kind_status_and_parent_and_pages_by_id(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        await tx.principals.create(agent("a-0", "alice"))
        await tx.principals.ban("bob", reason="abuse", by="alice")
        agents = await tx.principals.query(kind=AGENT)
        alices = await tx.principals.query(parent_id="alice", after_id="a-0")
        banned = await tx.principals.query(status=PrincipalStatus.BANNED)
        page = await tx.principals.query(limit=2)
        rest = await tx.principals.query(after_id=page[-1].id)
        counts = [await tx.principals.count(kind=kind) for kind in (None, USER, AGENT)]
    assert [p.id for p in agents] == ["a-0", "a-1"]
    assert [p.id for p in alices] == ["a-1"]
    assert [p.id for p in banned] == ["bob"]
    assert [p.id for p in page + rest] == ["a-0", "a-1", "alice", "bob", "svc"]
    assert counts == [5, 2, 2]


async def test_ban_records_why_by_whom_and_when_and_unban_clears_it(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        now = await tx.now()
        banned = await tx.principals.ban("bob", reason="abuse", by="alice")
        unbanned = await tx.principals.unban("bob", by="alice")
        scoped = await tx.principals.set_scopes("bob", ["runs:read", "automations:write"])
        with pytest.raises(NotFound):
            await tx.principals.ban("ghost", reason="x", by="alice")
        with pytest.raises(NotFound):
            await tx.principals.unban("ghost", by="alice")
        with pytest.raises(NotFound):
            await tx.principals.set_scopes("ghost", [])
        with pytest.raises(InvalidInput) as no_reason:
            await tx.principals.ban("bob", reason="", by="alice")
        with pytest.raises(InvalidInput) as bad_scope:
            await tx.principals.set_scopes("bob", ["runs:read", ""])
    assert (banned.status, banned.ban_reason, banned.banned_by, banned.banned_at, banned.version) == (
        PrincipalStatus.BANNED, "abuse", "alice", now, 2)
    assert (unbanned.status, unbanned.ban_reason, unbanned.banned_by, unbanned.banned_at, unbanned.version) == (
        PrincipalStatus.ACTIVE, None, None, None, 3)
    assert (scoped.scopes, scoped.version) == (("runs:read", "automations:write"), 4)
    assert no_reason.value.field == "reason"
    assert bad_scope.value.field == "scopes[1]"


async def test_create_if_absent_creates_once_and_returns_the_stored_principal(store: Store) -> None:
    async with store.transaction() as tx:
        first, created = await tx.principals.create_if_absent(user("local"))
        again, created_again = await tx.principals.create_if_absent(user("local", scopes=("runs:read",)))
        await tx.principals.create(user("alice"))
        with pytest.raises(NotFound):
            await tx.principals.create_if_absent(agent("a-9", "ghost"))
    assert (created, created_again) == (True, False)
    assert again == first
    assert again.scopes == ("*",)  # unchanged, whatever the second call asked for


async def test_racing_create_if_absent_creates_one_principal(backend: Backend) -> None:
    """Several stores (their own connections), each caller inside an open transaction when the
    gate opens: on PostgreSQL the losers wait for the winner's commit and then read its row."""
    overlapping = backend.kind == "postgres"  # SQLite has one writer: its transactions cannot overlap
    contenders = 6
    inside = asyncio.Barrier(contenders) if overlapping else None

    async def contender(store: Store) -> bool:
        async with store.transaction() as tx:
            await tx.now()  # the transaction is open
            if inside is not None:
                await inside.wait()
            _, created = await tx.principals.create_if_absent(user("local"))
            return created

    async with AsyncExitStack() as stack:
        stores = [await stack.enter_async_context(backend.opened()) for _ in range(3)]
        results = await asyncio.gather(*(contender(stores[i % 3]) for i in range(contenders)))
        async with stores[0].transaction() as tx:
            assert await tx.principals.count() == 1
    assert sorted(results) == [False] * (contenders - 1) + [True]


async def test_create_if_absent_waits_for_an_uncommitted_insert_of_the_same_id(backend: Backend) -> None:
    if backend.kind != "postgres":
        pytest.skip("SQLite transactions never overlap (one writer); the PostgreSQL race is the point")
    async with backend.opened() as first, backend.opened() as second:
        async with first.transaction() as tx:
            _, created_first = await tx.principals.create_if_absent(user("local"))
            waiting = asyncio.create_task(_create_if_absent(second, "local"))
            await asyncio.sleep(0.3)
            assert not waiting.done()  # blocked on the row this transaction has not committed
        _, created_second = await waiting
    assert (created_first, created_second) == (True, False)


async def _create_if_absent(store: Store, principal_id: str) -> tuple[object, bool]:
    async with store.transaction() as tx:
        return await tx.principals.create_if_absent(user(principal_id))


# --- API keys -------------------------------------------------------------------------------


async def test_a_key_may_act_only_as_an_agent_of_its_owner(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        own = await tx.api_keys.create(key("alice", 1, agent_id="a-1"))
        with pytest.raises(InvalidInput) as foreign:
            await tx.api_keys.create(key("bob", 1, agent_id="a-1"))
        with pytest.raises(NotFound) as no_agent:
            await tx.api_keys.create(key("alice", 2, agent_id="ghost"))
        with pytest.raises(NotFound) as no_owner:
            await tx.api_keys.create(key("ghost", 1, agent_id="a-1"))
        with pytest.raises(NotFound):
            await tx.api_keys.create(key("ghost", 2))
        with pytest.raises(Conflict):
            await tx.api_keys.create(key("alice", 1))
        assert await tx.api_keys.count_live("bob") == 0
    assert (own.owner_id, own.agent_id, own.expires_at, own.last_used_at, own.replaced_by) == (
        "alice", "a-1", None, None, None)
    assert foreign.value.field == "agent_id"
    assert (no_agent.value.key, no_owner.value.key) == ("ghost", "ghost")


async def test_another_owners_key_is_not_found(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        alices = await tx.api_keys.create(key("alice", 1))
        got = await tx.api_keys.get(alices.id, owner_id="alice")
        with pytest.raises(NotFound):
            await tx.api_keys.get(alices.id, owner_id="bob")
        with pytest.raises(NotFound):
            await tx.api_keys.revoke(alices.id, owner_id="bob")
        still = await tx.api_keys.get(alices.id)
        revoked = await tx.api_keys.revoke(alices.id, owner_id="alice")
    assert got == alices
    assert still.revoked is False
    assert revoked.revoked is True


async def test_an_agent_filter_reaches_only_the_keys_bound_to_that_agent(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        await tx.principals.create(agent("a-2", "alice"))
        users = await tx.api_keys.create(key("alice", 1))
        bots = await tx.api_keys.create(key("alice", 2, agent_id="a-1"))
        others = await tx.api_keys.create(key("alice", 3, agent_id="a-2"))
        listed = await tx.api_keys.for_owner("alice", agent_id="a-1")
        got = await tx.api_keys.get(bots.id, owner_id="alice", agent_id="a-1")
        for refused in (users.id, others.id):
            with pytest.raises(NotFound):
                await tx.api_keys.get(refused, owner_id="alice", agent_id="a-1")
            with pytest.raises(NotFound):
                await tx.api_keys.revoke(refused, owner_id="alice", agent_id="a-1")
        untouched = [await tx.api_keys.get(k) for k in (users.id, others.id)]
        revoked = await tx.api_keys.revoke(bots.id, owner_id="alice", agent_id="a-1")
        everyone = await tx.api_keys.for_owner("alice")
    assert [k.id for k in listed] == [bots.id]
    assert got == bots
    assert [k.revoked for k in untouched] == [False, False]
    assert revoked.revoked is True
    assert sorted(k.id for k in everyone) == sorted([users.id, others.id])


async def test_live_keys_are_neither_revoked_nor_expired_by_the_transactions_clock(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        now = await tx.now()
        live = await tx.api_keys.create(key("alice", 1, expires_at=now + timedelta(days=1)))
        forever = await tx.api_keys.create(key("alice", 2))
        expired = await tx.api_keys.create(key("alice", 3, expires_at=now - timedelta(seconds=1)))
        revoked = await tx.api_keys.revoke((await tx.api_keys.create(key("alice", 4))).id)
        listed = await tx.api_keys.for_owner("alice")
        everything = await tx.api_keys.for_owner("alice", include_dead=True)
        count = await tx.api_keys.count_live("alice")
        with pytest.raises(InvalidInput):
            await tx.api_keys.create(key("alice", 5, expires_at=datetime(2030, 1, 1)))  # naive
    # Equal created_at on SQLite's virtual clock: the order among them is by (random) id.
    assert sorted(k.id for k in listed) == sorted([live.id, forever.id])
    assert sorted(k.id for k in everything) == sorted([live.id, forever.id, expired.id, revoked.id])
    assert count == 2


async def test_rotation_cuts_the_old_key_to_its_grace_period_never_longer(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        now = await tx.now()
        soon, later = now + timedelta(minutes=5), now + timedelta(hours=1)
        old = await tx.api_keys.create(key("alice", 1))
        new = await tx.api_keys.create(key("alice", 2))
        replaced = await tx.api_keys.mark_replaced(old.id, new.id, later)
        shortened = await tx.api_keys.mark_replaced(old.id, new.id, soon)
        kept = await tx.api_keys.mark_replaced(old.id, new.id, later)
        with pytest.raises(NotFound):
            await tx.api_keys.mark_replaced("ghost", new.id, later)
        with pytest.raises(InvalidInput):
            await tx.api_keys.mark_replaced(old.id, new.id, None)  # type: ignore[arg-type]
    assert (replaced.replaced_by, replaced.expires_at) == (new.id, later)
    assert shortened.expires_at == soon
    assert kept.expires_at == soon  # a grace period never extends a key


async def test_touch_records_the_latest_use_and_ignores_an_unknown_key(store: Store) -> None:
    async with store.transaction() as tx:
        await with_people(tx)
        now = await tx.now()
        made = await tx.api_keys.create(key("alice", 1))
        await tx.api_keys.touch(made.id, now + timedelta(seconds=10))
        await tx.api_keys.touch(made.id, now + timedelta(seconds=5))  # an older use arriving late
        await tx.api_keys.touch("ghost", now)
        touched = await tx.api_keys.get(made.id)
        with pytest.raises(InvalidInput):
            await tx.api_keys.touch(made.id, datetime(2030, 1, 1))  # naive
    assert touched.last_used_at == now + timedelta(seconds=10)


async def test_no_key_hash_in_any_repr(store: Store) -> None:
    secret_hash = "sha256:never-shown"
    new = NewApiKey(owner_id="alice", key_hash=secret_hash, scopes=("*",))
    async with store.transaction() as tx:
        await with_people(tx)
        made = await tx.api_keys.create(new)
        seen = [made, await tx.api_keys.get(made.id), await tx.api_keys.by_hash(secret_hash),
                *await tx.api_keys.for_owner("alice"), await tx.api_keys.revoke(made.id),
                await tx.api_keys.mark_replaced(made.id, "k-2", await tx.now())]
        with pytest.raises(Conflict) as duplicate:
            await tx.api_keys.create(new)
    for record in [new, *seen]:
        assert secret_hash not in repr(record)
        assert "never-shown" not in repr(record)
    assert "never-shown" not in str(duplicate.value)


# --- security events ------------------------------------------------------------------------


async def test_security_events_are_appended_at_now_and_read_newest_first(backend: Backend, store: Store) -> None:
    async with store.transaction() as tx:
        first = await tx.security_events.append(NewSecurityEvent(kind="principal.banned", principal_id="bob",
                                                                 actor_id="alice", detail={"reason": "abuse"}))
        assert first.occurred_at == await tx.now()
    await backend.pass_time(store, 0.05)
    async with store.transaction() as tx:
        await tx.security_events.append(NewSecurityEvent(kind="key.revoked", principal_id="bob", key_id="k-1"))
        await tx.security_events.append(NewSecurityEvent(kind="key.revoked", principal_id="carol", key_id="k-2"))
        everything = await tx.security_events.query()
        bobs = await tx.security_events.query(principal_id="bob")
        revoked = await tx.security_events.query(kind="key.revoked", limit=1)
    assert [e.kind for e in everything][-1] == "principal.banned"
    assert [e.id for e in bobs][-1] == first.id
    assert (first.principal_id, first.actor_id, first.key_id) == ("bob", "alice", None)
    assert first.detail == {"reason": "abuse"}
    assert [e.kind for e in revoked] == ["key.revoked"]


@pytest.mark.parametrize("detail", [
    {"key_hash": "sha256:abc"},
    {"new": {"Secret": "x"}},
    {"tokens": ["t"]},
    {"key": "abc"},
    {"keys": [{"password": "p"}]},
    {"presented": "awk_01abc_secretsecret"},
    {"items": ["ok", "awk_01abc_secretsecret"]},
])
async def test_a_security_event_refuses_anything_named_or_shaped_like_a_secret(
    store: Store, detail: dict[str, Any]
) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as refused:
            await tx.security_events.append(NewSecurityEvent(kind="key.refused", detail=detail))
        assert await tx.security_events.query() == []
    assert refused.value.field.startswith("detail")
    assert "awk_01abc" not in str(refused.value)
    assert "sha256:abc" not in str(refused.value)


async def test_a_security_event_needs_a_kind_and_an_object_detail(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as no_kind:
            await tx.security_events.append(NewSecurityEvent(kind=""))
        with pytest.raises(InvalidInput) as listed:
            await tx.security_events.append(NewSecurityEvent(kind="x", detail=["a"]))  # type: ignore[arg-type]
        plain = await tx.security_events.append(NewSecurityEvent(kind="key.created", key_id="k-1"))
    assert (no_kind.value.field, listed.value.field) == ("kind", "detail")
    assert plain.detail == {}


# --- owner isolation and the audit fields of automations ------------------------------------


async def test_another_owners_automation_or_run_is_not_found(store: Store) -> None:
    automation = await make_automation(store)
    run = await make_run(store, automation)
    async with store.transaction() as tx:
        assert (await tx.automations.get(automation.id, owner_id="alice")).id == automation.id
        assert (await tx.runs.get(run.id, owner_id="alice")).id == run.id
        for lookup in (lambda: tx.automations.get(automation.id, owner_id="bob"),
                       lambda: tx.runs.get(run.id, owner_id="bob"),
                       lambda: tx.automations.get("ghost", owner_id="alice")):
            with pytest.raises(NotFound) as missing:
                await lookup()
            assert missing.value.record in ("automation", "run")


async def test_deletes_by_session_and_agent_touch_only_the_given_owners_automations(store: Store) -> None:
    alices = await make_automation(store)
    bobs = await make_automation(store, owner_id="bob")
    bobs_agent = await make_automation(store, owner_id="bob", labels={"agent_id": "a-1"})
    async with store.transaction() as tx:
        by_session = await tx.automations.delete_by_session("s-1", owner_id="alice")
        by_agent = await tx.automations.delete_by_agent("a-1", owner_id="alice")
        left = {a.id for a in await tx.automations.query()}
        everyone = await tx.automations.delete_by_agent("a-1")
        with pytest.raises(InvalidInput):
            await tx.automations.delete_by_session("s-1", owner_id="")
    assert by_session.automation_ids == (alices.id,)
    assert by_agent.automation_ids == ()
    assert left == {bobs.id, bobs_agent.id}
    assert set(everyone.automation_ids) == {bobs.id, bobs_agent.id}


async def test_an_automation_keeps_who_created_it_and_with_which_key(store: Store) -> None:
    async with store.transaction() as tx:
        made = await tx.automations.create(new_automation(created_by="a-1", created_by_key="k-1"))
        plain = await tx.automations.create(new_automation())
        got = await tx.automations.get(made.id)
        listed = await tx.automations.query(owner_id="alice")
        updated = await tx.automations.update(made.id, 1, AutomationChanges(name="renamed"))
        enabled, _ = await tx.automations.set_enabled(made.id, False)
    for record in (made, got, updated, enabled, *[a for a in listed if a.id == made.id]):
        assert (record.created_by, record.created_by_key) == ("a-1", "k-1")
    assert (plain.created_by, plain.created_by_key) == (None, None)


# --- upgrading a database made before 0006 --------------------------------------------------


_BEFORE_0006 = {
    "automation": "INSERT INTO automations (id, owner_id, name, labels, \"trigger\", action_type, action_config, "
                  "policy, enabled, status, durable, version, \"partition\", created_at, updated_at) VALUES "
                  "('auto-1', 'local', 'n', '{{}}', '{{\"type\": \"cron\"}}', 'webhook', '{{}}', '{{}}', {true}, "
                  "'ACTIVE', {true}, 1, 0, {t}, {t})",
    "run": "INSERT INTO runs (id, automation_id, dedupe_key, origin, status, action_type, action_config, policy, "
           "owner_id, created_at, updated_at, finished_at) VALUES ('run-1', NULL, 'k', 'request', 'SUCCEEDED', "
           "'webhook', '{{}}', '{{}}', 'dave', {t}, {t}, {t})",
    "secret": "INSERT INTO secrets (id, owner_id, name, ciphertext, created_at) VALUES "
              "('sec-1', 'carol', 'smtp', {blob}, {t})",
    "principal": "INSERT INTO principals (id, display_name, status, version, created_at, updated_at) VALUES "
                 "('bob', 'Bob', 'ACTIVE', 1, {t}, {t})",
    "key": "INSERT INTO api_keys (id, owner_id, key_hash, created_at) VALUES ('k-1', 'bob', 'sha256:b', {t})",
}


async def _write_before_0006(backend: Backend) -> None:
    """Rows the way schema 0005 held them: owners with no principal, and one principal with a key."""
    if backend.kind == "postgres":
        values = {"t": "TIMESTAMPTZ '2030-01-01 09:00:00+00'", "blob": "'\\x00'::bytea", "true": "true"}
        conn = await asyncpg.connect(backend.url)
        try:
            for sql in _BEFORE_0006.values():
                await conn.execute(sql.format(**values))
        finally:
            await conn.close()
        return
    values = {"t": "1893488400000000", "blob": "X'00'", "true": "1"}
    with closing(sqlite3.connect(backend.url.removeprefix("sqlite:///"))) as conn, conn:
        for sql in _BEFORE_0006.values():
            conn.execute(sql.format(**values))


async def _migrated_to(backend: Backend, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    adapter = sqlite_adapter if backend.kind == "sqlite" else postgres_adapter
    monkeypatch.setattr(adapter, "load_migrations", lambda dialect: load_migrations(dialect)[:count])
    async with backend.opened():
        pass
    monkeypatch.undo()


async def test_the_upgrade_gives_every_owner_a_user_with_the_ceiling_it_had(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _migrated_to(backend, monkeypatch, 5)
    await _write_before_0006(backend)
    async with backend.opened() as store, store.transaction() as tx:
        found = await tx.principals.get_many(["local", "dave", "carol", "bob"])
        old_key = await tx.api_keys.get("k-1")
        automation = await tx.automations.get("auto-1", owner_id="local")
        events = await tx.security_events.query()
    assert sorted(found) == ["bob", "carol", "dave", "local"]
    for principal_id in ("local", "dave", "carol"):
        made = found[principal_id]
        assert (made.kind, made.display_name, made.scopes, made.status, made.parent_id) == (
            USER, principal_id, ("*",), PrincipalStatus.ACTIVE, None)
    assert (found["bob"].display_name, found["bob"].scopes) == ("Bob", ("*",))
    assert (old_key.agent_id, old_key.expires_at, old_key.last_used_at, old_key.replaced_by) == (None,) * 4
    assert (automation.created_by, automation.created_by_key) == (None, None)
    assert events == []


def _count_statements(tx: Transaction) -> list[str]:
    """Record the name of every query the transaction runs from now on (spying on its runner)."""
    names: list[str] = []
    sql = tx._sql  # type: ignore[attr-defined]
    fetch: Callable[..., Awaitable[Any]] = sql.fetch

    async def counted(name: str, params: Any = None) -> Any:
        names.append(name)
        return await fetch(name, params)

    sql.fetch = counted
    return names
