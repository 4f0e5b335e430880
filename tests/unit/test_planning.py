"""plan_instants: misfire, overlap, owner, cursor, parked ranges and the MAX_INSTANTS cap. Pure: no IO, no clock.

The planner-level tests at the end run with parking off (each instant its own row); parking is
tested in test_parking.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from actwheel.actors.planner import Planner
from actwheel.actors.planning import MAX_INSTANTS, Plan, only_overlapped, plan_instants
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.messages import DueItem
from actwheel.policy import Policy
from actwheel.service import Caller
from actwheel.settings import Settings
from actwheel.triggers import parse

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
EVERY_MINUTE = parse({"type": "cron", "expression": "0 * * * * ?", "timezone": "UTC"})
EVERY_SECOND = parse({"type": "cron", "expression": "* * * * * ?", "timezone": "UTC"})


def _plan(*, cursor: datetime = T0, scheduled_for: datetime = T0, now: datetime | None = None,
          busy: bool = False, owner_active: bool = True, trigger: Any = EVERY_MINUTE,
          overlapped_until: datetime | None = None, plan_ahead: bool = False, **policy: Any) -> Plan:
    return plan_instants(trigger=trigger, cursor=cursor, scheduled_for=scheduled_for,
                         now=now if now is not None else scheduled_for, policy=Policy.parse(policy),
                         busy=busy, owner_active=owner_active, overlapped_until=overlapped_until,
                         plan_ahead=plan_ahead)


def _shape(plan: Plan) -> list[tuple[str, str | None]]:
    return [(p.at.strftime("%H:%M"), p.skip_reason) for p in plan.instants]


def test_on_time_instant_fires_and_cursor_moves_to_the_next_fire() -> None:
    plan = _plan()
    assert _shape(plan) == [("09:00", None)]
    assert plan.new_next_run_at == T0 + timedelta(minutes=1)


def test_backlog_within_grace_fires_every_instant_when_overlap_allows() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(minutes=2), now=T0 + timedelta(minutes=2, seconds=30),
                 grace_s=600, overlap="allow")
    assert _shape(plan) == [("09:00", None), ("09:01", None), ("09:02", None)]
    assert plan.new_next_run_at == T0 + timedelta(minutes=3)


def test_misfire_fire_once_fires_only_the_latest_late_instant() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(minutes=4), now=T0 + timedelta(hours=1), grace_s=60,
                 overlap="allow")
    assert _shape(plan) == [("09:00", "misfire"), ("09:01", "misfire"), ("09:02", "misfire"),
                            ("09:03", "misfire"), ("09:04", None)]


def test_misfire_skip_records_every_late_instant() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(minutes=2), now=T0 + timedelta(hours=1), grace_s=60,
                 misfire="skip", overlap="allow")
    assert [p.skip_reason for p in plan.instants] == ["misfire"] * 3
    assert plan.new_next_run_at == T0 + timedelta(minutes=3)


def test_grace_boundary_is_inclusive() -> None:
    exactly = _plan(now=T0 + timedelta(seconds=60), grace_s=60, misfire="skip")
    beyond = _plan(now=T0 + timedelta(seconds=60, microseconds=1), grace_s=60, misfire="skip")
    assert exactly.instants[0].skip_reason is None
    assert beyond.instants[0].skip_reason == "misfire"


def test_late_and_on_time_instants_in_one_plan() -> None:
    # 09:00 and 09:01 are beyond an 80 s grace at 09:02:30; 09:02 is within it.
    plan = _plan(scheduled_for=T0 + timedelta(minutes=2), now=T0 + timedelta(minutes=2, seconds=30),
                 grace_s=80, misfire="skip", overlap="allow")
    assert _shape(plan) == [("09:00", "misfire"), ("09:01", "misfire"), ("09:02", None)]


def test_overlap_skip_while_busy() -> None:
    plan = _plan(busy=True)
    assert _shape(plan) == [("09:00", "overlap")]
    assert plan.new_next_run_at == T0 + timedelta(minutes=1)  # the cursor moves on regardless


def test_overlap_skip_fires_only_the_first_of_a_backlog() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(minutes=2), grace_s=600)
    assert _shape(plan) == [("09:00", None), ("09:01", "overlap"), ("09:02", "overlap")]


def test_buffer_one_queues_one_behind_a_busy_run() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(minutes=2), grace_s=600, overlap="buffer_one", busy=True)
    assert _shape(plan) == [("09:00", None), ("09:01", "overlap"), ("09:02", "overlap")]


def test_buffer_one_when_idle_runs_one_and_buffers_one() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(minutes=2), grace_s=600, overlap="buffer_one")
    assert _shape(plan) == [("09:00", None), ("09:01", None), ("09:02", "overlap")]


def test_allow_queues_everything_even_when_busy() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(minutes=2), grace_s=600, overlap="allow", busy=True)
    assert [p.skip_reason for p in plan.instants] == [None, None, None]


def test_misfire_wins_over_overlap_for_late_instants() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(minutes=1), now=T0 + timedelta(hours=1), busy=True)
    assert _shape(plan) == [("09:00", "misfire"), ("09:01", "overlap")]


def test_inactive_owner_skips_everything_with_owner_inactive() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(minutes=2), now=T0 + timedelta(hours=1), owner_active=False,
                 busy=True)
    assert [p.skip_reason for p in plan.instants] == ["owner_inactive"] * 3
    assert plan.new_next_run_at == T0 + timedelta(minutes=3)


def test_parked_instants_up_to_the_busy_sighting_are_one_overlap_range() -> None:
    # Parked from 09:01: seen busy at 09:03:10; released at 09:04:05, its run over.
    plan = _plan(cursor=T0 + timedelta(minutes=1), scheduled_for=T0 + timedelta(minutes=4),
                 now=T0 + timedelta(minutes=4, seconds=5), overlapped_until=T0 + timedelta(minutes=3, seconds=10))
    first, *rest = plan.instants
    assert (first.at, first.skip_reason, first.through, first.count) == (
        T0 + timedelta(minutes=1), "overlap", T0 + timedelta(minutes=3), 3)
    assert _shape(Plan(tuple(rest), None)) == [("09:04", None)]  # after the sighting: the ordinary rules
    assert plan.new_next_run_at == T0 + timedelta(minutes=5)


def test_parked_range_wins_over_misfire_for_the_overlapped_instants() -> None:
    # An hour later, the overlapped instants are still overlap (they were, when they came), not misfire.
    plan = _plan(scheduled_for=T0 + timedelta(minutes=2), now=T0 + timedelta(hours=1),
                 overlapped_until=T0 + timedelta(minutes=2))
    assert [(p.skip_reason, p.count) for p in plan.instants] == [("overlap", 3)]


def test_one_parked_instant_is_an_ordinary_row() -> None:
    plan = _plan(overlapped_until=T0 + timedelta(seconds=30))
    assert [(p.skip_reason, p.through, p.count) for p in plan.instants] == [("overlap", None, 1)]


def test_parked_instants_of_a_banned_owner_stay_owner_inactive_rows() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(minutes=2), owner_active=False,
                 overlapped_until=T0 + timedelta(minutes=2))
    assert [(p.skip_reason, p.count) for p in plan.instants] == [("owner_inactive", 1)] * 3


def test_only_overlapped_is_what_may_be_parked() -> None:
    assert only_overlapped(_plan(busy=True))
    assert only_overlapped(_plan(scheduled_for=T0 + timedelta(minutes=2), busy=True, grace_s=600))
    assert not only_overlapped(_plan())  # it fires
    assert not only_overlapped(_plan(now=T0 + timedelta(hours=1), busy=True, misfire="skip"))  # a misfire
    once = parse({"type": "once", "at": T0.isoformat()})
    assert not only_overlapped(_plan(trigger=once, busy=True))  # it completes: record it now


def test_exhausted_once_trigger_has_no_next_cursor() -> None:
    once = parse({"type": "once", "at": T0.isoformat()})
    plan = _plan(trigger=once)
    assert _shape(plan) == [("09:00", None)]
    assert plan.new_next_run_at is None


def test_scheduled_for_between_fires_plans_up_to_it_only() -> None:
    plan = _plan(scheduled_for=T0 + timedelta(seconds=90), grace_s=600, overlap="allow")
    assert _shape(plan) == [("09:00", None), ("09:01", None)]
    assert plan.new_next_run_at == T0 + timedelta(minutes=2)


def test_instants_keep_the_trigger_zone() -> None:
    shanghai = parse({"type": "cron", "expression": "0 0 9 * * ?", "timezone": "Asia/Shanghai"})
    cursor = datetime(2030, 1, 1, 1, 0, tzinfo=UTC)  # 09:00 in Shanghai
    plan = _plan(trigger=shanghai, cursor=cursor, scheduled_for=cursor)
    assert plan.instants[0].at == cursor
    assert plan.new_next_run_at == cursor + timedelta(days=1)
    assert plan.new_next_run_at is not None
    assert plan.new_next_run_at.utcoffset() == timedelta(hours=8)


def test_backlog_longer_than_the_cap_is_planned_in_chunks() -> None:
    end = T0 + timedelta(seconds=MAX_INSTANTS + 499)
    plan = _plan(trigger=EVERY_SECOND, scheduled_for=end, now=end, grace_s=10_000, overlap="allow")
    assert len(plan.instants) == MAX_INSTANTS
    assert plan.instants[-1].at == T0 + timedelta(seconds=MAX_INSTANTS - 1)
    assert plan.new_next_run_at == T0 + timedelta(seconds=MAX_INSTANTS)
    rest = _plan(trigger=EVERY_SECOND, cursor=plan.new_next_run_at, scheduled_for=end, now=end,
                 grace_s=10_000, overlap="allow")
    assert len(rest.instants) == 500
    assert rest.instants[-1].at == end
    assert rest.new_next_run_at == end + timedelta(seconds=1)


def _drain(*, cursor: datetime, scheduled_for: datetime, now: datetime, **policy: Any) -> list[datetime]:
    """Plan announcement after announcement until the cursor passes ``scheduled_for``; the fired instants."""
    fired: list[datetime] = []
    while cursor <= scheduled_for:
        plan = _plan(trigger=EVERY_SECOND, cursor=cursor, scheduled_for=scheduled_for, now=now, **policy)
        fired += [p.at for p in plan.instants if p.skip_reason is None]
        assert plan.new_next_run_at is not None
        cursor = plan.new_next_run_at
    return fired


def test_fire_once_fires_once_for_a_backlog_longer_than_the_cap() -> None:
    now = T0 + timedelta(hours=1)
    fired = _drain(cursor=T0, scheduled_for=now - timedelta(minutes=30), now=now, grace_s=60, overlap="allow")
    assert fired == [now - timedelta(minutes=30)]


def test_fire_once_fires_once_for_a_backlog_under_the_cap() -> None:
    now = T0 + timedelta(hours=1)
    fired = _drain(cursor=T0, scheduled_for=T0 + timedelta(seconds=600), now=now, grace_s=60, overlap="allow")
    assert fired == [T0 + timedelta(seconds=600)]


def test_plan_is_deterministic() -> None:
    kwargs: dict[str, Any] = {"scheduled_for": T0 + timedelta(minutes=3), "now": T0 + timedelta(minutes=30),
                              "grace_s": 120}
    assert _plan(**kwargs) == _plan(**kwargs)


# --- through the planner, on a real SQLite store: what "busy" means across announcements ------------------


@pytest.fixture
async def engine(tmp_path: Path, clock: VirtualClock) -> AsyncIterator[Engine]:
    """The conftest's engine with parking off: every instant planned is its own row."""
    built = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'db'}", instance="t", auth=False,
                            plan_parking=False), clock=clock)
    await built.store.start()
    try:
        yield built
    finally:
        await built.store.stop()


