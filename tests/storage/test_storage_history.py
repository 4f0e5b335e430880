"""The automation change history's batch write (``append_many``, a batch of creates in one statement:
COPY on PostgreSQL) on both databases: the same rows ``append`` writes, at the transaction's now, and a
bad entry named by its index with nothing written."""

from __future__ import annotations

import pytest

from actwheel.errors import InvalidInput
from actwheel.storage import Store
from actwheel.storage.records import NewAutomationHistory


def _created(i: int, *, change: str = "created") -> NewAutomationHistory:
    return NewAutomationHistory(automation_id=f"a{i}", owner_id="alice", change=change, actor_id="alice",
                                key_id="k1" if i % 2 else None, before=None,
                                after={"name": f"n{i}", "trigger": {"type": "cron", "expression": "0 0 3 * * ?"}})


async def test_append_many_writes_what_append_writes_at_the_transaction_s_now(store: Store) -> None:
    async with store.transaction() as tx:
        now = await tx.now()
        await tx.automation_history.append_many([_created(i) for i in range(3)])
        single = await tx.automation_history.append(_created(3))
    async with store.transaction() as tx:
        entries = [(await tx.automation_history.for_automation(f"a{i}"))[0] for i in range(4)]
    for i, entry in enumerate(entries[:3]):
        assert (entry.automation_id, entry.owner_id, entry.change, entry.actor_id, entry.key_id) == (
            f"a{i}", "alice", "created", "alice", "k1" if i % 2 else None)
        assert entry.before is None
        assert entry.after == {"name": f"n{i}", "trigger": {"type": "cron", "expression": "0 0 3 * * ?"}}
        assert entry.at == now
        assert entry.seq < single.seq
    assert len({e.id for e in entries}) == 4


async def test_a_bad_entry_is_named_by_its_index_and_nothing_is_written(store: Store) -> None:
    with pytest.raises(InvalidInput) as caught:
        async with store.transaction() as tx:
            await tx.automation_history.append_many([_created(0), _created(1, change="renamed")])
    assert caught.value.field == "history[1].change"
    assert caught.value.value == "renamed"
    async with store.transaction() as tx:
        assert await tx.automation_history.for_automation("a0") == []


async def test_an_empty_batch_writes_nothing(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.automation_history.append_many([])
        assert await tx.automation_history.for_automation("a0") == []
