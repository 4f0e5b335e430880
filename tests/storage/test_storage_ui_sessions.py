"""Contract: the dashboard's sign-in sessions (migration 0009), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actwheel.errors import Conflict, InvalidInput
from actwheel.storage import Store
from actwheel.storage.records import NewUiSession

T0 = datetime(2031, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


def _new(session_id: str = "s1", session_hash: str = "h1", *, hours: int = 8) -> NewUiSession:
    return NewUiSession(id=session_id, session_hash=session_hash, key_id="k1", owner_id="alice",
                        principal_id="alice", created_at=T0, expires_at=T0 + timedelta(hours=hours))


async def test_a_session_is_found_by_its_hash_with_its_key_and_principal(store: Store) -> None:
    async with store.transaction() as tx:
        created = await tx.ui_sessions.create(_new())
    async with store.transaction() as tx:
        found = await tx.ui_sessions.by_hash("h1")
        missing = await tx.ui_sessions.by_hash("h2")
    assert found == created
    assert (found.key_id, found.owner_id, found.principal_id) == ("k1", "alice", "alice")
    assert (found.created_at, found.expires_at, found.revoked_at) == (T0, T0 + timedelta(hours=8), None)
    assert missing is None
    assert "h1" not in repr(found)


async def test_a_second_session_with_the_same_id_or_hash_is_a_conflict(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.ui_sessions.create(_new())
    for duplicate in (_new("s1", "h2"), _new("s2", "h1")):
        with pytest.raises(Conflict):
            async with store.transaction() as tx:
                await tx.ui_sessions.create(duplicate)


async def test_revoking_keeps_the_first_instant_and_a_missing_session_says_so(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.ui_sessions.create(_new())
        first = await tx.ui_sessions.revoke("h1", at=T0 + timedelta(minutes=1))
        again = await tx.ui_sessions.revoke("h1", at=T0 + timedelta(minutes=5))
        none = await tx.ui_sessions.revoke("nope", at=T0)
        found = await tx.ui_sessions.by_hash("h1")
    assert (first, again, none) == (True, True, False)
    assert found is not None
    assert found.revoked_at == T0 + timedelta(minutes=1)


async def test_purge_deletes_only_the_expired_sessions(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.ui_sessions.create(_new("s1", "h1", hours=1))
        await tx.ui_sessions.create(_new("s2", "h2", hours=10))
        purged = await tx.ui_sessions.purge(T0 + timedelta(hours=2))
        kept = await tx.ui_sessions.by_hash("h2")
        gone = await tx.ui_sessions.by_hash("h1")
    assert (purged, kept is not None, gone) == (1, True, None)


async def test_a_naive_instant_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInput):
        async with store.transaction() as tx:
            await tx.ui_sessions.create(NewUiSession(id="s", session_hash="h", key_id="k", owner_id="a",
                                                     principal_id="a", created_at=T0.replace(tzinfo=None),
                                                     expires_at=T0))
