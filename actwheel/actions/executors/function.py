"""``function.invoke``: call a Python function registered by name.

Functions come from a :class:`FunctionRegistry`, filled explicitly or from the
modules named in ``ACTWHEEL_FUNCTIONS`` (comma-separated ``package.module``
paths, each exposing ``register(registry)``). Arguments are checked before the
call against the function's JSON schema, or else by binding its signature.

Where it runs: a coroutine function on the event loop; a plain function in a
worker thread (a thread cannot be killed: at the timeout the run gets its
``timeout`` result but the thread finishes in the background); with
``isolation: "process"`` in a fresh Python process that is killed at the
timeout (arguments and return value must be JSON).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from actwheel.actions.base import ActionContext, ActionDefinition, ActionResult, Capabilities, Idempotency
from actwheel.actions.schema import schema_errors
from actwheel.actions.secrets import resolve_config
from actwheel.errors import FieldError, InvalidAction, InvalidInput, Unsupported

__all__ = ["FUNCTIONS_ENV", "FunctionRegistry", "InvokeFunction", "RegisteredFunction"]

FUNCTIONS_ENV = "ACTWHEEL_FUNCTIONS"
DEFAULT_TIMEOUT_S = 30.0

# Runs in the child: import the function by module + qualname, call it, print JSON. No actwheel import.
_CHILD = r"""
import asyncio, importlib, inspect, json, sys
job = json.loads(sys.stdin.buffer.read())
sys.path[:0] = [p for p in job["sys_path"] if p not in sys.path]
out_stream, sys.stdout = sys.stdout, sys.stderr  # the function's prints must not corrupt the reply
try:
    target = importlib.import_module(job["module"])
    for part in job["qualname"].split("."):
        target = getattr(target, part)
    value = target(**job["args"])
    if inspect.isawaitable(value):
        value = asyncio.run(value) if inspect.iscoroutine(value) else value
    out = {"ok": True, "value": value}
except BaseException as exc:
    out = {"ok": False, "type": type(exc).__name__, "error": str(exc)[:2000]}
try:
    text = json.dumps(out)
except (TypeError, ValueError) as exc:
    text = json.dumps({"ok": False, "type": "TypeError", "error": "return value is not JSON: %s" % exc})
