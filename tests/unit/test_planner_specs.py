"""The planner's parsed-spec cache: parsed once per automation version, never stale after a change."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from actwheel.actors.planner import _ParsedSpecs
from actwheel.storage.records import Automation, AutomationStatus

T0 = datetime(2030, 1, 1, tzinfo=UTC)
EVERY_SECOND = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                "start_date_time": T0.isoformat()}


def _automation(**overrides: Any) -> Automation:
    values: dict[str, Any] = {
        "id": "a1", "owner_id": "alice", "name": "n", "trigger": EVERY_SECOND, "action_type": "simple.op",
        "action_config": {}, "policy": {"overlap": "allow"}, "labels": {}, "enabled": True,
        "status": AutomationStatus.ACTIVE, "durable": True, "next_run_at": T0, "end_at": None, "version": 1,
        "partition": 3, "created_at": T0, "updated_at": T0}
    values.update(overrides)
    return Automation(**values)


def test_same_version_is_parsed_once() -> None:
    specs = _ParsedSpecs()
    a = _automation()
    first = specs.get(a)
    assert specs.get(replace(a, next_run_at=T0 + timedelta(seconds=1))) is first  # the cursor moved, no edit
    assert first[0].next_after(T0) == T0 + timedelta(seconds=1)
    assert first[1].overlap == "allow"


def test_a_new_version_is_parsed_again() -> None:
    specs = _ParsedSpecs()
    specs.get(_automation())
    edited = _automation(version=2, trigger={**EVERY_SECOND, "interval": 5}, policy={"overlap": "skip"})
    trigger, policy = specs.get(edited)
    assert trigger.next_after(T0) == T0 + timedelta(seconds=5)
    assert policy.overlap == "skip"


def test_capacity_bounds_the_cache() -> None:
    specs = _ParsedSpecs(capacity=2)
    for i in range(5):
        specs.get(_automation(id=f"a{i}"))
    assert len(specs._specs) <= 2
