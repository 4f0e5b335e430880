"""errors.py draws the whole hierarchy: every public error is defined there and drawn in its docstring."""

from __future__ import annotations

import importlib
import pkgutil

import actwheel
from actwheel import errors
from actwheel.api.errors import error_response
from actwheel.errors import ActwheelError, NotAvailable, NotFound, Unsupported


def _import_every_module() -> None:
    for module in pkgutil.walk_packages(actwheel.__path__, "actwheel."):
        if module.name != "actwheel.__main__":
            importlib.import_module(module.name)


def _subclasses(base: type[BaseException]) -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for sub in base.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def _package_errors() -> set[type[BaseException]]:
    _import_every_module()
    return {cls for cls in _subclasses(ActwheelError) if cls.__module__.startswith("actwheel.")}


def test_every_actwheel_error_is_defined_in_errors_py() -> None:
    elsewhere = sorted(f"{c.__module__}.{c.__qualname__}" for c in _package_errors() if c.__module__ != errors.__name__)
    assert elsewhere == []


def test_every_actwheel_error_is_drawn_in_the_tree() -> None:
    tree = errors.__doc__ or ""
    missing = sorted(c.__name__ for c in _package_errors() if f" {c.__name__} " not in tree.replace("\n", " \n "))
    assert missing == []


def test_every_actwheel_error_is_exported() -> None:
    assert sorted(c.__name__ for c in _package_errors() if c.__name__ not in errors.__all__) == []


def test_not_found_is_a_lookup_error() -> None:
    assert issubclass(NotFound, LookupError)


def test_unsupported_carries_field_value_and_expected() -> None:
    exc = Unsupported("durable", False, "true with an event trigger")

    assert (exc.field, exc.value, exc.expected) == ("durable", False, "true with an event trigger")
    assert "durable=False" in str(exc)
    assert "true with an event trigger" in str(exc)
    assert not isinstance(exc, NotAvailable)


def test_unsupported_answers_422_with_code_unsupported() -> None:
    response = error_response(Unsupported("durable", False, "true with an event trigger"))

    assert response.status_code == 422
    assert b'"code":"unsupported"' in response.body
    assert b'"field":"durable"' in response.body


def test_not_available_still_answers_501() -> None:
    assert error_response(NotAvailable("x")).status_code == 501