async def _announce_next(engine: Engine, automation_id: str) -> None:
    automation = await engine.service.get(Caller("local"), automation_id)
    assert automation.next_run_at is not None
    engine.clock.set(automation.next_run_at)  # type: ignore[attr-defined]
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    await planner.plan([DueItem(automation_id=automation_id, scheduled_for=automation.next_run_at)])


async def _statuses(engine: Engine, automation_id: str) -> list[tuple[str, str | None]]:
    async with engine.store.transaction() as tx:
        runs = await tx.runs.query(automation_id=automation_id, limit=100)
    return [(r.status.value, r.reason) for r in sorted(runs, key=lambda r: r.scheduled_for or T0)]


async def _create(engine: Engine, overlap: str) -> str:
    automation = await engine.service.create(Caller("local"), {
        "trigger": {"type": "cron", "expression": "0 * * * * ?", "timezone": "UTC"},
        "action": {"type": "simple.op", "config": {"op": "log", "message": "hi"}},
        "policy": {"overlap": overlap}})
    return automation.id


async def test_planner_overlap_skip_records_the_second_instant_skipped(engine: Engine) -> None:
    automation_id = await _create(engine, "skip")
    for _ in range(3):
        await _announce_next(engine, automation_id)
    assert await _statuses(engine, automation_id) == [("PENDING", None), ("SKIPPED", "overlap"),
                                                      ("SKIPPED", "overlap")]


