"""Contract: runs planned ahead of their instant (fire-ahead) — the claim waits for the instant, an edit
withdraws what has not started and frees its instant's key, and the overlap check at the instant counts the
earlier runs still going. SQLite and PostgreSQL alike (the database's clock decides)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from storage_harness import Backend, db_now, make_automation, make_run, new_run

from actwheel.errors import InvalidInput
from actwheel.storage import Store
from actwheel.storage.records import Automation, NewRun, Origin, Run, RunOutcome, RunStatus


def _key(instant: datetime) -> str:
    return f"schedule:{instant.isoformat()}"


async def _ahead(store: Store, automation: Automation, instant: datetime) -> Run:
    """A run planned ahead of ``instant``, as the planner writes it."""
    return await make_run(store, automation, _key(instant), scheduled_for=instant, not_before=instant)


async def test_a_run_planned_ahead_is_not_claimed_before_its_instant(store: Store, backend: Backend) -> None:
    a = await make_automation(store)
    instant = await db_now(store) + timedelta(seconds=1)
    run = await _ahead(store, a, instant)
    async with store.transaction() as tx:
        assert await tx.runs.claim_many([run.id], "w1", 30) == []
    await backend.pass_time(store, 1.2)
    async with store.transaction() as tx:
        [claimed] = await tx.runs.claim_many([run.id], "w1", 30)
    assert (claimed.status, claimed.attempt, claimed.not_before) == (RunStatus.RUNNING, 1, instant)


async def test_an_edit_withdraws_only_what_is_planned_ahead_and_frees_the_instant_s_key(store: Store) -> None:
    a = await make_automation(store)
    now = await db_now(store)
    ahead = await _ahead(store, a, now + timedelta(minutes=1))
    later = await _ahead(store, a, now + timedelta(minutes=2))
    due = await make_run(store, a, _key(now), scheduled_for=now)  # planned at its instant: not ahead
    manual = await make_run(store, a, "manual:x", origin=Origin.MANUAL, scheduled_for=now,
                            not_before=now + timedelta(minutes=1))
    retry = await make_run(store, a, "schedule:retry", status=RunStatus.RETRY_WAIT, scheduled_for=now,
                           not_before=now + timedelta(minutes=1))
    async with store.transaction() as tx:
        withdrawn = await tx.runs.withdraw_ahead(a.id, "automation_updated")
        again = await tx.runs.insert(_new_ahead(a, now + timedelta(minutes=1)))  # the re-plan takes the key
        untouched = [await tx.runs.get(r.id) for r in (due, manual, retry)]
    assert [r.id for r in withdrawn] == [ahead.id, later.id]  # by instant
    for run in withdrawn:
        assert (run.status, run.reason, run.dedupe_key) == (RunStatus.CANCELED, "automation_updated",
                                                             f"withdrawn:{run.id}")
        assert run.finished_at is not None
    assert again.created
    assert again.run.dedupe_key == _key(now + timedelta(minutes=1))
    assert [r.status for r in untouched] == [RunStatus.PENDING, RunStatus.PENDING, RunStatus.RETRY_WAIT]


def _new_ahead(a: Automation, instant: datetime) -> NewRun:
    return new_run(a, _key(instant), scheduled_for=instant, not_before=instant)


async def test_a_run_claimed_at_its_instant_is_not_withdrawn(store: Store, backend: Backend) -> None:
    a = await make_automation(store)
    run = await _ahead(store, a, await db_now(store) + timedelta(seconds=1))
    await backend.pass_time(store, 1.2)
    async with store.transaction() as tx:
        assert await tx.runs.withdraw_ahead(a.id, "automation_updated") == []  # its instant passed
        [claimed] = await tx.runs.claim_many([run.id], "w1", 30)
    async with store.transaction() as tx:
        assert await tx.runs.withdraw_ahead(a.id, "automation_updated") == []
        assert (await tx.runs.get(claimed.id)).status is RunStatus.RUNNING


async def test_going_before_counts_the_earlier_runs_still_going_up_to_two(store: Store) -> None:
    a = await make_automation(store)
    other = await make_automation(store)
    now = await db_now(store)
    first = await make_run(store, a, "k1", scheduled_for=now - timedelta(seconds=3))
    second = await make_run(store, a, "k2", scheduled_for=now - timedelta(seconds=2))
    done = await make_run(store, a, "k3", scheduled_for=now - timedelta(seconds=4))
    third = await make_run(store, a, "k4", scheduled_for=now - timedelta(seconds=1))
    later = await make_run(store, a, "k5", scheduled_for=now + timedelta(seconds=5))
    alone = await make_run(store, other, "k1", scheduled_for=now)
    async with store.transaction() as tx:
        [claimed] = await tx.runs.claim_many([done.id], "w1", 30)
        await tx.runs.finish(RunOutcome(run_id=done.id, owner="w1", epoch=claimed.lease_epoch,
                                        status=RunStatus.SUCCEEDED))
        await tx.runs.claim_many([first.id], "w1", 30)  # RUNNING counts as going, as PENDING does
        going = await tx.runs.going_before([first.id, second.id, third.id, later.id, alone.id, "nope"])
    assert going == {first.id: 0, second.id: 1, third.id: 2, later.id: 2, alone.id: 0}


@pytest.mark.parametrize(("automation_id", "reason", "field"), [
    ("", "automation_updated", "automation_id"), ("a", "", "reason"), (7, "automation_updated", "automation_id")])
async def test_withdraw_ahead_refuses_bad_input_naming_the_field(store: Store, automation_id: object, reason: str,
                                                                 field: str) -> None:
    async with store.transaction() as tx:
        with pytest.raises(InvalidInput) as caught:
            await tx.runs.withdraw_ahead(automation_id, reason)  # type: ignore[arg-type]
        assert await tx.runs.going_before([]) == {}
    assert caught.value.field == field


async def test_a_run_planned_ahead_is_not_backlog_until_its_instant(store: Store, backend: Backend) -> None:
    a = await make_automation(store)
    now = await db_now(store)
    await make_run(store, a, "k0", scheduled_for=now)
    await _ahead(store, a, now + timedelta(seconds=1))
    async with store.transaction() as tx:
        assert await tx.runs.count_backlog(100) == 1  # the planner may go on planning ahead of it
    await backend.pass_time(store, 1.2)
    async with store.transaction() as tx:
        assert await tx.runs.count_backlog(100) == 2  # its instant came: it waits for an executor now


async def test_rewind_cursor_moves_a_later_or_null_cursor_back_without_a_version_bump(store: Store) -> None:
    from actwheel.errors import NotFound
    from actwheel.storage.records import AutomationStatus, CursorAdvance

    a = await make_automation(store)
    assert a.next_run_at is not None
    earlier = a.next_run_at - timedelta(minutes=5)
    async with store.transaction() as tx:
        back = await tx.automations.rewind_cursor(a.id, earlier)
        kept = await tx.automations.rewind_cursor(a.id, earlier + timedelta(minutes=1))  # already before it
        assert await tx.automations.advance_cursors([CursorAdvance(
            automation_id=a.id, version=a.version, expected_next_run_at=earlier, new_next_run_at=None)])
        completed = await tx.automations.get(a.id)
        again = await tx.automations.rewind_cursor(a.id, earlier)
        with pytest.raises(NotFound):
            await tx.automations.rewind_cursor("nope", earlier)
        with pytest.raises(InvalidInput) as caught:
            await tx.automations.rewind_cursor(a.id, None)  # type: ignore[arg-type]
    assert (back.next_run_at, back.version) == (earlier, a.version)
    assert kept.next_run_at == earlier
    assert (completed.status, completed.next_run_at) == (AutomationStatus.COMPLETED, None)
    assert (again.status, again.next_run_at, again.version) == (AutomationStatus.ACTIVE, earlier, a.version)
    assert caught.value.field == "to"
