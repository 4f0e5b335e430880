"""function.invoke: registry, argument checks, threads, processes, timeouts, compensation."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import actions_sample_functions as sample
import pytest
from actions_support import make_ctx

from actwheel.actions.base import Idempotency
from actwheel.actions.executors.function import FUNCTIONS_ENV, FunctionRegistry, InvokeFunction
from actwheel.actions.secrets import StaticSecrets
from actwheel.errors import InvalidAction, InvalidInput, Unsupported


def _invoke() -> InvokeFunction:
    functions = FunctionRegistry.from_env({FUNCTIONS_ENV: "actions_sample_functions"})
    functions.register("thread_name", sample.thread_name)
    functions.register("hang_async", sample.hang_async)
    functions.register("boom", sample.boom)
    functions.register("pid_then_hang", sample.pid_then_hang)
    functions.register("shout", sample.shout)
    functions.register("reserve", sample.reserve, compensate=sample.release, idempotency=Idempotency.STRONG)
    functions.register(
        "typed",
        sample.add,
        schema={
            "type": "object",
            "required": ["a", "b"],
            "additionalProperties": False,
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        },
    )
    return InvokeFunction(functions)


async def test_sync_function_runs_in_a_worker_thread() -> None:
    invoke = _invoke()
    assert (await invoke.execute({"function": "add", "args": {"a": 2, "b": 3}}, make_ctx())).data["value"] == 5
    name = (await invoke.execute({"function": "thread_name"}, make_ctx())).data["value"]
    assert name != threading.current_thread().name


async def test_async_function_is_awaited() -> None:
    result = await _invoke().execute({"function": "greet", "args": {"name": "bo"}}, make_ctx())
    assert result.data["value"] == {"greeting": "hello bo!"}


def test_loading_from_the_config_module_path() -> None:
    registry = FunctionRegistry.from_env({FUNCTIONS_ENV: "actions_sample_functions"})
    assert registry.names() == ["add", "greet"]
    with pytest.raises(InvalidInput) as err:
        FunctionRegistry.from_env({FUNCTIONS_ENV: "no_such_module_anywhere"})
    assert (err.value.field, err.value.value) == (FUNCTIONS_ENV, "no_such_module_anywhere")
    with pytest.raises(InvalidInput, match="register"):
        FunctionRegistry.from_env({FUNCTIONS_ENV: "actions_support"})
    with pytest.raises(InvalidAction):
        registry.register("add", sample.add)
    assert FunctionRegistry.from_env({}).names() == []


def test_arguments_are_checked_before_the_call() -> None:
    invoke = _invoke()
    errors = invoke.validate({"function": "add", "args": {"a": 1, "c": 2}})
    assert {e.field: e.value for e in errors} == {"args.c": 2, "args.b": None}
    assert "add(a: 'int', b: 'int')" in errors[0].expected
    errors = invoke.validate({"function": "typed", "args": {"a": "x", "z": 1}})
    assert {e.field: e.value for e in errors} == {"args.a": "x", "args.b": None, "args.z": 1}
    errors = invoke.validate({"function": "nope"})
    assert errors[0].field == "function"
    assert "add" in errors[0].expected
    errors = invoke.validate({"function": 3, "timeout": 0, "isolation": "vm"})
    assert {e.field for e in errors} == {"function", "timeout", "isolation"}


async def test_a_raising_function_is_a_failed_result() -> None:
    result = await _invoke().execute({"function": "boom", "args": {"message": "bad sku"}}, make_ctx())
    assert (result.code, result.retryable) == ("function_error", False)
    assert "ValueError: bad sku" in result.summary


async def test_timeout_in_the_loop() -> None:
    result = await _invoke().execute({"function": "hang_async", "timeout": 0.05}, make_ctx())
    assert result.code == "timeout"
    assert "0.05" in result.summary


async def test_process_isolation_returns_the_value_and_ignores_prints() -> None:
    invoke = _invoke()
    result = await invoke.execute({"function": "shout", "args": {"text": "hi"}, "isolation": "process"}, make_ctx())
    assert result.data["value"] == "HI", result
    failed = await invoke.execute(
        {"function": "boom", "args": {"message": "in child"}, "isolation": "process"}, make_ctx()
    )
    assert failed.code == "function_error"
    assert "ValueError: in child" in failed.summary


async def test_process_isolation_kills_the_process_at_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    config = {"function": "pid_then_hang", "args": {"pid_file": str(pid_file)}, "isolation": "process", "timeout": 2.0}
    result = await _invoke().execute(config, make_ctx())
    assert result.code == "timeout"
    assert "process killed" in result.summary
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_process_isolation_needs_an_importable_function() -> None:
    invoke = _invoke()

    def local() -> None:
        return None

    invoke.functions.register("local", local)
    errors = invoke.validate({"function": "local", "isolation": "process"})
    assert errors[0].field == "isolation"


async def test_compensation_function_gets_args_and_value() -> None:
    invoke = _invoke()
    config = {"function": "reserve", "args": {"item": "seat-7"}}
    ctx = make_ctx()
    result = await invoke.execute(config, ctx)
    assert (await invoke.compensate(config, result, ctx)).succeeded
    assert sample.CALLS[-2:] == [("reserve", "seat-7"), ("release", ("seat-7", "reservation-seat-7"))]
    assert invoke.idempotency_for(config) is Idempotency.STRONG
    assert invoke.idempotency_for({"function": "add"}) is Idempotency.NONE
    with pytest.raises(Unsupported):
        await invoke.compensate({"function": "add", "args": {"a": 1, "b": 1}}, result, ctx)


async def test_secret_arguments_resolve_inside_and_never_come_back() -> None:
    invoke = _invoke()
    secrets = StaticSecrets({("alice", "tok"): "topsecret"})
    result = await invoke.execute(
        {"function": "shout", "args": {"text": {"$secret": "tok"}}}, make_ctx(secrets=secrets)
    )
    assert result.data["value"] == "TOPSECRET".upper()  # transformed values are the function's business
    failed = await invoke.execute(
        {"function": "boom", "args": {"message": {"$secret": "tok"}}}, make_ctx(secrets=secrets)
    )
    assert "topsecret" not in repr(failed)
    assert "***" in failed.summary


async def test_dry_run_does_not_call() -> None:
    before = len(sample.CALLS)
    started = time.perf_counter()
    result = await _invoke().dry_run({"function": "reserve", "args": {"item": "x"}}, make_ctx())
    assert result.succeeded
    assert "would call reserve" in result.summary
    assert len(sample.CALLS) == before
    assert time.perf_counter() - started < 1