async def test_planner_stale_announcement_is_dropped(engine: Engine) -> None:
    automation_id = await _create(engine, "allow")
    first = (await engine.service.get(Caller("local"), automation_id)).next_run_at
    assert first is not None
    await _announce_next(engine, automation_id)
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    assert await planner.plan([DueItem(automation_id=automation_id, scheduled_for=first)]) == 0
    assert len(await _statuses(engine, automation_id)) == 1


async def test_planner_buffer_one_buffers_at_most_one(engine: Engine) -> None:
    automation_id = await _create(engine, "buffer_one")
    for _ in range(3):
        await _announce_next(engine, automation_id)
    assert await _statuses(engine, automation_id) == [("PENDING", None), ("PENDING", None),
                                                      ("SKIPPED", "overlap")]


# --- fire-ahead: an instant still ahead of now ------------------------------------------------------------


def test_an_instant_ahead_of_now_is_planned_ahead_and_its_overlap_left_to_the_instant() -> None:
    plan = _plan(now=T0 - timedelta(seconds=1), busy=True, plan_ahead=True)  # a run is going; over by 09:00?
    assert [(p.at, p.skip_reason, p.ahead) for p in plan.instants] == [(T0, None, True)]
    assert plan.new_next_run_at == T0 + timedelta(minutes=1)


