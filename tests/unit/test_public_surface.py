"""The public surface: every ``__all__`` lists names that exist, and the names the issues promise are there."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import actwheel


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(actwheel.__path__, "actwheel.")
             if not m.name.endswith("__main__")]
    return ["actwheel", *names]


MODULES = _modules()


def _import(name: str) -> ModuleType:
    return importlib.import_module(name)


def test_the_package_is_walked() -> None:
    assert {"actwheel.triggers", "actwheel.wheel", "actwheel.actions.pipeline", "actwheel.actors.ticker",
            "actwheel.api.app", "actwheel.storage.sqlite", "actwheel.bus.memory"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_only_existing_names_once(name: str) -> None:
    module = _import(name)
    exported = getattr(module, "__all__", None)
    if exported is None:
        assert not [n for n in vars(module) if not n.startswith("_") and inspect.isfunction(getattr(module, n))
                    and getattr(module, n).__module__ == name], f"{name} defines functions but no __all__"
        return
    assert all(isinstance(n, str) for n in exported)
    assert len(exported) == len(set(exported)), f"duplicates in {name}.__all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names missing attributes: {missing}"


@pytest.mark.parametrize("name", MODULES)
def test_modules_use_postponed_annotations(name: str) -> None:
    source = Path(_import(name).__file__ or "").read_text()
    if "import" not in source:  # a docstring-only package
        return
    assert "from __future__ import annotations" in source, name


def test_py_typed_marker() -> None:
    assert (Path(actwheel.__file__).parent / "py.typed").exists()


def test_error_hierarchy() -> None:
    from actwheel import errors

    for invalid in (errors.InvalidInput, errors.InvalidTrigger, errors.InvalidAction, errors.InvalidMessage):
        assert issubclass(invalid, ValueError)
        assert issubclass(invalid, errors.ActwheelError)
    for storage in (errors.Conflict, errors.NotFound, errors.StorageUnavailable):
        assert issubclass(storage, errors.StorageError)
    for bus in (errors.Unroutable, errors.BusUnavailable):
        assert issubclass(bus, errors.BusError)
    assert issubclass(errors.InvalidTrigger, errors.InvalidInput)
    assert issubclass(errors.PermissionDenied, errors.ActwheelError)
    assert issubclass(errors.NotAvailable, errors.ActwheelError)
    assert "actwheel.NotAvailable" in str(errors.NotAvailable("x"))
    assert actwheel.NotAvailable is errors.NotAvailable
    assert actwheel.InvalidTrigger is errors.InvalidTrigger


def test_errors_carry_field_value_expected() -> None:
    from actwheel.errors import FieldError, InvalidTrigger

    error = InvalidTrigger("timezone", "Mars/Base", "an IANA zone")
    assert (error.field, error.value, error.expected) == ("timezone", "Mars/Base", "an IANA zone")
    assert "timezone='Mars/Base'" in str(error)
    many = InvalidTrigger.collect([FieldError("a", 1, "x"), FieldError("b", 2, "y")])
    assert isinstance(many, InvalidTrigger)
    assert [e.field for e in many.errors] == ["a", "b"]


def test_trigger_api() -> None:
    from datetime import UTC, datetime

    from actwheel.triggers import CronTrigger, Trigger, parse, preview, preview_fires

    trigger = parse({"type": "cron", "expression": "0 0 9 * * ?", "timezone": "UTC"})
    assert isinstance(trigger, Trigger)
    assert isinstance(trigger, CronTrigger)
    after = datetime(2030, 1, 1, tzinfo=UTC)
    assert preview(trigger.to_spec(), after=after, count=2) == [datetime(2030, 1, 1, 9, tzinfo=UTC),
                                                               datetime(2030, 1, 2, 9, tzinfo=UTC)]
    assert len(preview_fires(trigger, after=after, count=3)) == 3


def test_wheel_api() -> None:
    from actwheel.wheel import TimingWheel

    wheel: TimingWheel[str, str] = TimingWheel(now_ms=0)
    wheel.schedule("k", 10, "v")
    assert wheel.next_due_ms() == 10
    assert wheel.advance(10) == ["v"]


def test_composition_api() -> None:
    from actwheel.actions import ActionRegistry, default_registry
    from actwheel.api.app import create_app
    from actwheel.bus import open_bus
    from actwheel.cli import COMMANDS, build_parser, main
    from actwheel.clock import VirtualClock
    from actwheel.engine import Engine
    from actwheel.settings import Settings
    from actwheel.storage import open_store

    assert callable(create_app)
    assert callable(open_bus)
    assert callable(open_store)
    assert callable(main)
    assert build_parser().prog == "actwheel"
    assert set(COMMANDS) >= {"run", "preview", "migrate", "actions"}
    for command in COMMANDS:
        assert callable(importlib.import_module(f"actwheel.commands.{command}").register)
    assert {"advance", "set", "sleep", "now"} <= set(dir(VirtualClock))
    assert inspect.isclass(Engine)
    assert Settings().roles
    assert isinstance(default_registry(), ActionRegistry)


def test_the_ten_action_types_and_their_aliases() -> None:
    from actwheel.actions import default_registry

    registry = default_registry()
    assert registry.types() == sorted([
        "ontology.create_object", "ontology.update_object", "ontology.delete_object", "ontology.create_relation",
        "ontology.delete_relation", "function.invoke", "webhook.call", "notification.send", "simple.op",
        "composite"])
    aliases = {"CreateObject": "ontology.create_object", "UpdateObject": "ontology.update_object",
               "DeleteObject": "ontology.delete_object", "CreateRelation": "ontology.create_relation",
               "DeleteRelation": "ontology.delete_relation", "InvokeFunction": "function.invoke",
               "Webhook": "webhook.call", "Notification": "notification.send", "SimpleOp": "simple.op",
               "CompositeOp": "composite"}
    assert {a: registry.canonical(a) for a in aliases} == aliases


def test_seed_metric_names() -> None:
    from actwheel.metrics import Metrics

    text = Metrics().render().decode()
    for name in ("action_dispatched_total", "action_execution_duration_seconds", "action_compensation_total",
                 "action_dead_letter_total"):
        assert f"# TYPE {name}" in text
