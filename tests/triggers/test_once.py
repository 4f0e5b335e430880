"""The ``once`` trigger: ISO and Java zoned forms, one fire, invalid input named by field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from actwheel.errors import InvalidTrigger
from actwheel.triggers import OnceTrigger, parse, preview

SHANGHAI = ZoneInfo("Asia/Shanghai")
BEFORE = datetime(2026, 1, 1, tzinfo=UTC)


def test_iso_with_offset_fires_once_at_that_instant_with_that_offset() -> None:
    trigger = parse({"type": "once", "at": "2027-01-01T09:00:00+08:00"})

    fires = preview(trigger, after=BEFORE, count=3)

    assert fires == [datetime(2027, 1, 1, 1, tzinfo=UTC)]
    assert fires[0].isoformat() == "2027-01-01T09:00:00+08:00"
    assert trigger.zone.key == "Etc/GMT-8"  # POSIX sign: UTC+08:00


def test_next_after_is_strict_and_ends() -> None:
    trigger = parse({"type": "once", "at": "2027-01-01T09:00:00+08:00"})
    at = datetime(2027, 1, 1, 1, tzinfo=UTC)

    assert trigger.next_after(at - timedelta(microseconds=1)) == at
    assert trigger.next_after(at) is None
    assert trigger.next_after(at + timedelta(days=1)) is None


def test_java_zoned_form_sets_the_trigger_zone() -> None:
    trigger = parse({"type": "once", "at": "2027-01-01T09:00+08:00[Asia/Shanghai]"})

    fire = trigger.next_after(BEFORE)

    assert trigger.zone == SHANGHAI
    assert fire == datetime(2027, 1, 1, 9, tzinfo=SHANGHAI)
    assert fire is not None
    assert fire.tzinfo == SHANGHAI


def test_java_form_without_offset_resolves_an_unambiguous_wall_time() -> None:
    trigger = parse({"type": "once", "at": "2027-07-01T09:00[Europe/Berlin]"})

    assert trigger.next_after(BEFORE) == datetime(2027, 7, 1, 7, tzinfo=UTC)


def test_java_form_with_nanoseconds_and_z() -> None:
    trigger = parse({"type": "once", "at": "2027-01-01T01:00:00.123456789Z[UTC]"})

    assert trigger.next_after(BEFORE) == datetime(2027, 1, 1, 1, 0, 0, 123456, tzinfo=UTC)


def test_timezone_field_chooses_the_display_zone() -> None:
    trigger = parse({"type": "once", "at": "2027-01-01T01:00:00Z", "timezone": "Asia/Shanghai"})

    fire = trigger.next_after(BEFORE)

    assert fire is not None
    assert fire.isoformat() == "2027-01-01T09:00:00+08:00"
    assert trigger.zone == SHANGHAI


def test_half_hour_offset_keeps_its_offset() -> None:
    trigger = parse({"type": "once", "at": "2027-01-01T09:00:00+05:30"})

    fire = trigger.next_after(BEFORE)

    assert fire is not None
    assert fire.utcoffset() == timedelta(hours=5, minutes=30)


def test_describe_and_round_trip() -> None:
    trigger = parse({"type": "once", "at": "2027-01-01T09:00+08:00[Asia/Shanghai]"})

    assert trigger.describe() == "once at 2027-01-01T09:00:00+08:00 (Asia/Shanghai)"
    assert parse(trigger.to_spec()) == trigger
    plain = parse({"type": "once", "at": "2027-01-01T09:00:00-03:00"})
    assert parse(plain.to_spec()) == plain
    assert isinstance(plain, OnceTrigger)


def test_naive_instant_argument_is_refused() -> None:
    trigger = parse({"type": "once", "at": "2027-01-01T09:00:00+08:00"})

    with pytest.raises(ValueError, match="naive"):
        trigger.next_after(datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("spec", "field", "hint"),
    [
        ({"type": "once"}, "at", "offset"),
        ({"type": "once", "at": "2027-01-01T09:00:00"}, "at", "without an offset is ambiguous"),
        ({"type": "once", "at": "2027-01-01"}, "at", "ISO-8601"),
        ({"type": "once", "at": "2027-02-30T09:00:00Z"}, "at", "ISO-8601"),
        ({"type": "once", "at": "2027-01-01 09:00:00Z"}, "at", "ISO-8601"),
        ({"type": "once", "at": 1735693200}, "at", "ISO-8601"),
        ({"type": "once", "at": "2027-01-01T09:00+09:00[Asia/Shanghai]"}, "at", "+08:00"),
        ({"type": "once", "at": "2027-01-01T09:00+08:00[Mars/Olympus]"}, "at (zone in brackets)", "IANA"),
        ({"type": "once", "at": "2026-03-08T02:30[America/New_York]"}, "at", "DST gap or fold"),
        ({"type": "once", "at": "2026-11-01T01:30[America/New_York]"}, "at", "DST gap or fold"),
        ({"type": "once", "at": "2027-01-01T09:00Z", "timezone": "Nowhere/City"}, "timezone", "IANA"),
        ({"type": "once", "at": "2027-01-01T09:00Z", "timzone": "UTC"}, "timzone", "no such field"),
    ],
)
def test_invalid_specs_name_the_field(spec: dict[str, Any], field: str, hint: str) -> None:
    with pytest.raises(InvalidTrigger) as caught:
        parse(spec)

    assert caught.value.field == field
    assert hint in str(caught.value)
    assert caught.value.value == spec.get(field, caught.value.value)


def test_fixed_offset_equality_is_by_instant() -> None:
    a = parse({"type": "once", "at": "2027-01-01T09:00:00+08:00"})
    b = OnceTrigger(datetime(2027, 1, 1, 9, tzinfo=timezone(timedelta(hours=8))))

    assert a == b
