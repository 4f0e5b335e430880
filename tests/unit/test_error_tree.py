"""errors.py draws the whole hierarchy: every public error is defined there and drawn in its docstring.

"Public" is every exception class a module of actwheel exports in its ``__all__``, whatever its base: an
error defined beside the code that raises it (outside the tree) fails here until it moves into errors.py.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import actwheel
from actwheel import errors
from actwheel.api.errors import error_response
from actwheel.bus.base import Reject, Retry
from actwheel.errors import ActwheelError, NotAvailable, NotFound, Unsupported

#: Exported exceptions that are outcomes, not errors (errors.py says so): a bus handler raises them to steer its
#: consumer, and they must not be ActwheelErrors, or an ``except ActwheelError`` in a handler would swallow them.
OUTCOMES: frozenset[type[BaseException]] = frozenset({Retry, Reject})


def _import_every_module() -> list[ModuleType]:
    return [actwheel, *(importlib.import_module(module.name)
                        for module in pkgutil.walk_packages(actwheel.__path__, "actwheel.")
                        if module.name != "actwheel.__main__")]


def _subclasses(base: type[BaseException]) -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for sub in base.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def _package_errors() -> set[type[BaseException]]:
    _import_every_module()
    return {cls for cls in _subclasses(ActwheelError) if cls.__module__.startswith("actwheel.")}


def _exported_exceptions() -> set[type[BaseException]]:
    """Every exception class of actwheel's own that some module of the package lists in its ``__all__``."""
    exported = (getattr(module, name, None) for module in _import_every_module()
                for name in getattr(module, "__all__", ()))
    return {cls for cls in exported if isinstance(cls, type) and issubclass(cls, BaseException)
            and cls.__module__.startswith("actwheel.")}


def _qualified(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_exported_exception_is_an_error_of_the_tree() -> None:
    """Exported means public: an ActwheelError defined in errors.py, unless it is an outcome."""
    outside = sorted(_qualified(cls) for cls in _exported_exceptions() - OUTCOMES
                     if cls.__module__ != errors.__name__ or not issubclass(cls, ActwheelError))
    assert outside == []


def test_the_outcomes_are_no_errors_and_errors_py_names_them() -> None:
    tree = errors.__doc__ or ""
    assert [cls.__name__ for cls in OUTCOMES if issubclass(cls, ActwheelError)] == []
    assert sorted(cls.__name__ for cls in OUTCOMES if f"``{cls.__name__}``" not in tree) == []


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
