"""The ``event`` trigger: AMQP topic pattern validation and matching."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actwheel.errors import InvalidTrigger
from actwheel.triggers import EventTrigger, parse
from actwheel.triggers.event import topic_matches, validate_topic_pattern


def _event(pattern: str) -> EventTrigger:
    trigger = parse({"type": "event", "routing_key": pattern})
    assert isinstance(trigger, EventTrigger)
    return trigger


def test_event_trigger_never_fires_on_the_clock() -> None:
    trigger = _event("orders.*.created")

    assert trigger.is_event
    assert trigger.next_fire_after(datetime(2026, 1, 1, tzinfo=UTC)) is None
    assert trigger.next_after(datetime(2026, 1, 1, tzinfo=UTC)) is None
    assert trigger.zone.key == "UTC"
    assert trigger.describe() == "on each event whose routing key matches 'orders.*.created'"


def test_round_trip_with_timezone() -> None:
    trigger = parse({"type": "event", "routing_key": "orders.#", "timezone": "Europe/Berlin"})

    assert trigger.to_spec() == {"type": "event", "routing_key": "orders.#", "timezone": "Europe/Berlin"}
    assert parse(trigger.to_spec()) == trigger
    assert trigger.zone.key == "Europe/Berlin"


@pytest.mark.parametrize(
    ("pattern", "key", "expected"),
    [
        ("orders.*.created", "orders.eu.created", True),
        ("orders.*.created", "orders.created", False),
        ("orders.*.created", "orders.eu.west.created", False),
        ("orders.#", "orders", True),
        ("orders.#", "orders.a.b.c", True),
        ("orders.#", "order", False),
        ("#", "", True),
        ("#", "anything.at.all", True),
        ("*", "", False),
        ("*", "one", True),
        ("*", "one.two", False),
        ("#.created", "created", True),
        ("#.created", "a.b.created", True),
        ("#.created", "a.b.created.not", False),
        ("a.#.b", "a.b", True),
        ("a.#.b", "a.x.y.b", True),
        ("a.#.b", "a.x.y.c", False),
        ("#.#", "a", True),
        ("*.#", "", False),
        ("a.*.#.z", "a.b.z", True),
        ("a.*.#.z", "a.z", False),
        ("exact.key", "exact.key", True),
        ("exact.key", "exact.KEY", False),
        ("a.*", "a.", True),  # an empty word in a key is a word, as in RabbitMQ
        ("a.*.c", "a..c", True),
    ],
)
def test_topic_semantics(pattern: str, key: str, expected: bool) -> None:
    # built directly: parse() refuses patterns that start with a wildcard (reserved), the matcher does not
    assert EventTrigger(pattern).matches(key) is expected


def _reference(pattern: list[str], key: list[str]) -> bool:
    """Plain recursion, no memo: the definition, for comparison."""
    if not pattern:
        return not key
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(_reference(rest, key[i:]) for i in range(len(key) + 1))
    return bool(key) and head in ("*", key[0]) and _reference(rest, key[1:])


@given(
    st.lists(st.sampled_from(["a", "b", "*", "#"]), min_size=1, max_size=6),
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=7),
)
def test_matches_agrees_with_the_definition(pattern: list[str], key: list[str]) -> None:
    assert topic_matches(".".join(pattern), ".".join(key)) is _reference(pattern, key)


def test_long_patterns_with_many_hashes_stay_fast() -> None:
    pattern = ".".join(["#", "a"] * 60)
    key = ".".join(["a"] * 59 + ["b"])

    assert topic_matches(pattern, key) is False


@pytest.mark.parametrize(
    "pattern",
    ["", ".", "a..b", ".a", "a.", "order*", "a.#x", "a b", "a/b", "ä", "a." + "b" * 300, 5, None, ["a"]],
)
def test_invalid_patterns_are_refused(pattern: Any) -> None:
    with pytest.raises(InvalidTrigger) as caught:
        parse({"type": "event", "routing_key": pattern})

    assert caught.value.field == "routing_key"
    assert caught.value.value == pattern
    assert "AMQP topic pattern" in str(caught.value)


@pytest.mark.parametrize("pattern", ["a", "a.b", "*", "#", "a-b_c.D9", "*.*.#", "#.x.#"])
def test_valid_patterns(pattern: str) -> None:
    assert validate_topic_pattern(pattern) == pattern


@pytest.mark.parametrize("pattern", ["a", "a.b", "a-b_c.D9", "orders.*.#", "runs.x", "cdcx.y"])
def test_patterns_outside_actwheel_namespaces_parse(pattern: str) -> None:
    assert _event(pattern).routing_key == pattern


@pytest.mark.parametrize("pattern", ["run.#", "automation.created", "action.request", "command.create",
                                     "cdc.ontology.order.created", "#", "*", "*.created", "#.orders", "*.*.#"])
def test_patterns_in_actwheel_namespaces_or_leading_wildcards_are_refused(pattern: str) -> None:
    with pytest.raises(InvalidTrigger) as caught:
        parse({"type": "event", "routing_key": pattern})

    assert caught.value.field == "routing_key"
    assert caught.value.value == pattern
    assert caught.value.expected == ("a pattern outside actwheel's own namespaces automation., run., action., "
                                     "command., cdc. that does not start with a wildcard")


def test_unknown_field_is_refused() -> None:
    with pytest.raises(InvalidTrigger) as caught:
        parse({"type": "event", "routing_key": "a", "routingkey": "b"})

    assert caught.value.field == "routingkey"


def test_missing_routing_key_is_refused() -> None:
    with pytest.raises(InvalidTrigger) as caught:
        parse({"type": "event"})

    assert caught.value.field == "routing_key"
