"""composite: sequential / parallel / conditional steps, interpolation, saga rollback, dead compensation."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from actions_support import Recorder, make_ctx

from actwheel.actions import ActionContext, ActionDefinition, ActionResult, Capabilities, Idempotency
from actwheel.actions.defaults import default_registry
from actwheel.actions.executors.function import FunctionRegistry
from actwheel.actions.ontology_port import InMemoryOntology
from actwheel.actions.registry import ActionRegistry


def _order(name: str, sku: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "ontology.create_object",
        "config": {"object_type": "Order", "properties": {"sku": sku}},
    }


FAIL = {"name": "d", "type": "simple.op", "config": {"op": "assert", "condition": "1 == 2"}}


async def _run(
    config: dict[str, Any],
    ontology: InMemoryOntology | None = None,
    registry: ActionRegistry | None = None,
    recorder: Recorder | None = None,
) -> tuple[ActionResult, Recorder]:
    registry = registry or default_registry()
    recorder = recorder or Recorder()
    composite = registry.get("composite")
    assert composite.validate(config) == []
    return await composite.execute(config, make_ctx(ontology=ontology, recorder=recorder)), recorder


async def test_the_issue_saga_rolls_back_c_b_a(ontology: InMemoryOntology) -> None:
    config = {
        "mode": "sequential",
        "saga": True,
        "steps": [
            _order("a", "A"),
            _order("b", "B"),
            {
                "name": "c",
                "type": "ontology.create_relation",
                "config": {
                    "relation_type": "pairs",
                    "source": "${steps.a.result.object_id}",
                    "target": "${steps.b.result.object_id}",
                },
            },
            FAIL,
        ],
    }
    result, recorder = await _run(config, ontology)
    assert result.status == "failed"
    assert result.data["rolled_back"] is True
    assert result.data["compensation_order"] == ["c", "b", "a"]
    assert result.data["failed_step"] == "d"
    assert result.code == "rolled_back"
    assert await ontology.list_objects(include_deleted=True) == []
    assert await ontology.list_relations() == []
    compensations = [(d["step"], d["status"]) for phase, d in recorder.audits if phase == "COMPENSATE"]
    assert compensations == [("c", "completed"), ("b", "completed"), ("a", "completed")]
    assert recorder.states("a") == ["waiting", "in_progress", "completed", "compensating", "compensated"]
    assert recorder.states("d") == ["waiting", "in_progress", "failed"]


async def test_five_step_saga_failing_at_four_compensates_three_two_one(ontology: InMemoryOntology) -> None:
    config = {
        "saga": True,
        "steps": [
            _order("one", "1"),
            _order("two", "2"),
            _order("three", "3"),
            {**FAIL, "name": "four"},
            _order("five", "5"),
        ],
    }
    result, recorder = await _run(config, ontology)
    assert result.data["compensation_order"] == ["three", "two", "one"]
    assert [d["step"] for p, d in recorder.audits if p == "COMPENSATE"] == ["three", "two", "one"]
    assert recorder.states("five") == ["waiting", "skipped"]
    assert await ontology.list_objects(include_deleted=True) == []


class Flaky(ActionDefinition):
    """Succeeds; its compensation fails (or raises), to drive the dead-letter path."""

    type = "test.flaky"
    display_name = "Flaky"
    description = "test"
    config_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"raise": {"type": "boolean"}}}
    capabilities = Capabilities(compensable=True)

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        return ActionResult.ok("did it")

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        if config.get("raise"):
            raise RuntimeError("undo exploded")
        return ActionResult.fail("cannot undo: upstream gone", retryable=False)


@pytest.mark.parametrize(
    ("raises", "reason"), [(False, "cannot undo: upstream gone"), (True, "RuntimeError: undo exploded")]
)
async def test_a_failing_compensation_is_dead(ontology: InMemoryOntology, raises: bool, reason: str) -> None:
    registry = default_registry()
    registry.register(Flaky())
    config = {
        "saga": True,
        "steps": [
            _order("a", "A"),
            {"name": "f", "type": "test.flaky", "config": {"raise": raises}},
            _order("b", "B"),
            FAIL,
        ],
    }
    result, recorder = await _run(config, ontology, registry)
    assert result.data["dead"] is True
    assert result.code == "dead"
    assert reason in result.data["dead_reason"]
    assert "step f" in result.data["dead_reason"]
    assert result.data["compensation_order"] == ["b"]
    assert result.data["not_compensated"] == ["f", "a"]
    assert recorder.states("f")[-2:] == ["compensating", "compensation_failed"]
    assert [(d["step"], d["status"]) for p, d in recorder.audits] == [("b", "completed"), ("f", "failed")]
    assert len(await ontology.list_objects()) == 1  # a stays: the rollback stopped at f


async def test_without_saga_a_failure_stops_and_keeps_what_was_done(ontology: InMemoryOntology) -> None:
    result, _ = await _run({"steps": [_order("a", "A"), FAIL, _order("b", "B")]}, ontology)
    assert result.code == "step_failed"
    assert result.data["failed_step"] == "d"
    assert "rolled_back" not in result.data
    assert len(await ontology.list_objects()) == 1


async def test_stop_on_failure_false_runs_the_rest(ontology: InMemoryOntology) -> None:
    result, _ = await _run({"stop_on_failure": False, "steps": [_order("a", "A"), FAIL, _order("b", "B")]}, ontology)
    assert result.status == "failed"
    assert result.data["completion_order"] == ["a", "b"]
    assert len(await ontology.list_objects()) == 2


async def test_results_and_variables_flow_to_later_steps(ontology: InMemoryOntology) -> None:
    config = {
        "steps": [
            _order("a", "A"),
            {"name": "limit", "type": "simple.op", "config": {"op": "set_variable", "name": "limit", "value": 3}},
            {
                "name": "check",
                "type": "simple.op",
                "config": {"op": "assert", "condition": "limit == 3 and steps.a.result.object_type == 'Order'"},
            },
            {
                "name": "tag",
                "type": "ontology.update_object",
                "config": {
                    "object_id": "${steps.a.result.object_id}",
                    "properties": {"qty": "${limit}"},
                    "expected_version": "${steps.a.result.version}",
                },
            },
        ]
    }
    result, _ = await _run(config, ontology)
    assert result.succeeded, result
    [obj] = await ontology.list_objects()
    assert (obj.properties, obj.version) == ({"sku": "A", "qty": 3}, 2)
    assert result.data["variables"]["limit"] == 3


async def test_when_skips_in_sequential_mode(ontology: InMemoryOntology) -> None:
    config = {"steps": [{**_order("a", "A"), "when": "amount > 100"}, _order("b", "B")]}
    registry = default_registry()
    composite = registry.get("composite")
    recorder = Recorder()
    ctx = make_ctx(ontology=ontology, recorder=recorder, variables={"amount": 5})
    result = await composite.execute(config, ctx)
    assert result.succeeded
    assert result.data["completed"] == ["b"]
    assert recorder.states("a") == ["waiting", "skipped"]


async def test_conditional_runs_the_first_matching_branch(ontology: InMemoryOntology) -> None:
    config = {
        "mode": "conditional",
        "steps": [
            {**_order("big", "BIG"), "when": "amount > 100"},
            {**_order("mid", "MID"), "when": "amount > 10"},
            _order("small", "SMALL"),
        ],
    }
    composite = default_registry().get("composite")
    for amount, expected in [(500, "BIG"), (50, "MID"), (1, "SMALL")]:
        fresh = InMemoryOntology()
        await fresh.put_type(await ontology.get_type("Order"))
        result = await composite.execute(config, make_ctx(ontology=fresh, variables={"amount": amount}))
        assert result.succeeded
        assert [o.properties["sku"] for o in await fresh.list_objects()] == [expected]


async def test_parallel_is_bounded_by_max_parallel() -> None:
    running = 0
    peak = 0
    gate = asyncio.Event()
    two_running = asyncio.Event()

    async def work(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 2:
            two_running.set()
        await gate.wait()
        running -= 1
        return n

    functions = FunctionRegistry()
    functions.register("work", work)
    registry = default_registry(functions=functions)
    config = {
        "mode": "parallel",
        "max_parallel": 2,
        "steps": [
            {"name": f"s{i}", "type": "function.invoke", "config": {"function": "work", "args": {"n": i}}}
            for i in range(5)
        ],
    }
    task = asyncio.create_task(registry.get("composite").execute(config, make_ctx()))
    await asyncio.wait_for(two_running.wait(), 5)
    for _ in range(20):  # give the other three every chance to (wrongly) start
        await asyncio.sleep(0)
    assert running == 2  # the other three wait for a slot
    gate.set()
    result = await task
    assert result.succeeded
    assert peak == 2
    assert sorted(result.data["completion_order"]) == [f"s{i}" for i in range(5)]


async def test_parallel_saga_compensates_completed_steps(ontology: InMemoryOntology) -> None:
    config = {
        "mode": "parallel",
        "saga": True,
        "max_parallel": 1,
        "steps": [_order("a", "A"), _order("b", "B"), FAIL, _order("e", "E")],
    }
    result, _ = await _run(config, ontology)
    assert result.data["rolled_back"] is True
    assert result.data["compensation_order"] == ["b", "a"]
    assert await ontology.list_objects(include_deleted=True) == []


def test_validation_reports_every_problem_with_paths() -> None:
    composite = default_registry().get("composite")
    errors = composite.validate(
        {
            "mode": "parallel",
            "steps": [
                _order("a", "A"),
                {"name": "a", "type": "ontology.create_object", "config": {"object_type": "Order", "properties": 3}},
                {"name": "b", "type": "teleport"},
                {
                    "name": "c",
                    "type": "simple.op",
                    "config": {"op": "assert", "condition": "${steps.a.result.x}"},
                    "when": "import os",
                },
            ],
        }
    )
    by_field = {e.field: e for e in errors}
    assert set(by_field) == {
        "steps[1].name",
        "steps[1].config.properties",
        "steps[2].type",
        "steps[3].when",
        "steps[3].config.condition",
    }
    assert "ontology.create_object" in by_field["steps[2].type"].expected
    assert "parallel" in by_field["steps[3].config.condition"].expected
    errors = composite.validate(
        {
            "steps": [
                {"name": "x", "type": "simple.op", "config": {"op": "log", "message": "${steps.later.result.id}"}},
                {"name": "later", "type": "simple.op", "config": {"op": "log", "message": "m"}},
            ]
        }
    )
    assert [(e.field, e.value) for e in errors] == [("steps[0].config.message", "later")]
    assert composite.validate({"steps": []})[0].field == "steps"


def test_scopes_and_idempotency_come_from_the_steps() -> None:
    composite = default_registry().get("composite")
    config = {"steps": [_order("a", "A"), {"name": "w", "type": "Webhook", "config": {"url": "http://x"}}]}
    assert composite.required_scopes_for(config) == {"ontology:write", "webhook:call"}
    assert composite.idempotency_for(config) is Idempotency.BEST_EFFORT
    assert composite.idempotency_for({"steps": [_order("a", "A")]}) is Idempotency.STRONG


async def test_dry_run_changes_nothing_and_reports_each_step(ontology: InMemoryOntology) -> None:
    config = {
        "saga": True,
        "steps": [
            _order("a", "A"),
            {
                "name": "c",
                "type": "ontology.create_relation",
                "config": {"relation_type": "r", "source": "${steps.a.result.object_id}", "target": "x"},
            },
        ],
    }
    result = await default_registry().get("composite").dry_run(config, make_ctx(ontology=ontology))
    assert result.succeeded
    assert [s["summary"] for s in result.data["steps"]][1] == "validated only: depends on earlier results"
    assert await ontology.list_objects() == []
    bad = (
        await default_registry()
        .get("composite")
        .dry_run(
            {"steps": [{**_order("a", "A"), "config": {"object_type": "Order", "properties": {"sku": 1}}}]},
            make_ctx(ontology=ontology),
        )
    )
    assert bad.code == "dry_run_failed"
    assert "a would fail" in bad.summary


async def test_a_step_timeout_fails_the_step_and_triggers_the_rollback(ontology: InMemoryOntology) -> None:
    from actwheel.clock import VirtualClock

    config = {
        "saga": True,
        "steps": [
            _order("a", "A"),
            {"name": "wait", "type": "simple.op", "timeout": 0.05, "config": {"op": "delay", "seconds": 60}},
        ],
    }
    composite = default_registry().get("composite")
    result = await composite.execute(config, make_ctx(ontology=ontology, clock=VirtualClock()))
    assert result.data["rolled_back"] is True
    assert result.data["steps"][1]["result"]["code"] == "timeout"
    assert await ontology.list_objects() == []


async def test_a_completed_composite_can_be_compensated_later(ontology: InMemoryOntology) -> None:
    composite = default_registry().get("composite")
    config = {"steps": [_order("a", "A"), _order("b", "B")]}
    ctx = make_ctx(ontology=ontology)
    result = await composite.execute(config, ctx)
    assert len(await ontology.list_objects()) == 2
    undone = await composite.compensate(config, result, ctx)
    assert undone.succeeded
    assert undone.data["compensation_order"] == ["b", "a"]
    assert await ontology.list_objects(include_deleted=True) == []


async def test_executor_bugs_in_a_step_still_roll_back(ontology: InMemoryOntology) -> None:
    class Buggy(Flaky):
        type = "test.buggy"

        async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
            raise KeyError("oops")

    registry = default_registry()
    registry.register(Buggy())
    result, _ = await _run(
        {"saga": True, "steps": [_order("a", "A"), {"name": "bug", "type": "test.buggy"}]}, ontology, registry
    )
    assert result.data["rolled_back"] is True
    assert result.data["steps"][1]["result"]["code"] == "executor_error"
