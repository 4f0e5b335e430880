"""The dispatch pipeline over the real registry: order in the audit trail, failures as outcomes, metrics, secrets."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from actwheel.actions import default_registry
from actwheel.actions.abac import PolicyRules
from actwheel.actions.base import ActionContext, ActionDefinition, ActionResult, AuditSink, Capabilities, Idempotency
from actwheel.actions.ontology_port import InMemoryOntology, ObjectType
from actwheel.actions.pipeline import DispatchOutcome, DispatchPipeline, DispatchRequest
from actwheel.actions.registry import ActionRegistry
from actwheel.actions.secrets import StaticSecrets
from actwheel.clock import VirtualClock
from actwheel.errors import FieldError
from actwheel.metrics import Metrics

OWNER = "alice"
LOG = {"op": "log", "message": "hello"}


class Boom(ActionDefinition):
    """Raises from execute: an executor bug."""

    type: ClassVar[str] = "test.boom"
    display_name: ClassVar[str] = "Boom"
    description: ClassVar[str] = "raises"
    config_schema: ClassVar[dict[str, Any]] = {"type": "object"}

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        raise RuntimeError("kaput")


class Hang(ActionDefinition):
    """Never returns on its own; records whether its dry run was called."""

    type: ClassVar[str] = "test.hang"
    display_name: ClassVar[str] = "Hang"
    description: ClassVar[str] = "hangs"
    config_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    idempotency: ClassVar[Idempotency] = Idempotency.NONE

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class Echo(ActionDefinition):
    """Audits what it was given (with a sensitive key), succeeds."""

    type: ClassVar[str] = "test.echo"
    display_name: ClassVar[str] = "Echo"
    description: ClassVar[str] = "echoes"
    config_schema: ClassVar[dict[str, Any]] = {"type": "object"}

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        await ctx.audit("STEP", {"password": "hunter2", "note": "visible"})
        return ActionResult.ok("echoed", {"seen": sorted(config)})


class Fragile(ActionDefinition):
    """Executes fine; its compensation fails."""

    type: ClassVar[str] = "test.fragile"
    display_name: ClassVar[str] = "Fragile"
    description: ClassVar[str] = "cannot be undone"
    config_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    idempotency: ClassVar[Idempotency] = Idempotency.STRONG
    capabilities: ClassVar[Capabilities] = Capabilities(compensable=True)

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        return ActionResult.ok("did it")

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        return ActionResult.fail("the undo endpoint is gone", retryable=False)


class Gate(ActionDefinition):
    """Waits for ``release``; counts how many executions are inside at once."""

    type: ClassVar[str] = "test.gate"
    display_name: ClassVar[str] = "Gate"
    description: ClassVar[str] = "waits"
    config_schema: ClassVar[dict[str, Any]] = {"type": "object"}

    def __init__(self) -> None:
        self.inside = 0
        self.peak = 0
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        self.inside += 1
        self.peak = max(self.peak, self.inside)
        self.entered.set()
        await self.release.wait()
        self.inside -= 1
        return ActionResult.ok("passed")


@dataclass
class Host:
    """What the engine would give the pipeline: contexts with an ontology, secrets and a bus stand-in."""

    registry: ActionRegistry
    ontology: InMemoryOntology
    metrics: Metrics
    clock: VirtualClock
    published: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    rules: PolicyRules | None = None

    def make_context(self, request: DispatchRequest, audit: AuditSink) -> ActionContext:
        async def publish(routing_key: str, data: Mapping[str, Any]) -> None:
            self.published.append((routing_key, dict(data)))

        return ActionContext(
            run_id=request.run_id, owner_id=request.owner_id, automation_id=request.automation_id,
            scopes=request.scopes, attempt=request.attempt, idempotency_key=request.idempotency_key,
            variables=request.variables, timeout=request.timeout_s, clock=self.clock,
            secrets=StaticSecrets({(OWNER, "token"): "s3cr3t-value"}), ontology=self.ontology,
            publish=publish, audit=audit)

    def pipeline(self, rules: PolicyRules | None = None) -> DispatchPipeline:
        return DispatchPipeline(self.registry, make_context=self.make_context, clock=self.clock,
                                metrics=self.metrics, rules=rules)

    def sample(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


@pytest.fixture
async def host() -> Host:
    registry = default_registry()
    for definition in (Boom(), Hang(), Echo(), Fragile(), Gate()):
        registry.register(definition)
    ontology = InMemoryOntology()
    await ontology.put_type(ObjectType(name="Order", properties={"sku": {"type": "string"}}, required=("sku",)))
    return Host(registry=registry, ontology=ontology, metrics=Metrics(), clock=VirtualClock())


def _request(action_type: str, config: Mapping[str, Any], **overrides: Any) -> DispatchRequest:
    values: dict[str, Any] = {"run_id": "run-1", "owner_id": OWNER, "action_type": action_type, "config": config,
                              "scopes": frozenset({"*"}), "timeout_s": 5.0}
    values.update(overrides)
    return DispatchRequest(**values)


def _phases(outcome: DispatchOutcome) -> list[str]:
    return [r.phase + (f":{r.details['state']}" if r.phase == "EXECUTE" else "") for r in outcome.audit]


def _details(outcome: DispatchOutcome, phase: str) -> dict[str, Any]:
    return next(r.details for r in outcome.audit if r.phase == phase)


# --- order and success ----------------------------------------------------------------------------


async def test_success_audits_every_phase_in_order(host: Host) -> None:
    outcome = await host.pipeline().dispatch(_request("simple.op", LOG))
    assert (outcome.status, outcome.reason, outcome.executor_type) == ("SUCCEEDED", None, "simple.op")
    assert _phases(outcome) == ["DISPATCH", "PERMISSION", "VALIDATE", "EXECUTE:started", "EXECUTE:completed"]
    assert _details(outcome, "DISPATCH") == {"type": "simple.op", "attempt": 1, "dry_run": False}
    assert _details(outcome, "PERMISSION")["granted"] is True
    assert _details(outcome, "VALIDATE") == {"ok": True, "errors": []}
    assert outcome.audit[-1].details["status"] == "succeeded"
    assert not outcome.retryable


async def test_alias_resolves_to_the_dotted_type(host: Host) -> None:
    outcome = await host.pipeline().dispatch(_request("SimpleOp", LOG))
    assert outcome.status == "SUCCEEDED"
    assert outcome.executor_type == "simple.op"
    assert host.sample("action_dispatched_total", executor_type="simple.op", status="SUCCEEDED") == 1


async def test_audit_times_come_from_the_injected_clock(host: Host) -> None:
    outcome = await host.pipeline().dispatch(_request("simple.op", LOG))
    assert {r.at for r in outcome.audit} == {host.clock.now()}


# --- failures are outcomes, never exceptions -------------------------------------------------------


async def test_unknown_type_fails_naming_the_known_types(host: Host) -> None:
    outcome = await host.pipeline().dispatch(_request("teleport", {}))
    assert (outcome.status, outcome.reason) == ("FAILED", "unknown_type")
    assert "teleport" in (outcome.result.error or "")
    assert "simple.op" in (outcome.result.error or "")
    assert "webhook.call" in (outcome.result.error or "")
    assert not outcome.retryable
    assert "EXECUTE" not in [r.phase for r in outcome.audit]
    assert host.sample("action_dispatched_total", executor_type="teleport", status="FAILED") == 1


async def test_missing_scope_fails_with_permission_and_is_audited(host: Host) -> None:
    config = {"object_type": "Order", "properties": {"sku": "A"}}
    outcome = await host.pipeline().dispatch(_request("ontology.create_object", config,
                                                      scopes=frozenset({"webhook:call"})))
    assert (outcome.status, outcome.reason) == ("FAILED", "permission")
    permission = _details(outcome, "PERMISSION")
    assert permission["granted"] is False
    assert permission["required"] == ["ontology:write"]
    assert "ontology:write" in permission["reason"]
    assert OWNER in (outcome.result.error or "")
    assert _phases(outcome) == ["DISPATCH", "PERMISSION"]
    assert await host.ontology.list_objects("Order") == []
    assert not outcome.retryable


async def test_the_exact_scope_is_enough(host: Host) -> None:
    config = {"object_type": "Order", "properties": {"sku": "A"}}
    outcome = await host.pipeline().dispatch(_request("ontology.create_object", config,
                                                      scopes=frozenset({"ontology:write"})))
    assert outcome.status == "SUCCEEDED"
    assert len(await host.ontology.list_objects("Order")) == 1


async def test_composite_needs_the_scopes_of_its_steps(host: Host) -> None:
    create = {"object_type": "Order", "properties": {"sku": "A"}}
    config = {"mode": "sequential", "steps": [{"name": "a", "type": "ontology.create_object", "config": create}]}
    outcome = await host.pipeline().dispatch(_request("composite", config, scopes=frozenset()))
    assert (outcome.status, outcome.reason) == ("FAILED", "permission")
    assert await host.ontology.list_objects("Order") == []


async def test_abac_deny_rule_wins(host: Host) -> None:
    rules = PolicyRules.from_dict({"rules": [
        {"effect": "allow", "subject": "*", "action": "simple.op"},
        {"effect": "deny", "subject": "ali*", "action": "simple.op", "resource": "log"}]})
    outcome = await host.pipeline(rules).dispatch(_request("simple.op", LOG))
    assert (outcome.status, outcome.reason) == ("FAILED", "permission")
    assert "denied by rule deny" in _details(outcome, "PERMISSION")["reason"]
    other = await host.pipeline(rules).dispatch(_request("simple.op", {"op": "set_variable", "name": "x",
                                                                       "value": 1}))
    assert other.status == "SUCCEEDED"


async def test_abac_default_deny_and_conditions(host: Host) -> None:
    rules = PolicyRules.from_dict({"default": "deny", "rules": [
        {"effect": "allow", "action": "simple.op", "conditions": {"dry_run": True}}]})
    real = await host.pipeline(rules).dispatch(_request("simple.op", LOG))
    dry = await host.pipeline(rules).dispatch(_request("simple.op", LOG, dry_run=True))
    assert (real.status, real.reason) == ("FAILED", "permission")
    assert "default deny" in _details(real, "PERMISSION")["reason"]
    assert dry.status == "SUCCEEDED"


async def test_abac_deny_cannot_be_bypassed_through_a_composite(host: Host) -> None:
    rules = PolicyRules.from_dict({"rules": [{"effect": "deny", "action": "simple.op"}]})
    config = {"mode": "sequential", "steps": [{"name": "a", "type": "simple.op", "config": LOG}]}
    outcome = await host.pipeline(rules).dispatch(_request("composite", config))
    assert (outcome.status, outcome.reason) == ("FAILED", "permission")


async def test_validation_lists_every_error_and_does_not_execute(host: Host) -> None:
    outcome = await host.pipeline().dispatch(_request("simple.op", {"op": "nope", "bogus": 1}))
    assert (outcome.status, outcome.reason) == ("FAILED", "validation")
    errors = _details(outcome, "VALIDATE")["errors"]
    assert {e["field"] for e in errors} == {"op", "bogus"}
    assert {e["value"] for e in errors} == {"nope", 1}
    assert outcome.result.data["errors"] == errors
    assert "op='nope'" in (outcome.result.error or "")
    assert _phases(outcome) == ["DISPATCH", "PERMISSION", "VALIDATE"]
    assert not outcome.retryable


async def test_validation_of_an_ontology_object_against_its_type(host: Host) -> None:
    config = {"object_type": "Order", "properties": {"qty": 1}}
    outcome = await host.pipeline().dispatch(_request("ontology.create_object", config))
    # The object type's schema lives in the ontology, so the executor checks it: a result, not an exception.
    assert (outcome.status, outcome.reason) == ("FAILED", "invalid")
    assert outcome.result.data["errors"] == [{"field": "properties.sku", "value": None,
                                              "expected": "a value (required)"}]
    assert not outcome.retryable
    assert await host.ontology.list_objects("Order") == []


async def test_executor_raising_is_a_failure_retryable_only_when_strong(host: Host) -> None:
    outcome = await host.pipeline().dispatch(_request("test.boom", {}))
    assert (outcome.status, outcome.reason) == ("FAILED", "error")
    assert not outcome.retryable  # NONE: the side effect may have happened before the raise
    assert "RuntimeError" in (outcome.result.error or "")
    assert "kaput" not in (outcome.result.error or "")  # the text may quote secrets: it stays in the log
    Boom.idempotency = Idempotency.STRONG
    try:
        assert (await host.pipeline().dispatch(_request("test.boom", {}))).retryable
    finally:
        Boom.idempotency = Idempotency.NONE
    assert _phases(outcome)[-1] == "EXECUTE:completed"
    assert host.sample("action_dispatched_total", executor_type="test.boom", status="FAILED") == 2


async def test_timeout_is_a_failure_not_retryable_for_a_none_action(host: Host) -> None:
    outcome = await host.pipeline().dispatch(_request("test.hang", {}, timeout_s=0.02))
    assert (outcome.status, outcome.reason) == ("FAILED", "timeout")
    assert not outcome.retryable
    assert "timed out" in outcome.result.summary


async def test_timeout_of_a_strong_action_is_retryable(host: Host) -> None:
    # simple.op delay sleeps on the VirtualClock, which never moves: only the timeout can end it.
    outcome = await host.pipeline().dispatch(_request("simple.op", {"op": "delay", "seconds": 60}, timeout_s=0.02))
    assert (outcome.status, outcome.reason) == ("FAILED", "timeout")
    assert outcome.retryable


async def test_per_type_limit_bounds_concurrent_executions(host: Host) -> None:
    gate = host.registry.get("test.gate")
    assert isinstance(gate, Gate)
    pipeline = DispatchPipeline(host.registry, make_context=host.make_context, clock=host.clock,
                                metrics=host.metrics, per_type_limit=1)
    tasks = [asyncio.create_task(pipeline.dispatch(_request("test.gate", {}, run_id=f"r{i}"))) for i in range(3)]
    try:
        await gate.entered.wait()
        for _ in range(20):  # let the other two reach the limit
            await asyncio.sleep(0)
        assert gate.inside == 1
        gate.release.set()
        outcomes = await asyncio.gather(*tasks)
    finally:
        gate.release.set()
        for task in tasks:
            task.cancel()
    assert [o.status for o in outcomes] == ["SUCCEEDED"] * 3
    assert gate.peak == 1


# --- dry run ---------------------------------------------------------------------------------------


async def test_dry_run_changes_nothing_and_says_what_would_happen(host: Host) -> None:
    config = {"object_type": "Order", "properties": {"sku": "A"}}
    outcome = await host.pipeline().dispatch(_request("ontology.create_object", config, dry_run=True))
    assert outcome.status == "SUCCEEDED"
    assert await host.ontology.list_objects("Order") == []
    assert outcome.result.summary
    assert _details(outcome, "DISPATCH")["dry_run"] is True
    assert host.sample("action_execution_duration_seconds_count", executor_type="ontology.create_object") == 0


async def test_dry_run_still_checks_permission_and_validation(host: Host) -> None:
    config = {"object_type": "Order", "properties": {"sku": "A"}}
    denied = await host.pipeline().dispatch(_request("ontology.create_object", config, dry_run=True,
                                                     scopes=frozenset()))
    invalid = await host.pipeline().dispatch(_request("simple.op", {"op": "nope"}, dry_run=True))
    assert denied.reason == "permission"
    assert invalid.reason == "validation"


async def test_dry_run_of_a_type_without_one_is_not_retryable(host: Host) -> None:
    outcome = await host.pipeline().dispatch(_request("test.echo", {}, dry_run=True))
    assert outcome.status == "FAILED"
    assert not outcome.retryable


# --- the four seed metrics -------------------------------------------------------------------------


ISSUE_SAGA: dict[str, Any] = {"mode": "sequential", "saga": True, "steps": [
    {"name": "a", "type": "ontology.create_object", "config": {"object_type": "Order", "properties": {"sku": "A"}}},
    {"name": "b", "type": "ontology.create_object", "config": {"object_type": "Order", "properties": {"sku": "B"}}},
    {"name": "c", "type": "ontology.create_relation", "config": {
        "relation_type": "pairs", "source": "${steps.a.result.object_id}", "target": "${steps.b.result.object_id}"}},
    {"name": "d", "type": "simple.op", "config": {"op": "assert", "condition": "1 == 2"}}]}


async def test_dispatch_and_duration_metrics(host: Host) -> None:
    pipeline = host.pipeline()
    await pipeline.dispatch(_request("simple.op", LOG))
    await pipeline.dispatch(_request("simple.op", LOG))
    await pipeline.dispatch(_request("simple.op", {"op": "assert", "condition": "1 == 2"}))
    assert host.sample("action_dispatched_total", executor_type="simple.op", status="SUCCEEDED") == 2
    assert host.sample("action_dispatched_total", executor_type="simple.op", status="FAILED") == 1
    assert host.sample("action_execution_duration_seconds_count", executor_type="simple.op") == 3
    assert "action_dispatched_total" in host.metrics.render().decode()


async def test_issue_saga_rolls_back_c_b_a_and_counts_compensations(host: Host) -> None:
    outcome = await host.pipeline().dispatch(_request("composite", ISSUE_SAGA))
    assert (outcome.status, outcome.reason) == ("ROLLED_BACK", "rolled_back")
    compensations = [r.details for r in outcome.audit if r.phase == "COMPENSATE"]
    assert [(c["step"], c["status"]) for c in compensations] == [("c", "completed"), ("b", "completed"),
                                                                 ("a", "completed")]
    assert await host.ontology.list_objects("Order") == []
    assert host.sample("action_compensation_total", executor_type="composite") == 3
    assert host.sample("action_dispatched_total", executor_type="composite", status="ROLLED_BACK") == 1
    assert host.sample("action_dead_letter_total", reason="compensation_failed") == 0
    phases = _phases(outcome)
    assert phases.index("EXECUTE:started") < phases.index("COMPENSATE") < phases.index("EXECUTE:completed")


async def test_failing_compensation_ends_dead_and_is_counted(host: Host) -> None:
    config = {"mode": "sequential", "saga": True, "steps": [
        {"name": "a", "type": "ontology.create_object", "config": {"object_type": "Order", "properties": {"sku": "A"}}},
        {"name": "f", "type": "test.fragile", "config": {}},
        {"name": "d", "type": "simple.op", "config": {"op": "assert", "condition": "1 == 2"}}]}
    outcome = await host.pipeline().dispatch(_request("composite", config))
    assert (outcome.status, outcome.reason) == ("DEAD", "compensation_failed")
    assert "the undo endpoint is gone" in (outcome.result.error or "")
    assert host.sample("action_dead_letter_total", reason="compensation_failed") == 1
    assert host.sample("action_dispatched_total", executor_type="composite", status="DEAD") == 1
    assert not outcome.retryable
    # a was never compensated: the saga stopped at f
    assert len(await host.ontology.list_objects("Order")) == 1


async def test_compensation_metric_counts_only_compensated_steps(host: Host) -> None:
    config = {"mode": "sequential", "saga": True, "steps": [
        {"name": "a", "type": "ontology.create_object", "config": {"object_type": "Order", "properties": {"sku": "A"}}},
        {"name": "n", "type": "notification.send", "config": {"channel": "log", "body": "hi"}},
        {"name": "d", "type": "simple.op", "config": {"op": "assert", "condition": "1 == 2"}}]}
    outcome = await host.pipeline().dispatch(_request("composite", config))
    assert outcome.status == "ROLLED_BACK"
    statuses = [r.details["status"] for r in outcome.audit if r.phase == "COMPENSATE"]
    assert statuses == ["not_compensable", "completed"]
    assert host.sample("action_compensation_total", executor_type="composite") == 1


# --- secrets ---------------------------------------------------------------------------------------


async def test_secrets_are_masked_in_audit_details(host: Host) -> None:
    config = {"token": {"$secret": "token"}, "headers": {"Authorization": "Bearer literal-xyz"},
              "api_key": "literal-abc", "plain": "ok"}
    outcome = await host.pipeline().dispatch(_request("test.echo", config))
    assert outcome.status == "SUCCEEDED"
    started = next(r.details for r in outcome.audit if r.phase == "EXECUTE")
    assert started["config"] == {"token": {"$secret": "token"}, "headers": {"Authorization": "***"},
                                 "api_key": "***", "plain": "ok"}
    step = _details(outcome, "STEP")
    assert step == {"password": "***", "note": "visible"}
    text = repr(outcome.audit)
    for secret in ("literal-xyz", "literal-abc", "hunter2", "s3cr3t-value"):
        assert secret not in text


async def test_invalid_secret_literal_is_masked_in_validation_errors(host: Host) -> None:
    config = {"url": "https://example.com/hook", "headers": {"Authorization": ["Bearer leak-me"]}}
    outcome = await host.pipeline().dispatch(_request("webhook.call", config))
    assert outcome.reason == "validation"
    assert "leak-me" not in repr(outcome.audit)
    assert "leak-me" not in (outcome.result.error or "")


# --- the validation cache (speed only) --------------------------------------------------------------


class Counted(ActionDefinition):
    """Counts validations; a config with ``bad`` is invalid."""

    type: ClassVar[str] = "test.counted"
    display_name: ClassVar[str] = "Counted"
    description: ClassVar[str] = "counts its validations"
    config_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"bad": {"type": "string"}}}

    def __init__(self) -> None:
        self.validations = 0

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        self.validations += 1
        return [FieldError("bad", config["bad"], "absent")] if "bad" in config else []

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        return ActionResult.ok("counted")


async def test_a_valid_config_is_validated_once_an_invalid_one_every_time(host: Host) -> None:
    counted = Counted()
    host.registry.register(counted)
    pipeline = host.pipeline()
    for _ in range(3):
        assert (await pipeline.dispatch(_request("test.counted", {"a": 1, "b": [2]}))).status == "SUCCEEDED"
    assert counted.validations == 1
    assert (await pipeline.dispatch(_request("test.counted", {"b": [2], "a": 1}))).status == "SUCCEEDED"
    assert counted.validations == 1  # same content, other key order
    assert (await pipeline.dispatch(_request("test.counted", {"a": 2, "b": [2]}))).status == "SUCCEEDED"
    assert counted.validations == 2
    for _ in range(2):
        outcome = await pipeline.dispatch(_request("test.counted", {"bad": "x"}))
        assert (outcome.status, outcome.reason) == ("FAILED", "validation")
        assert _details(outcome, "VALIDATE")["ok"] is False
    assert counted.validations == 4
