"""The action registry, the public surface and ``actwheel actions list``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from actions_support import make_ctx

import actwheel.actions as actions_pkg
from actwheel.actions import (
    ActionContext,
    ActionDefinition,
    ActionRegistry,
    ActionResult,
    DuplicateActionType,
    Idempotency,
    default_registry,
)
from actwheel.cli import main
from actwheel.errors import InvalidAction, NotAvailable, Unsupported

BUILT_INS = {
    "ontology.create_object": "CreateObject",
    "ontology.update_object": "UpdateObject",
    "ontology.delete_object": "DeleteObject",
    "ontology.create_relation": "CreateRelation",
    "ontology.delete_relation": "DeleteRelation",
    "function.invoke": "InvokeFunction",
    "webhook.call": "Webhook",
    "notification.send": "Notification",
    "simple.op": "SimpleOp",
    "composite": "CompositeOp",
}


class Echo(ActionDefinition):
    type = "test.echo"
    aliases = ("Echo",)
    display_name = "Echo"
    description = "Returns its config."
    config_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"say": {"type": "string"}}}

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        return ActionResult.ok(f"echo {config.get('say')}", {"said": config.get("say")})


def test_default_registry_has_the_ten_types_and_their_aliases() -> None:
    registry = default_registry()
    assert registry.types() == sorted(BUILT_INS)
    for type_, alias in BUILT_INS.items():
        assert registry.get(alias) is registry.get(type_)
        assert registry.canonical(alias) == type_


def test_unknown_type_names_the_field_and_lists_known_types() -> None:
    with pytest.raises(InvalidAction) as err:
        default_registry().get("ontology.create_obj")
    assert err.value.field == "type"
    assert err.value.value == "ontology.create_obj"
    assert "ontology.create_object" in err.value.expected
    assert "webhook.call" in err.value.expected


def test_duplicate_type_or_alias_is_a_typed_error_and_registers_nothing() -> None:
    registry = ActionRegistry()
    registry.register(Echo())

    class SameAlias(Echo):
        type = "test.other"
        aliases = ("Other", "Echo")

    with pytest.raises(DuplicateActionType) as err:
        registry.register(Echo())
    assert (err.value.field, err.value.value) == ("type", "test.echo")
    with pytest.raises(DuplicateActionType) as err:
        registry.register(SameAlias())
    assert (err.value.field, err.value.value) == ("alias", "Echo")
    assert "Other" not in registry
    assert "test.other" not in registry


def test_type_names_must_be_dotted_lower_case() -> None:
    class Bad(Echo):
        type = "Bad Type"

    with pytest.raises(InvalidAction) as err:
        ActionRegistry().register(Bad())
    assert err.value.field == "type"


async def test_a_new_type_is_one_register_call_and_works_as_a_composite_step() -> None:
    registry = default_registry()
    registry.register(Echo())
    composite = registry.get("composite")
    config = {
        "steps": [
            {"name": "e", "type": "Echo", "config": {"say": "hi"}},
            {"name": "f", "type": "test.echo", "config": {"say": "${steps.e.result.said} again"}},
        ]
    }
    assert composite.validate(config) == []
    result = await composite.execute(config, make_ctx())
    assert result.succeeded, result
    assert result.data["steps"][1]["result"]["data"] == {"said": "hi again"}


async def test_defaults_not_compensable_no_dry_run_and_unknown_confirm() -> None:
    echo = Echo()
    with pytest.raises(Unsupported):  # the caller's mistake, not a feature still to come
        await echo.compensate({}, ActionResult.ok("x"), make_ctx())
    with pytest.raises(NotAvailable):
        await echo.dry_run({}, make_ctx())
    assert await echo.confirm({}, make_ctx()) is None
    assert echo.idempotency_for({}) is Idempotency.NONE


def test_validate_reports_every_error_with_path_and_value() -> None:
    errors = (
        default_registry().get("webhook.call").validate({"url": 5, "method": "BREW", "timeout": -1, "surprise": True})
    )
    fields = {e.field: e.value for e in errors}
    assert fields == {"url": 5, "method": "BREW", "timeout": -1, "surprise": True}
    with pytest.raises(InvalidAction) as err:
        default_registry().get("webhook.call").validate_or_raise({"url": 5, "method": "BREW"})
    assert len(err.value.errors) == 2


def test_describe_publishes_schema_description_and_capabilities() -> None:
    for definition in default_registry():
        described = definition.describe()
        assert described["config_schema"]["type"] == "object"
        assert len(described["description"]) > 60
        assert described["idempotency"] in {"STRONG", "BEST_EFFORT", "NONE"}
        assert set(described["capabilities"]) == {"compensable", "dry_run", "timeout_control", "parallel_safe"}


def test_public_surface() -> None:
    for name in actions_pkg.__all__:
        assert hasattr(actions_pkg, name), name


def test_cli_lists_the_capability_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["actions", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "type",
        "aliases",
        "idempotency",
        "scopes",
        "compensable",
        "dry_run",
        "timeout",
        "parallel_safe",
    ]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == set(BUILT_INS)
    assert rows["webhook.call"][1:4] == ["Webhook", "BEST_EFFORT", "webhook:call"]
    assert rows["notification.send"][2] == "NONE"


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["actions", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by_type = {r["type"]: r for r in rows}
    assert by_type["ontology.create_object"]["aliases"] == ["CreateObject"]
    assert by_type["ontology.create_object"]["compensable"] is True
    assert by_type["webhook.call"]["compensable"] is False
    assert "properties" in by_type["composite"]["config_schema"]
