"""``${...}`` interpolation in step configs, e.g. ``"${steps.a.result.object_id}"``.

The text between ``${`` and ``}`` is a safe expression (:mod:`actwheel.actions.expressions`)
evaluated over the context names (``steps``, ``vars``, ``run`` and the variables).
A string that is exactly one ``${...}`` takes the value's type (an id stays an
int, a list stays a list); ``${...}`` inside a longer string is formatted as text.
``$${`` is a literal ``${``. Secret references are left alone: they resolve later,
inside the executor.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from actwheel.actions.expressions import compile_expression
from actwheel.actions.secrets import is_secret_ref
from actwheel.errors import ExpressionError, FieldError

__all__ = ["PLACEHOLDER", "has_placeholder", "interpolate", "referenced_steps"]

PLACEHOLDER = re.compile(r"(?<!\$)\$\{([^{}]*)\}")
_STEP_REF = re.compile(r"\bsteps\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*['\"]([^'\"]+)['\"]\s*\])")


def has_placeholder(value: Any) -> bool:
    return isinstance(value, str) and PLACEHOLDER.search(value) is not None


def _render_text(text: str, names: Mapping[str, Any], path: str) -> Any:
    whole = PLACEHOLDER.fullmatch(text)
    if whole:
        return compile_expression(whole.group(1), path).evaluate(names)

    def substitute(match: re.Match[str]) -> str:
        return str(compile_expression(match.group(1), path).evaluate(names))

    return PLACEHOLDER.sub(substitute, text).replace("$${", "${")


def interpolate(value: Any, names: Mapping[str, Any], path: str = "config") -> Any:
    """``value`` with every ``${expr}`` replaced.

    :raises ExpressionError: an expression that does not compile or evaluate; names the field path
    """
    if isinstance(value, str):
        try:
            return _render_text(value, names, path)
        except ExpressionError as exc:
            raise ExpressionError(path, value, exc.expected) from None
    if is_secret_ref(value):
        return value
    if isinstance(value, dict):
        return {k: interpolate(v, names, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, names, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _strings(value: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{path}[{i}]")]
    return []


def referenced_steps(value: Any, path: str = "config") -> list[tuple[str, str]]:
    """``(field path, step name)`` for every ``steps.<name>`` inside a placeholder of ``value``."""
    found: list[tuple[str, str]] = []
    for where, text in _strings(value, path):
        for match in PLACEHOLDER.finditer(text):
            found += [(where, m.group(1) or m.group(2)) for m in _STEP_REF.finditer(match.group(1))]
    return found


def placeholder_errors(value: Any, path: str = "config") -> list[FieldError]:
    """Placeholders whose expression does not compile, each as a :class:`FieldError`."""
    errors: list[FieldError] = []
    for where, text in _strings(value, path):
        for match in PLACEHOLDER.finditer(text):
            try:
                compile_expression(match.group(1), where)
            except ExpressionError as exc:
                errors.append(FieldError(where, text, exc.expected))
    return errors
