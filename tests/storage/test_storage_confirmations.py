"""Contract: the MCP face's run-now confirmations and server keys (migration 0007), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from storage_harness import Backend

from actwheel.errors import Conflict, InvalidInput, NotFound
from actwheel.storage import Store
from actwheel.storage.records import NewConfirmation

T0 = datetime(2031, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


def _new(confirmation_id: str = "c1", token_hash: str = "h1") -> NewConfirmation:
    return NewConfirmation(id=confirmation_id, token_hash=token_hash, owner_id="alice", key_id="k1",
                           automation_id="a1", automation_version=3, created_at=T0,
                           expires_at=T0 + timedelta(minutes=2))


async def test_a_confirmation_is_found_by_its_hash_with_every_binding(store: Store) -> None:
    async with store.transaction() as tx:
        created = await tx.confirmations.create(_new())
    async with store.transaction() as tx:
        found = await tx.confirmations.by_hash("h1")
        missing = await tx.confirmations.by_hash("h2")
    assert found == created
    assert (found.owner_id, found.key_id, found.automation_id, found.automation_version) == ("alice", "k1", "a1", 3)
    assert (found.created_at, found.expires_at) == (T0, T0 + timedelta(minutes=2))  # instants as given, to the µs
    assert (found.used_at, found.run_id) == (None, None)
    assert missing is None
    assert "h1" not in repr(found)


async def test_a_second_confirmation_with_the_same_id_or_hash_is_a_conflict(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.confirmations.create(_new())
    for duplicate in (_new("c1", "h2"), _new("c2", "h1")):
        with pytest.raises(Conflict):
            async with store.transaction() as tx:
                await tx.confirmations.create(duplicate)


async def test_the_first_use_is_kept_and_a_later_one_changes_nothing(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.confirmations.create(_new())
        first = await tx.confirmations.mark_used("c1", at=T0 + timedelta(seconds=5), run_id="r1")
        again = await tx.confirmations.mark_used("c1", at=T0 + timedelta(seconds=9), run_id="r2")
    assert (first.used_at, first.run_id) == (T0 + timedelta(seconds=5), "r1")
    assert again == first
    with pytest.raises(NotFound):
        async with store.transaction() as tx:
            await tx.confirmations.mark_used("ghost", at=T0, run_id="r1")


async def test_purge_deletes_only_the_confirmations_expired_before_the_instant(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.confirmations.create(_new("c1", "h1"))
        await tx.confirmations.create(NewConfirmation(
            id="c2", token_hash="h2", owner_id="alice", key_id="", automation_id="a1", automation_version=1,
            created_at=T0, expires_at=T0 + timedelta(hours=1)))
        purged = await tx.confirmations.purge(T0 + timedelta(minutes=3))
        left = [await tx.confirmations.by_hash(h) for h in ("h1", "h2")]
    assert purged == 1
    assert left[0] is None
    assert left[1] is not None
    assert left[1].key_id == ""


async def test_a_naive_instant_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInput) as raised:
        async with store.transaction() as tx:
            await tx.confirmations.create(NewConfirmation(
                id="c1", token_hash="h1", owner_id="alice", key_id="k1", automation_id="a1", automation_version=1,
                created_at=T0, expires_at=datetime(2031, 1, 1)))
    assert raised.value.field == "expires_at"


async def test_the_server_key_is_made_once_and_every_later_candidate_answers_the_stored_one(store: Store) -> None:
    async with store.transaction() as tx:
        first = await tx.confirmations.server_key("digest", b"a" * 32)
    async with store.transaction() as tx:
        second = await tx.confirmations.server_key("digest", b"b" * 32)
        other = await tx.confirmations.server_key("other", b"c" * 40)
    assert (first, second, other) == (b"a" * 32, b"a" * 32, b"c" * 40)
    with pytest.raises(InvalidInput):
        async with store.transaction() as tx:
            await tx.confirmations.server_key("digest", b"short")


async def test_two_stores_racing_for_the_first_server_key_agree_on_one(backend: Backend) -> None:
    async with backend.opened() as one, backend.opened() as two:
        async def key_of(store: Store, candidate: bytes) -> bytes:
            async with store.transaction() as tx:
                return await tx.confirmations.server_key("digest", candidate)

        keys = await asyncio.gather(key_of(one, b"1" * 32), key_of(two, b"2" * 32))
    assert keys[0] == keys[1]
    assert keys[0] in (b"1" * 32, b"2" * 32)
