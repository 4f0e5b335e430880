"""The memo of valid configs (issue 15, round 6), shared by the dispatch pipeline and the create path.

Speed only: a config that passed is not validated again; a refused one is validated every time, so
no outcome can change. These tests fail if a refusal were remembered, a remembered success leaked
to another definition or another config, or the create path stopped naming a bad field.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

import orjson
import pytest

from actwheel.actions.base import ActionDefinition
from actwheel.actions.defaults import default_registry
from actwheel.actions.valid_configs import REMEMBERED_BYTES_MAX, ValidConfigs
from actwheel.clock import VirtualClock
from actwheel.errors import FieldError, InvalidInput
from actwheel.service.payload import SpecParser

GOOD = {"op": "set_variable", "name": "x", "value": 1}
TRIGGER = {"type": "cron", "expression": "0 0 3 * * ?"}


class _Counting:
    """Wraps a definition's ``validate`` to count the real validations."""

    def __init__(self, definition: ActionDefinition, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = definition.validate

        def validate(config: Any) -> list[FieldError]:
            self.calls += 1
            return original(config)

        monkeypatch.setattr(definition, "validate", validate)


def test_a_success_is_remembered_and_a_refusal_never_is(monkeypatch: pytest.MonkeyPatch) -> None:
    definition = default_registry().get("simple.op")
    counting, memo = _Counting(definition, monkeypatch), ValidConfigs()
    assert [memo.errors(definition, dict(GOOD)) for _ in range(5)] == [[]] * 5
    assert counting.calls == 1
    bad = {"op": "set_variable", "name": "1x"}
    assert [[e.field for e in memo.errors(definition, bad)] for _ in range(3)] == [["name"]] * 3
    assert counting.calls == 4
    assert memo.errors(definition, {**GOOD, "value": 2}) == []
    assert counting.calls == 5


def test_a_remembered_config_is_another_definitions_own_question() -> None:
    registry, memo = default_registry(), ValidConfigs()
    assert memo.errors(registry.get("simple.op"), GOOD) == []
    assert memo.errors(registry.get("webhook.call"), GOOD) != []


def test_a_config_that_is_not_json_is_validated_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    definition = default_registry().get("simple.op")
    counting, memo = _Counting(definition, monkeypatch), ValidConfigs()
    config = {**GOOD, "value": {1, 2}}  # a set: orjson refuses it
    memo.errors(definition, config)
    memo.errors(definition, config)
    assert counting.calls == 2


class _Tags(ActionDefinition):
    """A schema that tells a list from a tuple and a text from a datetime, as JSON Schema does."""

    type = "test.tags"
    display_name = "Tags"
    description = "Tags and a due text."
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object", "properties": {"tags": {"type": "array"}, "due": {"type": "string"}}}

    async def execute(self, ctx: Any, config: Any) -> Any:
        raise NotImplementedError


@pytest.mark.parametrize(("valid", "lookalike", "field"), [
    ({"tags": ["a", "b"]}, {"tags": ("a", "b")}, "tags"),
    ({"due": "2026-12-03T06:00:00+00:00"}, {"due": datetime(2026, 12, 3, 6, tzinfo=UTC)}, "due"),
])
def test_a_config_with_the_same_json_as_a_valid_one_is_still_validated_on_its_own(
        valid: dict[str, Any], lookalike: dict[str, Any], field: str) -> None:
    assert orjson.dumps(valid) == orjson.dumps(lookalike)  # the key alone would conflate them
    definition, memo = _Tags(), ValidConfigs()
    assert memo.errors(definition, valid) == []
    assert [e.field for e in memo.errors(definition, lookalike)] == [field]
    assert [e.field for e in memo.errors(definition, lookalike)] == [field]
    assert memo.errors(definition, valid) == []


def test_a_large_config_is_validated_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    definition = default_registry().get("simple.op")
    counting, memo = _Counting(definition, monkeypatch), ValidConfigs()
    large = {**GOOD, "value": "x" * REMEMBERED_BYTES_MAX}
    assert [memo.errors(definition, large) for _ in range(3)] == [[]] * 3
    assert counting.calls == 3
    assert len(memo._valid) == 0
    small = {**GOOD, "value": "x" * (REMEMBERED_BYTES_MAX // 2)}
    assert [memo.errors(definition, small) for _ in range(3)] == [[]] * 3
    assert counting.calls == 4


def test_the_memo_is_bounded() -> None:
    definition, memo = default_registry().get("simple.op"), ValidConfigs(capacity=10)
    for i in range(25):
        assert memo.errors(definition, {**GOOD, "value": i}) == []
    assert len(memo._valid) <= 10


def test_a_batch_of_one_config_is_validated_once_and_a_bad_item_is_still_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    registry = default_registry()
    counting = _Counting(registry.get("simple.op"), monkeypatch)
    parser = SpecParser(registry, VirtualClock(datetime(2026, 12, 3, tzinfo=UTC)))
    for i in range(20):
        parser.parse({"name": f"n{i}", "trigger": TRIGGER, "action": {"type": "simple.op", "config": GOOD}})
    assert counting.calls == 1
    with pytest.raises(InvalidInput) as refused:
        parser.parse({"trigger": TRIGGER, "action": {"type": "simple.op", "config": {**GOOD, "name": "1x"}}})
    assert [e.field for e in refused.value.errors] == ["action.config.name"]