out_stream.write(text)
"""


@dataclass(frozen=True, kw_only=True)
class RegisteredFunction:
    """A callable with its name, optional argument schema, compensation and idempotency.

    ``compensate(args, value)`` undoes a call that returned ``value``; it may be async.
    """

    name: str
    fn: Callable[..., Any] = field(repr=False)
    schema: dict[str, Any] | None = None
    compensate: Callable[[dict[str, Any], Any], Any] | None = field(default=None, repr=False)
    idempotency: Idempotency = Idempotency.NONE
    description: str = ""

    def argument_errors(self, args: Mapping[str, Any]) -> list[FieldError]:
        """Every problem with ``args``: schema violations, else a signature that does not bind."""
        if self.schema is not None:
            return schema_errors(self.schema, args, "args")
        signature = inspect.signature(self.fn)
        where = f"{self.name}{signature}"
        errors = [FieldError(f"args.{n}", args[n], f"an argument of {where}") for n in _unexpected(signature, args)]
        errors += [FieldError(f"args.{n}", None, f"a value (required by {where})") for n in _missing(signature, args)]
        if not errors:
            try:
                signature.bind(**args)
            except TypeError as exc:
                errors.append(FieldError("args", dict(args), f"arguments {where} accepts: {exc}"))
        return errors

    def importable(self) -> bool:
        """True if a fresh process can import this exact function by module and qualname."""
        module = getattr(self.fn, "__module__", None)
        qualname = getattr(self.fn, "__qualname__", "")
        if not module or "<" in qualname:
            return False
        target: Any = sys.modules.get(module)
        for part in qualname.split("."):
            target = getattr(target, part, None)
        return target is self.fn and module != "__main__"


def _unexpected(signature: inspect.Signature, args: Mapping[str, Any]) -> list[str]:
    params = signature.parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return sorted(n for n in args if n not in named)


def _missing(signature: inspect.Signature, args: Mapping[str, Any]) -> list[str]:
    return [
        n
        for n, p in signature.parameters.items()
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in args
    ]


class FunctionRegistry:
    """Functions ``function.invoke`` may call, by name. Registration is explicit."""

    def __init__(self) -> None:
        self._functions: dict[str, RegisteredFunction] = {}

    def __repr__(self) -> str:
        return f"FunctionRegistry({', '.join(self._functions)})"

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        schema: dict[str, Any] | None = None,
        compensate: Callable[[dict[str, Any], Any], Any] | None = None,
        idempotency: Idempotency = Idempotency.NONE,
        description: str = "",
    ) -> RegisteredFunction:
        """Add ``fn`` as ``name``.

        :raises InvalidAction: ``name`` is taken, or ``fn`` is not callable
        """
        if name in self._functions:
            raise InvalidAction("function", name, "a function name not registered yet")
        if not callable(fn):
            raise InvalidAction("fn", fn, "a callable")
        entry = RegisteredFunction(
            name=name,
            fn=fn,
            schema=schema,
            compensate=compensate,
            idempotency=idempotency,
            description=description,
        )
        self._functions[name] = entry
        return entry

    def get(self, name: str) -> RegisteredFunction:
        """:raises InvalidAction: unknown name (field ``function``), listing the known ones"""
        try:
            return self._functions[name]
        except KeyError:
            known = ", ".join(sorted(self._functions)) or "(none registered)"
            raise InvalidAction("function", name, f"one of {known}") from None

    def names(self) -> list[str]:
        return sorted(self._functions)

    def load_module(self, path: str) -> None:
        """Import ``path`` and call its ``register(registry)``.

        :raises InvalidInput: the module cannot be imported or has no callable ``register``
        """
        try:
            module = importlib.import_module(path)
        except ImportError as exc:
            raise InvalidInput(FUNCTIONS_ENV, path, f"an importable module path ({exc})") from None
        hook = getattr(module, "register", None)
        if not callable(hook):
            raise InvalidInput(FUNCTIONS_ENV, path, "a module with a module-level register(registry)")
        hook(self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FunctionRegistry:
        """A registry filled from the modules named in ``ACTWHEEL_FUNCTIONS`` (empty when unset)."""
        env = os.environ if environ is None else environ
        registry = cls()
        for path in filter(None, (p.strip() for p in env.get(FUNCTIONS_ENV, "").split(","))):
            registry.load_module(path)
        return registry


class _FunctionFailed(Exception):
    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(f"{kind}: {message}")


async def _call_in_loop_or_thread(entry: RegisteredFunction, args: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(entry.fn):
        return await entry.fn(**args)
    value = await asyncio.to_thread(entry.fn, **args)
    return await value if inspect.isawaitable(value) else value


async def _call_in_process(entry: RegisteredFunction, args: dict[str, Any], limit: float) -> Any:
    job = {
        "module": entry.fn.__module__,
        "qualname": entry.fn.__qualname__,
        "args": args,
        "sys_path": sys.path,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CHILD,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(limit):
            out, err = await proc.communicate(orjson.dumps(job))
    finally:
        await _reap(proc)
    return _child_value(out, err, proc.returncode)


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Kill the child if it still runs (timeout or cancellation) and wait for it, shielded."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await asyncio.shield(proc.wait())


def _child_value(out: bytes, err: bytes, returncode: int | None) -> Any:
    try:
        reply = orjson.loads(out)
    except orjson.JSONDecodeError:
        raise _FunctionFailed(
            "ProcessError", f"exit code {returncode}: {err.decode(errors='replace')[-500:]}"
        ) from None
    if not reply.get("ok"):
        raise _FunctionFailed(reply.get("type", "Error"), reply.get("error", ""))
    return reply.get("value")


def _json_value(value: Any) -> Any:
    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:
        return repr(value)[:2000]


class InvokeFunction(ActionDefinition):
    type = "function.invoke"
    aliases = ("InvokeFunction",)
    display_name = "Invoke function"
    description = (
        "Call a server-registered Python function by `function` name with keyword `args` (checked "
        "before the call). `timeout` in seconds; `isolation: process` runs it in a separate process "
        "that is killed at the timeout. Result: `value` (the JSON return value). Compensable when the "
        "function was registered with a compensation."
    )
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["function"],
        "additionalProperties": False,
        "properties": {
            "function": {"type": "string", "minLength": 1},
            "args": {"type": "object"},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
            "isolation": {"enum": ["default", "process"]},
        },
    }
    idempotency = Idempotency.NONE
    required_scopes = frozenset({"function:invoke"})
    capabilities = Capabilities(compensable=True, dry_run=True, timeout_control=True, parallel_safe=True)

    def __init__(self, functions: FunctionRegistry) -> None:
        self.functions = functions

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        try:
            entry = self.functions.get(config["function"])
        except InvalidAction as exc:
            return list(exc.errors)
        errors = entry.argument_errors(config.get("args", {}))
        if config.get("isolation") == "process" and not entry.importable():
            errors.append(
                FieldError(
                    "isolation",
                    "process",
                    f"a module-level function; {entry.name} cannot be imported by a fresh process",
                )
            )
        return errors

    def idempotency_for(self, config: Mapping[str, Any]) -> Idempotency:
        name = config.get("function")
        if isinstance(name, str) and name in self.functions:
            return self.functions.get(name).idempotency
        return self.idempotency

    def _limit(self, config: Mapping[str, Any], ctx: ActionContext) -> float:
        own = float(config.get("timeout", DEFAULT_TIMEOUT_S))
        left = ctx.remaining()
        return own if left is None else min(own, left)

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        entry = self.functions.get(config["function"])
        resolved = await resolve_config(config.get("args", {}), ctx.secrets, ctx.owner_id)
        limit = self._limit(config, ctx)
        isolation = config.get("isolation", "default")
        try:
            value = await self._call(entry, resolved.config, limit, isolation)
        except TimeoutError:
            return ActionResult.fail(
                f"function {entry.name} timed out after {limit}s"
                + (" (process killed)" if isolation == "process" else ""),
                retryable=entry.idempotency is Idempotency.STRONG,
                code="timeout",
            )
        except Exception as exc:  # the function's own failure is the run's result, not a crash
            text = resolved.scrub(f"function {entry.name} raised {type(exc).__name__}: {exc}")
            return ActionResult.fail(text, retryable=False, code="function_error")
        data = {"function": entry.name, "value": _json_value(value), "isolation": isolation}
        return ActionResult.ok(f"called {entry.name}", resolved.scrub(data))

    async def _call(self, entry: RegisteredFunction, args: dict[str, Any], limit: float, isolation: str) -> Any:
        if isolation == "process":
            try:
                return await _call_in_process(entry, args, limit)
            except _FunctionFailed as exc:
                raise RuntimeError(str(exc)) from None
        async with asyncio.timeout(limit):
            return await _call_in_loop_or_thread(entry, args)

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        entry = self.functions.get(config["function"])
        if entry.compensate is None:
            raise Unsupported("function", entry.name, "a function registered with compensate=...")
        resolved = await resolve_config(config.get("args", {}), ctx.secrets, ctx.owner_id)
        try:
            async with asyncio.timeout(self._limit(config, ctx)):
                outcome = entry.compensate(resolved.config, result.data.get("value"))
                if inspect.isawaitable(outcome):
                    await outcome
        except Exception as exc:
            return ActionResult.fail(
                resolved.scrub(f"compensation of {entry.name} raised {exc!r}"),
                retryable=False,
                code="compensation_failed",
            )
        return ActionResult.ok(f"compensated {entry.name}", {"function": entry.name})

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        entry = self.functions.get(config["function"])
        return ActionResult.ok(
            f"would call {entry.name} with {sorted(config.get('args', {}))}",
            {
                "function": entry.name,
                "isolation": config.get("isolation", "default"),
                "timeout": self._limit(config, ctx),
            },
        )
