"""A safe expression language over a run's context — parsed with :mod:`ast`, never ``eval``.

Allowed: literals (numbers, strings, booleans, ``None``, lists, tuples, dicts),
names from the context, ``a.b`` and ``a["b"]`` / ``a[0]`` on dicts, lists and
strings, arithmetic (``+ - * / // % **``), comparisons (incl. ``in``, ``not in``,
``is None``), ``and / or / not``, ``x if c else y`` and the functions
``len min max abs int float str bool round``. Everything else is refused when the
expression is compiled, with the offending construct and its column.

Limits: source length, node count, nesting depth, exponent size and the size of
strings/lists built by ``*`` — so an expression cannot exhaust the worker.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from actwheel.errors import ExpressionError

__all__ = [
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_NODES",
    "Expression",
    "compile_expression",
    "evaluate",
]

MAX_LENGTH = 2000
MAX_NODES = 300
MAX_DEPTH = 32
MAX_EXPONENT = 256
MAX_BUILT_SIZE = 100_000

_MISSING = object()


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.Not: operator.not_,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len,
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "round": round,
}
_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.IfExp,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Call,
    *_BINARY,
    *_UNARY,
    *_COMPARE,
)


@dataclass(frozen=True, slots=True)
class Expression:
    """A compiled, checked expression; :meth:`evaluate` walks its tree."""

    source: str
    tree: ast.Expression

    def evaluate(self, names: Mapping[str, Any]) -> Any:
        """The value of the expression with ``names`` bound.

        :raises ExpressionError: an unknown name or key, a type error, or a size limit
        """
        try:
            return _Evaluator(names, self.source).visit(self.tree.body)
        except ExpressionError:
            raise
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, IndexError) as exc:
            raise ExpressionError("expression", self.source, f"an expression that evaluates: {exc}") from None


def _refuse(source: str, node: ast.AST, what: str) -> ExpressionError:
    col = getattr(node, "col_offset", 0)
    return ExpressionError("expression", source, f"{what} (at column {col + 1})")


def _depth(node: ast.AST) -> int:
    children = list(ast.iter_child_nodes(node))
    return 1 + max((_depth(c) for c in children), default=0)


def _check_node(source: str, node: ast.AST) -> None:
    if not isinstance(node, _ALLOWED_NODES):
        raise _refuse(source, node, f"only safe expressions; {type(node).__name__} is not allowed")
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        raise _refuse(source, node, f"no access to private attribute {node.attr!r}")
    if isinstance(node, ast.Name) and node.id.startswith("__"):
        raise _refuse(source, node, f"no dunder names ({node.id!r})")
    if isinstance(node, ast.Call):
        _check_call(source, node)


def _check_call(source: str, node: ast.Call) -> None:
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
        raise _refuse(source, node, "calls only to " + ", ".join(sorted(FUNCTIONS)))
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        raise _refuse(source, node, "positional arguments only")


def compile_expression(source: Any, field: str = "expression") -> Expression:
    """Parse and check ``source``.

    :raises ExpressionError: not a string, too long/deep/large, a syntax error, or a refused construct
    """
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError(field, source, "a non-empty expression string")
    if len(source) > MAX_LENGTH:
        raise ExpressionError(field, source, f"an expression of at most {MAX_LENGTH} characters")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(field, source, f"valid syntax: {exc.msg} at column {exc.offset}") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ExpressionError(field, source, f"an expression of at most {MAX_NODES} nodes")
    if _depth(tree) > MAX_DEPTH:
        raise ExpressionError(field, source, f"an expression nested at most {MAX_DEPTH} deep")
    for node in nodes:
        _check_node(source, node)
    return Expression(source, tree)


def evaluate(source: str, names: Mapping[str, Any]) -> Any:
    """Compile and evaluate in one go."""
    return compile_expression(source).evaluate(names)


def _check_size(source: str, value: Any) -> Any:
    if isinstance(value, str | list | tuple) and len(value) > MAX_BUILT_SIZE:
        raise ExpressionError("expression", source, f"values of at most {MAX_BUILT_SIZE} items")
    return value


class _Evaluator:
    """Walks a checked tree; every method handles one allowed node type."""

    def __init__(self, names: Mapping[str, Any], source: str) -> None:
        self._names = names
        self._source = source

    def visit(self, node: ast.AST) -> Any:
        method: Callable[[Any], Any] = getattr(self, f"_{type(node).__name__}")
        return method(node)

    def _Constant(self, node: ast.Constant) -> Any:
        return node.value

    def _Name(self, node: ast.Name) -> Any:
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        value = self._names.get(node.id, _MISSING)
        if value is _MISSING:
            known = ", ".join(sorted(self._names)[:20]) or "(none)"
            raise ExpressionError("expression", self._source, f"a known name; {node.id!r} is not one of {known}")
        return value

    def _Attribute(self, node: ast.Attribute) -> Any:
        return self._lookup(self.visit(node.value), node.attr, node)

    def _Subscript(self, node: ast.Subscript) -> Any:
        container = self.visit(node.value)
        if isinstance(node.slice, ast.Slice):
            return self._slice(container, node.slice)
        return self._lookup(container, self.visit(node.slice), node)

    def _slice(self, container: Any, node: ast.Slice) -> Any:
        bounds = [None if part is None else self.visit(part) for part in (node.lower, node.upper, node.step)]
        if not isinstance(container, list | tuple | str):
            raise ExpressionError("expression", self._source, "slices of lists and strings only")
        return container[slice(*bounds)]

    def _lookup(self, container: Any, key: Any, node: ast.AST) -> Any:
        if isinstance(container, Mapping):
            if key not in container:
                raise _refuse(self._source, node, f"an existing key; {key!r} not in {sorted(container)[:20]}")
            return container[key]
        if isinstance(container, list | tuple | str) and isinstance(key, int) and not isinstance(key, bool):
            return container[key]
        raise _refuse(
            self._source,
            node,
            f"keys of objects or indexes of lists, not {key!r} of {type(container).__name__}",
        )

    def _BinOp(self, node: ast.BinOp) -> Any:
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Pow) and isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
            raise _refuse(self._source, node, f"exponents of at most {MAX_EXPONENT}")
        if isinstance(node.op, ast.Mult):
            self._check_repeat(left, right, node)
        return _check_size(self._source, _BINARY[type(node.op)](left, right))

    def _check_repeat(self, left: Any, right: Any, node: ast.AST) -> None:
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(count, int) and len(seq) * count > MAX_BUILT_SIZE:
                raise _refuse(self._source, node, f"values of at most {MAX_BUILT_SIZE} items")

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        return _UNARY[type(node.op)](self.visit(node.operand))

    def _BoolOp(self, node: ast.BoolOp) -> Any:
        value: Any = None
        for operand in node.values:
            value = self.visit(operand)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value

    def _Compare(self, node: ast.Compare) -> Any:
        left = self.visit(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.visit(comparator)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def _IfExp(self, node: ast.IfExp) -> Any:
        return self.visit(node.body) if self.visit(node.test) else self.visit(node.orelse)

    def _List(self, node: ast.List) -> Any:
        return [self.visit(e) for e in node.elts]

    def _Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.visit(e) for e in node.elts)

    def _Dict(self, node: ast.Dict) -> Any:
        if any(k is None for k in node.keys):
            raise _refuse(self._source, node, "no ** unpacking in dicts")
        return {self.visit(k): self.visit(v) for k, v in zip(node.keys, node.values, strict=True) if k}

    def _Call(self, node: ast.Call) -> Any:
        assert isinstance(node.func, ast.Name)  # guaranteed by _check_call
        args = [self.visit(a) for a in node.args]
        return _check_size(self._source, FUNCTIONS[node.func.id](*args))
