"""``composite``: run steps of any registered type sequentially, in parallel, or conditionally.

Modes: ``sequential`` runs the steps in order (a step with a ``when`` that is
false is skipped); ``parallel`` runs them at most ``max_parallel`` at a time;
``conditional`` runs only the first step whose ``when`` holds (a step without
``when`` is the "else"). ``${steps.<name>.result.<field>}`` in a step's config
reads an earlier step's result data (see :mod:`actwheel.actions.interpolation`).

``saga: true``: when a step fails, the completed steps are compensated in
reverse completion order → ``data.rolled_back`` and ``data.compensation_order``.
A compensation that fails stops the rollback → ``data.dead`` with the reason;
the pipeline dead-letters the run. Every step change is a :class:`StepEvent`
and every compensation is audited (phase ``COMPENSATE``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from actwheel.actions.base import (
    ActionContext,
    ActionDefinition,
    ActionResult,
    Capabilities,
    Idempotency,
    StepEvent,
    execute_with_deadline,
)
from actwheel.actions.expressions import compile_expression
from actwheel.actions.interpolation import has_placeholder, interpolate, placeholder_errors, referenced_steps
from actwheel.actions.schema import schema_errors
from actwheel.errors import ExpressionError, FieldError, InvalidAction

if TYPE_CHECKING:
    from actwheel.actions.registry import ActionRegistry

__all__ = ["CompositeAction"]

DEFAULT_COMPENSATION_TIMEOUT_S = 60.0
_COMPENSATION_STATES = frozenset({"compensating", "compensated", "compensation_failed"})
_STEP_SCHEMA = {
    "type": "object",
    "required": ["name", "type"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,63}$"},
        "type": {"type": "string", "minLength": 1},
        "config": {"type": "object"},
        "when": {"type": "string"},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
    },
}


@dataclass(frozen=True, kw_only=True, slots=True)
class _Step:
    index: int
    name: str
    type: str
    config: dict[str, Any]
    when: str | None
    timeout: float | None

    @classmethod
    def parse(cls, index: int, raw: Mapping[str, Any]) -> _Step:
        return cls(
            index=index,
            name=raw["name"],
            type=raw["type"],
            config=dict(raw.get("config", {})),
            when=raw.get("when"),
            timeout=raw.get("timeout"),
        )


@dataclass(kw_only=True)
class _Outcome:
    """What happened to one step; ``config`` is the interpolated config it ran with."""

    step: _Step
    definition: ActionDefinition | None
    state: str = "waiting"
    config: dict[str, Any] = field(default_factory=dict)
    result: ActionResult | None = None
    compensation: str | None = None

    def view(self) -> dict[str, Any]:
        """How later steps and templates see this step: ``steps.<name>.result.<field>``."""
        result = self.result
        return {
            "state": self.state,
            "status": result.status if result else None,
            "summary": result.summary if result else None,
            "error": result.error if result else None,
            "result": dict(result.data) if result else {},
        }

    def record(self) -> dict[str, Any]:
        return {
            "name": self.step.name,
            "type": self.step.type,
            "state": self.state,
            "config": self.config,
            "result": self.result.as_dict() if self.result else None,
            "compensation": self.compensation,
        }


def _compensable(outcome: _Outcome) -> bool:
    return outcome.definition is not None and outcome.definition.capabilities.compensable


class _CompositeRun:
    """One execution of a composite config: the steps, their outcomes, and the rollback."""

    def __init__(self, registry: ActionRegistry, config: Mapping[str, Any], ctx: ActionContext) -> None:
        self.registry = registry
        self.ctx = ctx
        self.mode: str = config.get("mode", "sequential")
        self.stop_on_failure: bool = config.get("stop_on_failure", True)
        self.saga: bool = config.get("saga", False)
        self.max_parallel: int = config.get("max_parallel", 4)
        self.compensation_timeout: float = config.get("compensation_timeout", DEFAULT_COMPENSATION_TIMEOUT_S)
        self.outcomes = [_Outcome(step=_Step.parse(i, s), definition=None) for i, s in enumerate(config["steps"])]
        self.completed: list[_Outcome] = []
        self.variables: dict[str, Any] = dict(ctx.variables)
        self._stop = False

    async def emit(self, outcome: _Outcome, state: str, **detail: Any) -> None:
        if state in _COMPENSATION_STATES:
            outcome.compensation = state
        else:
            outcome.state = state
        await self.ctx.emit_step_event(
            StepEvent(
                run_id=self.ctx.run_id,
                step=outcome.step.name,
                state=state,
                detail={"index": outcome.step.index, "type": outcome.step.type, **detail},
            )
        )

    def steps_view(self) -> dict[str, Any]:
        return {o.step.name: o.view() for o in self.outcomes if o.state != "waiting"}

    def names(self) -> dict[str, Any]:
        names = replace(self.ctx, variables=self.variables, steps=self.steps_view()).expression_names()
        return names

    async def run(self) -> ActionResult:
        for outcome in self.outcomes:
            await self.emit(outcome, "waiting")
        await {"sequential": self._sequential, "parallel": self._parallel, "conditional": self._conditional}[
            self.mode
        ]()
        failed = [o for o in self.outcomes if o.state == "failed"]
        for outcome in self.outcomes:
            if outcome.state == "waiting":
                await self.emit(outcome, "skipped", reason="not run: an earlier step failed")
        if not failed:
            return self._succeeded()
        if self.saga:
            return await self.roll_back(failed[0])
        return self._failed(failed[0])

    def _when_holds(self, outcome: _Outcome) -> bool:
        if outcome.step.when is None:
            return True
        return bool(compile_expression(outcome.step.when, f"steps[{outcome.step.index}].when").evaluate(self.names()))

    async def _sequential(self) -> None:
        for outcome in self.outcomes:
            await self.run_step(outcome)
            if outcome.state == "failed" and self.stop_on_failure:
                return

    async def _conditional(self) -> None:
        for outcome in self.outcomes:
            try:
                chosen = self._when_holds(outcome)
            except ExpressionError as exc:
                await self._fail(outcome, ActionResult.fail(str(exc), retryable=False, code="expression_error"))
                return
            if chosen:
                await self.run_step(outcome, check_when=False)
                break
            await self.emit(outcome, "skipped", reason="condition false")

    async def _parallel(self) -> None:
        limit = asyncio.Semaphore(self.max_parallel)

        async def bounded(outcome: _Outcome) -> None:
            async with limit:
                if self._stop:
                    return
                await self.run_step(outcome)
                if outcome.state == "failed" and self.stop_on_failure:
                    self._stop = True

        async with asyncio.TaskGroup() as group:
            for outcome in self.outcomes:
                group.create_task(bounded(outcome))

    async def _fail(self, outcome: _Outcome, result: ActionResult) -> None:
        outcome.result = result
        await self.emit(outcome, "failed", summary=result.summary)

    async def run_step(self, outcome: _Outcome, *, check_when: bool = True) -> None:
        step = outcome.step
        try:
            if check_when and not self._when_holds(outcome):
                await self.emit(outcome, "skipped", reason="condition false")
                return
            outcome.definition = self.registry.get(step.type)
            outcome.config = interpolate(step.config, self.names(), f"steps[{step.index}].config")
        except (ExpressionError, InvalidAction) as exc:
            await self._fail(outcome, ActionResult.fail(str(exc), retryable=False, code="invalid"))
            return
        await self.emit(outcome, "in_progress")
        result = await self._execute(outcome)
        if not result.succeeded:
            await self._fail(outcome, result)
            return
        outcome.result = result
        self.variables.update(result.data.get("set_variables", {}))
        self.completed.append(outcome)
        await self.emit(outcome, "completed", summary=result.summary)

    async def _execute(self, outcome: _Outcome) -> ActionResult:
        definition = outcome.definition
        assert definition is not None
        errors = definition.validate(outcome.config)
        if errors:
            return ActionResult.fail(
                str(InvalidAction.collect(errors)),
                retryable=False,
                code="invalid",
                data={"errors": [e.as_dict() for e in errors]},
            )
        child = self.ctx.for_step(
            outcome.step.name,
            steps=self.steps_view(),
            variables=dict(self.variables),
            timeout=outcome.step.timeout,
        )
        try:
            return await execute_with_deadline(definition, outcome.config, child)
        except Exception as exc:  # an executor bug must not skip the saga's rollback
            child.log.exception("composite step raised", step=outcome.step.name)
            return ActionResult.fail(
                f"{outcome.step.type} raised {type(exc).__name__}: {exc}",
                retryable=False,
                code="executor_error",
            )

    def _records(self) -> list[dict[str, Any]]:
        return [o.record() for o in self.outcomes]

    def _succeeded(self) -> ActionResult:
        ran = [o.step.name for o in self.outcomes if o.state == "completed"]
        return ActionResult.ok(
            f"{len(ran)} step(s) completed: {', '.join(ran)}",
            {
                "steps": self._records(),
                "completed": ran,
                "completion_order": [o.step.name for o in self.completed],
                "variables": self.variables,
            },
        )

    def _failed(self, failed: _Outcome) -> ActionResult:
        assert failed.result is not None
        return ActionResult.fail(
            f"step {failed.step.name} failed: {failed.result.summary}",
            retryable=failed.result.retryable,
            code="step_failed",
            error=failed.result.error,
            data={
                "failed_step": failed.step.name,
                "steps": self._records(),
                "completion_order": [o.step.name for o in self.completed],
            },
        )

    async def roll_back(self, failed: _Outcome | None) -> ActionResult:
        """Compensate completed steps in reverse completion order; stop at the first that fails."""
        order: list[str] = []
        not_compensable: list[str] = []
        for outcome in reversed(self.completed):
            if not _compensable(outcome):
                not_compensable.append(outcome.step.name)
                await self.ctx.audit(
                    "COMPENSATE",
                    {"step": outcome.step.name, "type": outcome.step.type, "status": "not_compensable"},
                )
                continue
            problem = await self._compensate(outcome)
            if problem is not None:
                return self._dead(failed, outcome, problem, order)
            order.append(outcome.step.name)
        return self._rolled_back(failed, order, not_compensable)

    async def _compensate(self, outcome: _Outcome) -> str | None:
        """Compensate one step, emit and audit the outcome; the failure reason, or ``None`` on success."""
        await self.emit(outcome, "compensating")
        problem = await self._undo(outcome)
        reason = {"reason": problem} if problem else {}
        await self.emit(outcome, "compensation_failed" if problem else "compensated", **reason)
        status = "failed" if problem else "completed"
        await self.ctx.audit(
            "COMPENSATE", {"step": outcome.step.name, "type": outcome.step.type, "status": status, **reason}
        )
        return problem

    async def _undo(self, outcome: _Outcome) -> str | None:
        """Call the step's compensation with its own time budget (the run's may be spent)."""
        definition, result = outcome.definition, outcome.result
        assert definition is not None
        assert result is not None
        step_ctx = self.ctx.for_step(outcome.step.name, steps=self.steps_view(), variables=self.variables, timeout=None)
        ctx = replace(step_ctx, timeout=self.compensation_timeout, deadline=None)
        try:
            async with asyncio.timeout(self.compensation_timeout):
                undone = await definition.compensate(outcome.config, result, ctx)
        except TimeoutError:
            return f"compensation timed out after {self.compensation_timeout}s"
        except Exception as exc:  # Unsupported included: a raising compensation is a failed compensation
            return f"{type(exc).__name__}: {exc}"
        return None if undone.succeeded else (undone.error or undone.summary)

    def _rolled_back(self, failed: _Outcome | None, order: list[str], not_compensable: list[str]) -> ActionResult:
        cause = f"step {failed.step.name} failed" if failed else "compensation requested"
        error = failed.result.error if failed and failed.result else None
        return ActionResult.fail(
            f"{cause}; rolled back {', '.join(order) or 'nothing'}",
            retryable=False,
            code="rolled_back",
            error=error or cause,
            data={
                "rolled_back": True,
                "compensation_order": order,
                "not_compensable": not_compensable,
                "failed_step": failed.step.name if failed else None,
                "steps": self._records(),
            },
        )

    def _dead(self, failed: _Outcome | None, broken: _Outcome, problem: str, order: list[str]) -> ActionResult:
        left = [o.step.name for o in reversed(self.completed) if o.step.name not in order]
        reason = f"compensation of step {broken.step.name} failed: {problem}"
        return ActionResult.fail(
            reason,
            retryable=False,
            code="dead",
            error=reason,
            data={
                "dead": True,
                "dead_reason": reason,
                "rolled_back": False,
                "compensation_order": order,
                "failed_compensation": broken.step.name,
                "not_compensated": left,
                "failed_step": failed.step.name if failed else None,
                "steps": self._records(),
            },
        )


class CompositeAction(ActionDefinition):
    type = "composite"
    aliases = ("CompositeOp",)
    display_name = "Composite"
    description = (
        "Run `steps` ([{name, type, config, when?, timeout?}], any registered action type) in `mode` "
        "sequential (default), parallel (at most `max_parallel` at once) or conditional (only the first "
        "step whose `when` expression holds). `stop_on_failure` (default true). Later steps read earlier "
        "results with `${steps.<name>.result.<field>}`. `saga: true` undoes completed steps in reverse "
        "order when a step fails (result `rolled_back`); a compensation that fails leaves the run DEAD."
    )
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["steps"],
        "additionalProperties": False,
        "properties": {
            "mode": {"enum": ["sequential", "parallel", "conditional"]},
            "steps": {"type": "array", "minItems": 1, "maxItems": 200, "items": _STEP_SCHEMA},
            "stop_on_failure": {"type": "boolean"},
            "saga": {"type": "boolean"},
            "max_parallel": {"type": "integer", "minimum": 1, "maximum": 64},
            "compensation_timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
        },
    }
    idempotency = Idempotency.BEST_EFFORT
    capabilities = Capabilities(compensable=True, dry_run=True, timeout_control=True, parallel_safe=True)

    def __init__(self, registry: ActionRegistry) -> None:
        self.registry = registry

    def _definitions(self, config: Mapping[str, Any]) -> list[tuple[ActionDefinition, dict[str, Any]]]:
        found = []
        for raw in config.get("steps", []):
            if isinstance(raw, Mapping) and isinstance(raw.get("type"), str) and raw["type"] in self.registry:
                found.append((self.registry.get(raw["type"]), dict(raw.get("config", {}))))
        return found

    def nested_actions(self, config: Mapping[str, Any]) -> list[tuple[ActionDefinition, dict[str, Any]]]:
        return self._definitions(config)

    def required_scopes_for(self, config: Mapping[str, Any]) -> frozenset[str]:
        scopes = set(self.required_scopes)
        for definition, step_config in self._definitions(config):
            scopes |= definition.required_scopes_for(step_config)
        return frozenset(scopes)

    def idempotency_for(self, config: Mapping[str, Any]) -> Idempotency:
        levels = [d.idempotency_for(c) for d, c in self._definitions(config)]
        return min(levels, key=lambda level: level.rank, default=Idempotency.STRONG)

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        errors: list[FieldError] = []
        seen: set[str] = set()
        for index, raw in enumerate(config["steps"]):
            step = _Step.parse(index, raw)
            errors += self._step_errors(step, seen, config.get("mode", "sequential"))
            seen.add(step.name)
        return errors

    def _step_errors(self, step: _Step, earlier: set[str], mode: str) -> list[FieldError]:
        where = f"steps[{step.index}]"
        errors = (
            [FieldError(f"{where}.name", step.name, "a name unique in this composite")] if step.name in earlier else []
        )
        errors += _when_errors(step, where) + placeholder_errors(step.config, f"{where}.config")
        visible = set() if mode == "parallel" else earlier
        for path, name in referenced_steps({"when": step.when, "config": step.config}, where):
            if name not in visible:
                expected = (
                    "no step references in parallel mode"
                    if mode == "parallel"
                    else f"a reference to an earlier step (one of {sorted(earlier) or 'none'})"
                )
                errors.append(FieldError(path, name, expected))
        try:
            definition = self.registry.get(step.type)
        except InvalidAction as exc:
            return [*errors, FieldError(f"{where}.type", step.type, exc.expected)]
        return errors + _static_config_errors(definition, step.config, f"{where}.config")

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        return await _CompositeRun(self.registry, config, ctx).run()

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        """Undo a composite that completed (e.g. as a step of an outer saga), steps in reverse order."""
        run = _CompositeRun(self.registry, {**config, "saga": True}, ctx)
        records = {r["name"]: r for r in result.data.get("steps", [])}
        for name in result.data.get("completion_order", []):
            outcome = next(o for o in run.outcomes if o.step.name == name)
            outcome.definition = self.registry.get(outcome.step.type)
            outcome.config = records[name]["config"]
            outcome.result = ActionResult(**records[name]["result"])
            run.completed.append(outcome)
        undone = await run.roll_back(None)
        if undone.data.get("dead"):
            return undone
        return ActionResult.ok(undone.summary, undone.data)

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        reports: list[dict[str, Any]] = []
        for index, raw in enumerate(config["steps"]):
            reports.append(await self._dry_step(_Step.parse(index, raw), ctx))
        failed = [r for r in reports if r["status"] == "failed"]
        summary = f"would run {len(reports)} step(s) {config.get('mode', 'sequential')}ly"
        if failed:
            return ActionResult.fail(
                f"{summary}, but {failed[0]['name']} would fail: {failed[0]['summary']}",
                retryable=False,
                code="dry_run_failed",
                data={"steps": reports},
            )
        return ActionResult.ok(summary, {"steps": reports, "saga": config.get("saga", False)})

    async def _dry_step(self, step: _Step, ctx: ActionContext) -> dict[str, Any]:
        definition = self.registry.get(step.type)
        report: dict[str, Any] = {"name": step.name, "type": definition.type}
        if referenced_steps(step.config) or not definition.capabilities.dry_run:
            why = "depends on earlier results" if referenced_steps(step.config) else "has no dry run"
            return {**report, "status": "succeeded", "summary": f"validated only: {why}"}
        step_config = interpolate(step.config, ctx.expression_names(), f"steps[{step.index}].config")
        outcome = await definition.dry_run(
            step_config, ctx.for_step(step.name, steps={}, variables=ctx.variables, timeout=step.timeout)
        )
        return {**report, "status": outcome.status, "summary": outcome.summary}


def _when_errors(step: _Step, where: str) -> list[FieldError]:
    if step.when is None:
        return []
    try:
        compile_expression(step.when, f"{where}.when")
    except ExpressionError as exc:
        return [FieldError(f"{where}.when", step.when, exc.expected)]
    return []


def _static_config_errors(definition: ActionDefinition, config: dict[str, Any], prefix: str) -> list[FieldError]:
    """The step config's errors, except those on values that are ``${...}`` (known only at run time)."""
    errors = [e for e in schema_errors(definition.schema(), config, prefix) if not has_placeholder(e.value)]
    if errors or any(has_placeholder(v) for v in config.values()):
        return errors
    return [FieldError(f"{prefix}.{e.field}", e.value, e.expected) for e in definition.check(config)]
