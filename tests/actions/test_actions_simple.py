"""simple.op: set_variable, log, delay, assert."""

from __future__ import annotations

import asyncio

import pytest
from actions_support import make_ctx
from structlog.testing import capture_logs

from actwheel.actions.base import execute_with_deadline
from actwheel.actions.executors.simple import SimpleOp
from actwheel.clock import VirtualClock

OP = SimpleOp()


async def test_set_variable_from_value_or_expression() -> None:
    ctx = make_ctx(variables={"amount": 40})
    by_value = await OP.execute({"op": "set_variable", "name": "limit", "value": "${amount + 2}"}, ctx)
    by_expr = await OP.execute({"op": "set_variable", "name": "big", "expression": "amount > 10"}, ctx)
    assert by_value.data["set_variables"] == {"limit": 42}
    assert by_expr.data["set_variables"] == {"big": True}


async def test_log_writes_through_the_run_logger() -> None:
    with capture_logs() as logs:
        result = await OP.execute(
            {"op": "log", "message": "order ${order.id}", "level": "warning"}, make_ctx(variables={"order": {"id": 7}})
        )
    assert result.succeeded
    entry = next(e for e in logs if e["event"] == "simple.op log")
    assert (entry["message"], entry["log_level"], entry["run_id"]) == ("order 7", "warning", "run-1")


async def test_delay_waits_on_the_context_clock() -> None:
    clock = VirtualClock()
    task = asyncio.create_task(OP.execute({"op": "delay", "seconds": 30}, make_ctx(clock=clock)))
    for _ in range(100):  # let the task reach its sleep
        if clock.sleepers:
            break
        await asyncio.sleep(0)
    await clock.advance_and_settle(29)
    assert not task.done()
    await clock.advance_and_settle(1)
    assert (await task).succeeded


async def test_delay_past_the_timeout_is_a_timeout_result() -> None:
    ctx = make_ctx(clock=VirtualClock(), timeout=0.05)
    result = await execute_with_deadline(OP, {"op": "delay", "seconds": 60}, ctx)
    assert (result.code, result.retryable) == ("timeout", True)


async def test_assert_holds_or_fails_with_its_message() -> None:
    ctx = make_ctx(variables={"event": {"amount": 50}})
    assert (await OP.execute({"op": "assert", "condition": "event.amount >= 50"}, ctx)).succeeded
    failed = await OP.execute({"op": "assert", "condition": "event.amount > 50", "message": "too small"}, ctx)
    assert (failed.status, failed.summary, failed.code, failed.retryable) == (
        "failed",
        "too small",
        "assertion_failed",
        False,
    )
    missing = await OP.execute({"op": "assert", "condition": "evnt.amount > 1"}, ctx)
    assert missing.code == "expression_error"
    assert "'evnt'" in missing.summary


def test_validation_lists_every_problem() -> None:
    errors = OP.validate({"op": "set_variable", "expression": "__import__('os')"})
    assert {e.field for e in errors} == {"name", "expression"}
    errors = OP.validate({"op": "teleport", "seconds": -1})
    assert {e.field: e.value for e in errors} == {"op": "teleport", "seconds": -1}
    assert OP.validate({"op": "delay", "seconds": 10**9})[0].field == "seconds"


async def test_dry_run_and_compensation_change_nothing() -> None:
    ctx = make_ctx(variables={"x": 1})
    assert (await OP.dry_run({"op": "delay", "seconds": 5}, ctx)).summary == "would delay"
    assert (await OP.dry_run({"op": "assert", "condition": "x == 2"}, ctx)).code == "assertion_failed"
    result = await OP.execute({"op": "log", "message": "m"}, ctx)
    assert (await OP.compensate({"op": "log", "message": "m"}, result, ctx)).succeeded


@pytest.mark.parametrize("alias", ["SimpleOp", "simple.op"])
def test_alias_resolves(alias: str) -> None:
    from actwheel.actions import default_registry

    assert default_registry().get(alias).type == "simple.op"


@pytest.mark.parametrize("config", [
    {"op": "set_variable", "name": "x", "value": "${amount}"},
    {"op": "set_variable", "name": "x", "expression": "amount > 1"},
    {"op": "log", "message": "hello ${amount}"},
    {"op": "assert", "condition": "amount > 1"},
    {"op": "assert", "condition": "amount > 100"},
])
def test_the_ops_said_never_to_wait_finish_without_suspending(config: dict[str, object]) -> None:
    """``never_waits`` lets execute_with_deadline run them without a timer: the claim must hold."""
    assert OP.never_waits(config)
    coroutine = OP.execute(config, make_ctx(variables={"amount": 40}))
    with pytest.raises(StopIteration) as finished:
        coroutine.send(None)  # a suspension would return here instead of finishing
    assert finished.value.value.status in ("succeeded", "failed")


def test_delay_waits_so_its_deadline_is_armed() -> None:
    assert not OP.never_waits({"op": "delay", "seconds": 1})
