"""The two builders of a new run's row agree: the inline-checked fast path
(``_plain_new_run_row``, JSON as plain text, what COPY / executemany take) and the general
path (``_checked_new_run_row``, every field through the named checks).

No database: the builders run before any SQL. A field the fast path reads differently from
the general one would make the same run differ by which path a batch happened to take.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from actwheel.storage._runs import _checked_new_run_row, _new_run_row, _plain_new_run_row
from actwheel.storage.records import NewRun, Origin, RunStatus

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


def _run(**overrides: Any) -> NewRun:
    fields: dict[str, Any] = {
        "id": "run-1",
        "automation_id": "auto-1",
        "dedupe_key": "schedule:2030-01-01T09:00:00+00:00",
        "owner_id": "alice",
        "action_type": "webhook",
    }
    fields.update(overrides)
    return NewRun(**fields)


VALID_SHAPES = {
    "scheduled, bare": _run(scheduled_for=T0),
    "scheduled, with context and policy": _run(
        scheduled_for=T0, action_config={"url": "https://example.test", "n": [1, 2.5, None, True]},
        policy={"retry": {"max_attempts": 3}, "timeout_s": 30}, context={"scheduled_for": "2030-01-01T09:00:00Z"}),
    "manual, no scheduled_for": _run(origin=Origin.MANUAL, dedupe_key="manual:1"),
    "event": _run(origin=Origin.EVENT, dedupe_key="event:e1", context={"event": {"id": "e1", "data": {}}}),
    "request, ad hoc (no automation)": _run(automation_id=None, origin=Origin.REQUEST, dedupe_key="request:k"),
    "retry origin": _run(origin=Origin.RETRY, dedupe_key="retry:1"),
    "unicode everywhere": _run(
        dedupe_key="schedule:日本語-ключ-🙂", owner_id="zoë", action_type="webhook",
        action_config={"message": "grüße, 世界 🙂", "emoji": "\u2603"}, context={"note": "naïve café"}),
    "skipped with a reason": _run(status=RunStatus.SKIPPED, reason="overlap", scheduled_for=T0),
    "canceled with a reason": _run(status=RunStatus.CANCELED, reason="owner_inactive", scheduled_for=T0),
    "status and origin as strings": _run(status="PENDING", origin="schedule", scheduled_for=T0),
    "nested and empty JSON": _run(action_config={"a": {"b": {"c": []}}}, policy={}, context={"": ""}),
    "no id (each builder makes one)": _run(id=None),
}


@pytest.mark.parametrize("new", list(VALID_SHAPES.values()), ids=list(VALID_SHAPES))
def test_the_fast_path_builds_the_same_row_as_the_general_path(new: NewRun) -> None:
    plain = _plain_new_run_row(new)
    checked = _checked_new_run_row(0, new)
    assert plain is not None, "the fast path must take this common shape"
    if new.id is None:  # fresh random ids on each path; the rest must agree
        assert plain.pop("id") != checked.pop("id")
    assert plain == checked
    assert list(plain) == list(checked)
    assert all(type(value) is str for key, value in plain.items() if key in ("action_config", "policy", "context"))


@pytest.mark.parametrize("new", list(VALID_SHAPES.values()), ids=list(VALID_SHAPES))
def test_insert_builds_its_row_by_the_fast_path_for_common_shapes(new: NewRun) -> None:
    row, plain = _new_run_row(0, new), _plain_new_run_row(new)
    assert plain is not None
    if new.id is None:
        row.pop("id"), plain.pop("id")
    assert row == plain


UNCOMMON_SHAPES = {
    "retry wait with not_before": _run(status=RunStatus.RETRY_WAIT, not_before=T0 + timedelta(minutes=5)),
    "pending with not_before": _run(not_before=T0),
    "scheduled_for in another zone": _run(
        scheduled_for=datetime(2030, 1, 1, 11, 0, tzinfo=timezone(timedelta(hours=2)))),
}


@pytest.mark.parametrize("new", list(UNCOMMON_SHAPES.values()), ids=list(UNCOMMON_SHAPES))
def test_the_fast_path_leaves_uncommon_shapes_to_the_general_path(new: NewRun) -> None:
    assert _plain_new_run_row(new) is None
    assert _new_run_row(0, new) == _checked_new_run_row(0, new)


def test_a_scheduled_for_in_another_zone_is_stored_in_utc() -> None:
    row = _new_run_row(0, UNCOMMON_SHAPES["scheduled_for in another zone"])
    assert row["scheduled_for"] == T0  # 11:00 at +02:00
    assert row["scheduled_for"].tzinfo is UTC
