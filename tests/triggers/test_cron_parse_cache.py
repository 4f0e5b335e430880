"""The cron trigger's parse cache (issue 15, round 3) and its evaluation memo (round 6), shared safely.

The cache is keyed by the expression's exact text; everything else a trigger depends on (zone, DST
policy, bounds) is parsed apart each time. These tests fail if the cache leaked a zone, a policy, a
dialect, a text variant or an error from one trigger into another, or grew without bound.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from actwheel.errors import InvalidTrigger
from actwheel.triggers import CronTrigger, parse, preview
from actwheel.triggers import cron as cron_module
from actwheel.triggers.quartz_parse import QuartzExpression, parse_quartz
from actwheel.triggers.unixcron import UnixCron, parse_unix

AFTER = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)  # the weekend before New York springs forward


def _cron(expression: str, **extra: Any) -> CronTrigger:
    trigger = parse({"type": "cron", "expression": expression, **extra})
    assert isinstance(trigger, CronTrigger)
    return trigger


def _fires(trigger: CronTrigger, count: int = 4) -> list[str]:
    return [f.isoformat() for f in preview(trigger, after=AFTER, count=count)]


def _uncached(expression: str, **extra: Any) -> list[str]:
    """The same trigger's fires with the cache emptied first (a fresh parse)."""
    cron_module._compiled.cache_clear()
    return _fires(_cron(expression, **extra))


@pytest.mark.parametrize("expression", ["0 30 2 * * ?", "30 2 * * *"])
def test_one_text_in_two_zones_and_policies_shares_the_parse_but_not_the_zone(expression: str) -> None:
    utc = _cron(expression)
    new_york = _cron(expression, timezone="America/New_York")
    skipping = _cron(expression, timezone="America/New_York", dst={"gap": "skip"})

    assert utc.schedule.parsed is new_york.schedule.parsed is skipping.schedule.parsed  # parsed once
    assert (utc.zone.key, new_york.zone.key) == ("UTC", "America/New_York")
    assert _fires(utc) == _uncached(expression)
    assert _fires(new_york) == _uncached(expression, timezone="America/New_York")
    assert _fires(skipping) == _uncached(expression, timezone="America/New_York", dst={"gap": "skip"})
    assert _fires(new_york) != _fires(skipping)  # 2026-03-08 02:30 does not exist in New York
    assert _fires(utc)[0] == "2026-03-08T02:30:00+00:00"


def test_bounds_are_not_shared_through_the_cache() -> None:
    bounded = _cron("0 0 12 * * ?", start="2026-03-10T00:00:00+00:00", end="2026-03-11T23:00:00+00:00")
    free = _cron("0 0 12 * * ?")

    assert bounded.schedule.parsed is free.schedule.parsed
    assert _fires(bounded) == ["2026-03-10T12:00:00+00:00", "2026-03-11T12:00:00+00:00"]
    assert _fires(free)[0] == "2026-03-08T12:00:00+00:00"


def test_each_dialect_keeps_its_own_parse() -> None:
    quartz, unix = _cron("0 0 3 * * ?"), _cron("0 3 * * *")

    assert (quartz.dialect, unix.dialect) == ("quartz", "unix")
    assert isinstance(quartz.schedule.parsed, QuartzExpression)
    assert isinstance(unix.schedule.parsed, UnixCron)
    assert _fires(quartz) == _fires(unix) == _uncached("0 0 3 * * ?")


def test_texts_that_differ_only_in_case_or_spacing_keep_their_own_text() -> None:
    texts = ["0 0 3 ? * mon", "0 0 3 ? * MON", "0  0 3 ? * MON"]
    triggers = [_cron(text) for text in texts]

    assert [t.expression for t in triggers] == texts
    assert [t.schedule.parsed.text for t in triggers] == texts
    assert [t.to_spec()["expression"] for t in triggers] == texts
    assert len({id(t.schedule.parsed) for t in triggers}) == 3
    assert len({tuple(_fires(t)) for t in triggers}) == 1


def test_the_parse_is_what_an_uncached_parse_gives() -> None:
    assert _cron("0 15 10 L-2 * ? 2026-2030").schedule.parsed == parse_quartz("0 15 10 L-2 * ? 2026-2030")
    assert _cron("*/15 9-17 * * MON-FRI").schedule.parsed == parse_unix("*/15 9-17 * * MON-FRI")


