"""``simple.op``: set_variable, log, delay, assert — no side effects outside the run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from actwheel.actions.base import ActionContext, ActionDefinition, ActionResult, Capabilities, Idempotency
from actwheel.actions.expressions import compile_expression
from actwheel.actions.interpolation import interpolate
from actwheel.errors import ExpressionError, FieldError

__all__ = ["MAX_DELAY_S", "SimpleOp"]

MAX_DELAY_S = 24 * 3600.0
_LEVELS = ["debug", "info", "warning", "error"]

Op = Callable[[Mapping[str, Any], ActionContext], Awaitable[ActionResult]]


def _variable_name(config: Mapping[str, Any]) -> str:
    """``set_variable``'s variable: ``name``, or its alias ``key`` (the action engine's own word)."""
    return str(config["name"] if "name" in config else config["key"])


async def _set_variable(config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
    if "expression" in config:
        value = compile_expression(config["expression"]).evaluate(ctx.expression_names())
    else:
        value = interpolate(config.get("value"), ctx.expression_names(), "value")
    name = _variable_name(config)
    return ActionResult.ok(f"set {name}", {"name": name, "value": value, "set_variables": {name: value}})


async def _log(config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
    message = interpolate(config["message"], ctx.expression_names(), "message")
    level = config.get("level", "info")
    getattr(ctx.log, level)("simple.op log", message=str(message))
    return ActionResult.ok(f"logged at {level}", {"message": str(message), "level": level})


async def _delay(config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
    await ctx.clock.sleep(float(config["seconds"]))
    return ActionResult.ok(f"waited {config['seconds']}s", {"seconds": config["seconds"]})


async def _assert(config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
    value = compile_expression(config["condition"], "condition").evaluate(ctx.expression_names())
    if value:
        return ActionResult.ok(f"assertion holds: {config['condition']}", {"condition": config["condition"]})
    message = config.get("message") or f"assertion failed: {config['condition']}"
    return ActionResult.fail(
        message,
        retryable=False,
        code="assertion_failed",
        data={"condition": config["condition"], "value": repr(value)[:200]},
    )


_OPS: dict[str, Op] = {"set_variable": _set_variable, "log": _log, "delay": _delay, "assert": _assert}
#: The ops whose coroutine never suspends (``delay`` sleeps on the clock).
_NEVER_WAIT = frozenset({"set_variable", "log", "assert"})
_REQUIRED = {"set_variable": ("name",), "log": ("message",), "delay": ("seconds",), "assert": ("condition",)}


class SimpleOp(ActionDefinition):
    type = "simple.op"
    aliases = ("SimpleOp",)
    display_name = "Simple operation"
    description = (
        "Small in-run operations with no outside effect. `op: set_variable` (`name` — or its alias `key` — "
        "and `value` or an `expression`) makes a variable visible to later composite steps; `op: log` writes `message` "
        "(`${...}` allowed) at `level`; `op: delay` waits `seconds`; `op: assert` evaluates a safe "
        "`condition` such as `amount > 100 and status in ['new', 'open']` and fails when it is false."
    )
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["op"],
        "additionalProperties": False,
        "properties": {
            "op": {"enum": list(_OPS)},
            "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
            "key": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
            "value": {},
            "expression": {"type": "string"},
            "message": {"type": "string", "maxLength": 10_000},
            "level": {"enum": _LEVELS},
            "seconds": {"type": "number", "minimum": 0, "maximum": MAX_DELAY_S},
            "condition": {"type": "string"},
        },
    }
    idempotency = Idempotency.STRONG
    capabilities = Capabilities(compensable=True, dry_run=True, timeout_control=True, parallel_safe=True)

    def never_waits(self, config: Mapping[str, Any]) -> bool:
        """Every op but ``delay`` runs without suspending (an expression, a log line, a variable)."""
        return config.get("op") in _NEVER_WAIT

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        op = config["op"]
        errors = [
            FieldError(name, None, f"a value (required by op {op})") for name in _REQUIRED[op]
            if name not in config and not (name == "name" and "key" in config)
        ]
        if "name" in config and "key" in config:
            errors.append(FieldError("key", config["key"], "either name or its alias key, not both"))
        for name in ("expression", "condition"):
            if name in config:
                errors += _expression_errors(config[name], name)
        return errors

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        try:
            return await _OPS[config["op"]](config, ctx)
        except ExpressionError as exc:
            return ActionResult.fail(str(exc), retryable=False, code="expression_error")

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        return ActionResult.ok(f"nothing to undo for simple.op {config['op']}")

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        if config["op"] in ("assert", "set_variable"):
            return await self.execute(config, ctx)
        return ActionResult.ok(f"would {config['op']}", {"op": config["op"]})


def _expression_errors(source: Any, field: str) -> list[FieldError]:
    try:
        compile_expression(source, field)
    except ExpressionError as exc:
        return [FieldError(field, source, exc.expected)]
    return []
