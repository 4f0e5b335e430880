"""The safe expression evaluator and ``${...}`` interpolation."""

from __future__ import annotations

from typing import Any

import pytest

from actwheel.actions.expressions import compile_expression, evaluate
from actwheel.actions.interpolation import interpolate, referenced_steps
from actwheel.errors import ExpressionError

NAMES: dict[str, Any] = {
    "amount": 150,
    "status": "open",
    "event": {"payload": {"items": [{"sku": "A", "qty": 2}, {"sku": "B", "qty": 3}]}},
    "steps": {"a": {"result": {"object_id": "obj-1", "count": 2}}},
}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("amount > 100 and status in ['new', 'open']", True),
        ("amount * 2 - 50 // 3", 284),
        ("not (amount < 10) or missing_is_not_evaluated", True),
        ("event.payload.items[1].sku", "B"),
        ("event['payload']['items'][0]['qty'] + 1", 3),
        ("len(event.payload.items) == 2", True),
        ("max(1, amount, 3) + abs(-2) + int('4') + round(2.6)", 159),
        ("str(amount) + '!'", "150!"),
        ("'yes' if amount >= 150 else 'no'", "yes"),
        ("1 < 2 < 3 != 4", True),
        ("event.payload.items[-1:][0].qty", 3),
        ("steps.a.result.object_id", "obj-1"),
        ("None is None and True", True),
        ("2 ** 10", 1024),
        ("{'k': [1, 2]}['k'][1]", 2),
    ],
)
def test_evaluates(source: str, expected: Any) -> None:
    assert evaluate(source, NAMES) == expected


@pytest.mark.parametrize(
    ("source", "complaint"),
    [
        ("__import__('os').system('true')", "calls only to"),
        ("open('/etc/passwd')", "calls only to"),
        ("status.__class__", "private attribute"),
        ("(lambda: 1)", "Lambda is not allowed"),
        ("[x for x in range(3)]", "ListComp is not allowed"),
        ("status.upper()", "calls only to"),
        ("len(*[1])", "positional arguments only"),
        ("max(a=1)", "positional arguments only"),
        ("x := 1", "valid syntax"),
        ("amount; 1", "valid syntax"),
        ("", "non-empty"),
    ],
)
def test_refuses_unsafe_constructs_at_compile_time(source: str, complaint: str) -> None:
    with pytest.raises(ExpressionError) as err:
        compile_expression(source)
    assert complaint in err.value.expected
    assert err.value.value == source


def test_limits_on_size_depth_exponents_and_built_values() -> None:
    with pytest.raises(ExpressionError, match="at most 2000 characters"):
        compile_expression("1 + " * 600 + "1")
    with pytest.raises(ExpressionError, match="nested at most"):
        compile_expression("(" * 40 + "1" + ")" * 40 + " + -" * 20 + "1")
    with pytest.raises(ExpressionError, match="exponents of at most"):
        evaluate("9 ** 999999", {})
    with pytest.raises(ExpressionError, match="values of at most"):
        evaluate("'x' * 10000000", {})


def test_evaluation_errors_are_clear() -> None:
    with pytest.raises(ExpressionError) as err:
        evaluate("amount > limit", NAMES)
    assert "'limit' is not one of" in err.value.expected
    assert "amount" in err.value.expected
    with pytest.raises(ExpressionError, match="an existing key; 'nope'"):
        evaluate("event.payload.nope", NAMES)
    with pytest.raises(ExpressionError, match="evaluates"):
        evaluate("amount / 0", NAMES)
    with pytest.raises(ExpressionError, match="keys of objects"):
        evaluate("amount.real", NAMES)


def test_interpolation_keeps_types_and_formats_inside_text() -> None:
    config = {
        "source": "${steps.a.result.object_id}",
        "n": "${steps.a.result.count}",
        "note": "made ${steps.a.result.count} of ${status}",
        "literal": "$${not.this}",
        "secret": {"$secret": "token"},
        "list": ["${amount + 1}"],
    }
    out = interpolate(config, NAMES)
    assert out == {
        "source": "obj-1",
        "n": 2,
        "note": "made 2 of open",
        "literal": "${not.this}",
        "secret": {"$secret": "token"},
        "list": [151],
    }


def test_interpolation_errors_name_the_field_path() -> None:
    with pytest.raises(ExpressionError) as err:
        interpolate({"x": {"y": "${steps.zz.result.id}"}}, NAMES, "steps[2].config")
    assert err.value.field == "steps[2].config.x.y"


def test_referenced_steps() -> None:
    refs = referenced_steps({"a": "${steps.first.result.id}", "b": ["${steps['second'].status} ${vars.x}"]})
    assert [name for _, name in refs] == ["first", "second"]