def test_the_shared_parse_is_immutable() -> None:
    parsed = _cron("0 0 3 * * ?").schedule.parsed
    assert isinstance(parsed, QuartzExpression)
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.nth_day_of_week = 2  # type: ignore[misc]
    assert all(type(values) is tuple for values in parsed.values)
    unix = _cron("0 3 * * *").schedule.parsed
    assert isinstance(unix, UnixCron)
    with pytest.raises(dataclasses.FrozenInstanceError):
        unix.text = "0 4 * * *"  # type: ignore[misc]
    assert all(type(values) is tuple for values in unix.expanded)


@pytest.mark.parametrize(("expression", "field"), [
    ("0 0 3 * * *", "expression.day_of_week"),  # Quartz: '?' in exactly one day field
    ("61 3 * * *", "expression.minute"),
    ("0 3 * *", "expression"),
])
def test_a_refused_text_is_refused_every_time(expression: str, field: str) -> None:
    for _ in range(3):
        with pytest.raises(InvalidTrigger) as refused:
            _cron(expression)
        assert refused.value.errors[0].field == field
    assert _cron("0 0 3 * * ?").dialect == "quartz"  # a good text after them still parses


def test_the_cache_is_bounded() -> None:
    cron_module._compiled.cache_clear()
    for minute in range(60):
        for hour in range(24):
            for dom in range(1, 5):
                _cron(f"0 {minute} {hour} {dom} * ?")
    info = cron_module._compiled.cache_info()
    assert info.maxsize == cron_module.COMPILED_EXPRESSIONS_MAX
    assert info.currsize == cron_module.COMPILED_EXPRESSIONS_MAX < 60 * 24 * 4


# --- the evaluation memo (round 6): one Quartz walk per (text, zone, second) -----------------------

def _fresh_fires(expression: str, **extra: Any) -> list[str]:
    """The fires with both caches emptied first."""
    cron_module._compiled.cache_clear()
    cron_module._next_seconds.cache_clear()
    return _fires(_cron(expression, **extra))


@pytest.mark.parametrize("extra", [{}, {"timezone": "America/New_York"}, {"timezone": "Asia/Kolkata"},
                                   {"timezone": "America/New_York", "dst": "quartz"},
                                   {"timezone": "Europe/London", "dst": "quartz"}])
def test_a_remembered_fire_is_the_fire_of_its_own_zone_and_policy(extra: dict[str, Any]) -> None:
    expression = "0 30 2 * * ?"  # inside New York's spring-forward gap on 2026-03-08
    for other in ({}, {"timezone": "America/New_York"}, {"timezone": "Asia/Kolkata", "dst": "quartz"}):
        _fires(_cron(expression, **other))  # fill the memo with other zones' and policies' walks
    assert _fires(_cron(expression, **extra)) == _fresh_fires(expression, **extra)


def test_the_memo_answers_a_repeated_question_without_a_walk() -> None:
    cron_module._next_seconds.cache_clear()
    trigger = _cron("0 0 3 * * ?", timezone="Europe/Paris", dst="quartz")
    first = [trigger.next_after(AFTER) for _ in range(100)]
    info = cron_module._next_seconds.cache_info()
    assert info.misses == 1
    assert info.hits == 99
    assert len(set(first)) == 1


def test_an_expression_quartz_cannot_finish_is_refused_every_time() -> None:
    trigger = _cron("0 0 0 L-28W 1 ?", dst="quartz")
    for _ in range(3):  # QuartzLoops is never remembered as an answer
        with pytest.raises(InvalidTrigger) as caught:
            trigger.next_after(datetime(2026, 1, 10, tzinfo=UTC))
        assert caught.value.field == "expression.day_of_month"


def test_the_memo_is_bounded() -> None:
    cron_module._next_seconds.cache_clear()
    trigger = _cron("* * * * * ?")
    at = AFTER
    for _ in range(cron_module.QUARTZ_FIRES_MAX + 100):
        fire = trigger.next_after(at)
        assert fire is not None
        at = fire
    info = cron_module._next_seconds.cache_info()
    assert info.maxsize == info.currsize == cron_module.QUARTZ_FIRES_MAX
