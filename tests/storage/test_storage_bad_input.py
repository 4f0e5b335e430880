"""Contract: bad input raises InvalidInput naming the field and value, and writes nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from storage_harness import T0, make_automation, new_automation, new_run

from actwheel.errors import InvalidInput
from actwheel.storage import Store
from actwheel.storage.records import (
    AutomationChanges,
    CursorAdvance,
    NewAuditEntry,
    NewOutboxMessage,
    RunOutcome,
    RunStatus,
)

NAIVE = datetime(2030, 1, 1, 9, 0)
HUGE = {"blob": "x" * (256 * 1024 + 1)}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"action_config": HUGE}, "action_config"),
        ({"action_config": {"amount": Decimal("1.5")}}, "action_config"),
        ({"trigger": {"at": object()}}, "trigger"),
        ({"policy": {1, 2}}, "policy"),
        ({"next_run_at": NAIVE}, "next_run_at"),
        ({"end_at": "2030-01-01"}, "end_at"),
        ({"status": "RUNNING"}, "status"),
        ({"name": ""}, "name"),
        ({"labels": {"session_id": 7}}, "labels.session_id"),
        ({"labels": ["not", "a", "map"]}, "labels"),
    ],
)
async def test_bad_automation_is_refused_and_nothing_is_written(
    store: Store, overrides: dict[str, Any], field: str
) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as info:
            await tx.automations.create(new_automation(**overrides))
        assert await tx.automations.query() == []
    assert info.value.field == field
    assert field in str(info.value)


async def test_oversized_error_reports_the_size_not_the_document(store: Store) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as info:
            await tx.automations.create(new_automation(action_config=HUGE))
    assert "bytes" in str(info.value.value)
    assert len(str(info.value)) < 300


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"status": "EXPLODED"}, "runs[1].status"),
        ({"status": RunStatus.RUNNING}, "runs[1].status"),
        ({"status": RunStatus.RETRY_WAIT}, "runs[1].not_before"),
        ({"origin": "cron"}, "runs[1].origin"),
        ({"scheduled_for": NAIVE}, "runs[1].scheduled_for"),
        ({"context": {"payload": b"bytes"}}, "runs[1].context"),
        ({"action_config": HUGE}, "runs[1].action_config"),
        ({"dedupe_key": ""}, "runs[1].dedupe_key"),
    ],
)
async def test_bad_run_in_a_batch_refuses_the_whole_batch(
    store: Store, overrides: dict[str, Any], field: str
) -> None:
    a = await make_automation(store)
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as info:
            await tx.runs.insert_many([new_run(a, "good"), new_run(a, "bad", **overrides)])
        assert await tx.runs.query() == []
    assert info.value.field == field


async def test_bad_outcomes_updates_and_cursors_are_refused(store: Store) -> None:
    a = await make_automation(store)
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput, match=r"outcomes\[0\]\.status"):
            await tx.runs.finish(RunOutcome(run_id="r", owner="w", epoch=1, status=RunStatus.RUNNING))
        with pytest.raises(InvalidInput, match=r"outcomes\[0\]\.status"):
            await tx.runs.finish(RunOutcome(run_id="r", owner="w", epoch=1, status="DONE"))  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match=r"outcomes\[0\]\.result"):
            await tx.runs.finish(RunOutcome(run_id="r", owner="w", epoch=1, status=RunStatus.FAILED, result={1j}))
        with pytest.raises(InvalidInput, match="expected_next_run_at"):
            await tx.automations.advance_cursor(a.id, 1, NAIVE, T0)
        with pytest.raises(InvalidInput, match=r"advances\[0\]\.new_next_run_at"):
            await tx.automations.advance_cursors(
                [CursorAdvance(automation_id=a.id, version=1, expected_next_run_at=T0, new_next_run_at=NAIVE)]
            )
        with pytest.raises(InvalidInput, match="action_config"):
            await tx.automations.update(a.id, 1, AutomationChanges(action_config=HUGE))
        with pytest.raises(InvalidInput, match="lease_s"):
            await tx.runs.claim("r", "w", 0)
        with pytest.raises(InvalidInput, match="limit"):
            await tx.runs.query(limit=0)
        with pytest.raises(InvalidInput, match=r"statuses\[0\]"):
            await tx.runs.query(statuses=["NOPE"])  # type: ignore[list-item]
        with pytest.raises(InvalidInput, match=r"messages\[0\]\.body"):
            await tx.outbox.append(NewOutboxMessage(exchange="x", routing_key="k", body="text"))  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match=r"entries\[0\]\.occurred_at"):
            await tx.audit.append(NewAuditEntry(event_id="e", phase="P", actor="a", occurred_at=NAIVE))
        with pytest.raises(InvalidInput, match="ciphertext"):
            await tx.secrets.put("alice", "s", "plaintext")  # type: ignore[arg-type]
        unchanged = await tx.automations.get(a.id)
        assert await tx.outbox.take_batch() == []
    assert unchanged == a


async def test_changes_with_a_naive_time_are_refused(store: Store) -> None:
    a = await make_automation(store)
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as info:
            await tx.automations.update(a.id, 1, AutomationChanges(next_run_at=NAIVE))
    assert info.value.field == "next_run_at"
    assert info.value.value == NAIVE


def test_new_records_are_frozen() -> None:
    n = new_automation()
    with pytest.raises(AttributeError):
        n.name = "x"  # type: ignore[misc]
    assert replace(n, name="y").name == "y"