def test_an_instant_due_now_is_not_ahead_and_keeps_its_overlap_rule() -> None:
    plan = _plan(now=T0, busy=True, plan_ahead=True)
    assert [(p.skip_reason, p.ahead) for p in plan.instants] == [("overlap", False)]


def test_without_fire_ahead_an_early_announcement_is_planned_as_due() -> None:
    plan = _plan(now=T0 - timedelta(seconds=1), busy=True)  # a ticker whose clock runs ahead of the database's
    assert [(p.skip_reason, p.ahead) for p in plan.instants] == [("overlap", False)]


def test_a_backlog_ending_ahead_fires_the_due_ones_by_the_rules_and_the_ahead_one_ahead() -> None:
    plan = _plan(cursor=T0, scheduled_for=T0 + timedelta(seconds=2), now=T0 + timedelta(seconds=1, milliseconds=500),
                 trigger=EVERY_SECOND, grace_s=600, plan_ahead=True)  # overlap: skip
    assert [(p.at.second, p.skip_reason, p.ahead) for p in plan.instants] == [
        (0, None, False), (1, "overlap", False), (2, None, True)]


def test_a_banned_owner_s_instant_ahead_is_recorded_skipped_not_planned_ahead() -> None:
    plan = _plan(now=T0 - timedelta(seconds=1), owner_active=False, plan_ahead=True)
    assert [(p.skip_reason, p.ahead) for p in plan.instants] == [("owner_inactive", False)]


def test_the_run_of_an_instant_planned_ahead_may_not_start_before_it() -> None:
    from actwheel.actors.runs import planned_runs, schedule_dedupe_key
    from actwheel.storage.records import Automation, AutomationStatus

    automation = Automation(
        id="a1", owner_id="alice", name="n", trigger={"type": "once", "at": T0.isoformat()}, action_type="simple.op",
        action_config={}, policy={}, labels={}, enabled=True, status=AutomationStatus.ACTIVE, durable=True,
        next_run_at=T0, end_at=None, version=1, partition=0, created_at=T0, updated_at=T0)
    ahead = _plan(now=T0 - timedelta(seconds=1), plan_ahead=True)
    due = _plan(now=T0, plan_ahead=True)
    [run] = planned_runs(automation, ahead, dedupe_key_of=schedule_dedupe_key, context={})
    [plain] = planned_runs(automation, due, dedupe_key_of=schedule_dedupe_key, context={})
    assert (run.not_before, run.dedupe_key) == (T0, schedule_dedupe_key(T0))  # the key stays schedule:<instant>
    assert plain.not_before is None
