"""The dispatch pipeline: every run, scheduled or ad hoc, goes through it in this order.

1. resolve the type (unknown → FAILED naming the known types)
2. permission: the caller's scopes include the action's required scopes, then ABAC rules
3. validate (every error at once, each with its field path and value)
4. execute under the policy's timeout and a per-type concurrency limit (or dry run)
5. map the executor's result onto a run status

Idempotency by key happens before this, where the run is inserted: a duplicate
``(owner, idempotency key)`` returns the first run (a unique key in the
database). The pipeline never writes run status: it returns a
:class:`DispatchOutcome` whose audit records and status the executor router
commits in one transaction (docs/design.md invariant 10).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from actwheel.actions.abac import AccessRequest, PolicyRules, resource_of
from actwheel.actions.base import (
    ActionContext,
    ActionDefinition,
    ActionResult,
    AuditSink,
    Idempotency,
    execute_with_deadline,
)
from actwheel.actions.registry import ActionRegistry
from actwheel.actions.secrets import mask_secrets, masked
from actwheel.actions.valid_configs import ValidConfigs
from actwheel.clock import Clock
from actwheel.errors import FieldError, InvalidAction, NotAvailable
from actwheel.metrics import Metrics

__all__ = ["ALL_SCOPES", "AuditRecord", "DispatchOutcome", "DispatchPipeline", "DispatchRequest"]

#: A scope that grants every other (the local owner before authentication exists).
ALL_SCOPES = "*"


@dataclass(frozen=True, kw_only=True)
class DispatchRequest:
    """One attempt of one run, built from the run's snapshots (never the automation's live config)."""

    run_id: str
    owner_id: str
    action_type: str
    config: Mapping[str, Any]
    scopes: frozenset[str] = frozenset()
    automation_id: str | None = None
    attempt: int = 1
    timeout_s: float | None = None
    variables: Mapping[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    idempotency_key: str = ""


@dataclass(frozen=True, slots=True)
class AuditRecord:
    phase: str
    details: dict[str, Any]
    at: datetime


@dataclass(frozen=True, kw_only=True)
class DispatchOutcome:
    """What the pipeline decided; the router turns it into a run transition.

    :ivar status: ``SUCCEEDED``, ``FAILED``, ``ROLLED_BACK`` or ``DEAD``
    :ivar reason: why, for anything but success (``unknown_type``, ``permission``, ``validation``,
        ``timeout``, ``error``, ``rolled_back``, ``compensation_failed``)
    """

    status: str
    reason: str | None
    result: ActionResult
    executor_type: str
    audit: tuple[AuditRecord, ...]
    duration_s: float = 0.0

    @property
    def retryable(self) -> bool:
        return self.status == "FAILED" and self.result.retryable


ContextFactory = Callable[[DispatchRequest, AuditSink], ActionContext]


class DispatchPipeline:
    """Runs requests through the fixed order above; safe to share across tasks."""

    def __init__(
        self,
        registry: ActionRegistry,
        *,
        make_context: ContextFactory,
        clock: Clock,
        metrics: Metrics,
        rules: PolicyRules | None = None,
        per_type_limit: int = 64,
    ) -> None:
        self._registry = registry
        self._make_context = make_context
        self._clock = clock
        self._metrics = metrics
        self._rules = rules or PolicyRules()
        self._per_type_limit = per_type_limit
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._valid_configs = ValidConfigs()
        # Labelled metric children by their labels: ``labels()`` validates and locks on every call.
        self._dispatched: dict[tuple[str, str], Any] = {}
        self._durations: dict[str, Any] = {}

    async def dispatch(self, request: DispatchRequest) -> DispatchOutcome:
        """Run ``request`` through the pipeline. Never raises for bad input or a failing executor."""
        trail = _Trail(self._clock)
        trail.add("DISPATCH", type=request.action_type, attempt=request.attempt, dry_run=request.dry_run)
        definition = self._resolve(request, trail)
        if isinstance(definition, DispatchOutcome):
            return self._count(definition)
        denied = self._check_permission(definition, request, trail)
        if denied is not None:
            return self._count(denied)
        invalid = self._validate(definition, request, trail)
        if invalid is not None:
            return self._count(invalid)
        return self._count(await self._execute(definition, request, trail))

    def _resolve(self, request: DispatchRequest, trail: _Trail) -> ActionDefinition | DispatchOutcome:
        try:
            return self._registry.get(request.action_type)
        except InvalidAction as exc:
            trail.add("VALIDATE", ok=False, errors=[e.as_dict() for e in exc.errors])
            return trail.outcome(
                "FAILED",
                "unknown_type",
                ActionResult.fail(str(exc), retryable=False, code="unknown_type"),
                request.action_type,
            )

    def _check_permission(
        self, definition: ActionDefinition, request: DispatchRequest, trail: _Trail
    ) -> DispatchOutcome | None:
        needed = definition.required_scopes_for(request.config)
        missing = sorted(needed - request.scopes) if ALL_SCOPES not in request.scopes else []
        allowed, why = (False, "missing scopes: " + ", ".join(missing)) if missing else self._abac(definition, request)
        trail.add("PERMISSION", granted=allowed, required=sorted(needed), reason=why)
        if allowed:
            return None
        message = f"permission denied for {request.owner_id!r} on {definition.type!r}: {why}"
        return trail.outcome(
            "FAILED",
            "permission",
            ActionResult.fail(message, retryable=False, code="permission"),
            definition.type,
        )

    def _abac(self, definition: ActionDefinition, request: DispatchRequest) -> tuple[bool, str]:
        """Every action the request would run, nested steps included, must be allowed."""
        attributes = {"dry_run": request.dry_run, "automation_id": request.automation_id}
        why = ""
        for action_type, config in _actions_within(definition, request.config):
            access = AccessRequest(subject=request.owner_id, action=action_type, resource=resource_of(config),
                                   attributes=attributes)
            allowed, why = self._rules.decide(access)
            if not allowed:
                return False, f"{action_type}: {why}"
        return True, why

    def _validate(
        self, definition: ActionDefinition, request: DispatchRequest, trail: _Trail
    ) -> DispatchOutcome | None:
        errors = [_masked(e) for e in self._valid_configs.errors(definition, request.config)]
        trail.add("VALIDATE", ok=not errors, errors=[e.as_dict() for e in errors])
        if not errors:
            return None
        message = "invalid config: " + "; ".join(str(e) for e in errors)
        return trail.outcome(
            "FAILED",
            "validation",
            ActionResult.fail(
                message,
                retryable=False,
                code="validation",
                data={"errors": [e.as_dict() for e in errors]},
            ),
            definition.type,
        )

    async def _execute(self, definition: ActionDefinition, request: DispatchRequest, trail: _Trail) -> DispatchOutcome:
        ctx = self._make_context(request, trail.sink(self._on_audit(definition)))
        trail.add("EXECUTE", state="started", type=definition.type, config=masked(dict(request.config)))
        started = time.perf_counter()
        async with self._limit(definition.type):
            result = await self._run(definition, request, ctx)
        duration = time.perf_counter() - started
        if not request.dry_run:
            self._duration_of(definition.type).observe(duration)
        trail.add(
            "EXECUTE",
            state="completed",
            status=result.status,
            summary=result.summary,
            code=result.code,
            duration_s=round(duration, 6),
        )
        status, reason = _status_of(result)
        return trail.outcome(status, reason, result, definition.type, duration)

    async def _run(self, definition: ActionDefinition, request: DispatchRequest, ctx: ActionContext) -> ActionResult:
        try:
            if request.dry_run:
                return await definition.dry_run(request.config, ctx)
            return await execute_with_deadline(definition, request.config, ctx)
        except NotAvailable as exc:  # e.g. no dry run for this type: trying again will not help
            return ActionResult.fail(str(exc), retryable=False, code="not_available")
        except Exception as exc:  # an executor bug or infrastructure fault: a result, never a crash
            ctx.log.exception("executor_raised", type=definition.type)
            # The side effect may have happened before the raise: only a STRONG action is safe to retry.
            # The exception's text may quote config values (secrets), so only its type is kept.
            retryable = definition.idempotency_for(request.config) is Idempotency.STRONG
            return ActionResult.fail(
                f"{definition.type} raised {type(exc).__name__} (details in the engine log)",
                retryable=retryable, code="error")

    def _limit(self, action_type: str) -> asyncio.Semaphore:
        if action_type not in self._limits:
            self._limits[action_type] = asyncio.Semaphore(self._per_type_limit)
        return self._limits[action_type]

    def _duration_of(self, action_type: str) -> Any:
        histogram = self._durations.get(action_type)
        if histogram is None:
            histogram = self._durations[action_type] = self._metrics.action_duration.labels(action_type)
        return histogram

    def _on_audit(self, definition: ActionDefinition) -> Callable[[str, Mapping[str, Any]], None]:
        def count(phase: str, details: Mapping[str, Any]) -> None:
            # A step that cannot be undone is audited as such, but no compensation ran.
            if phase == "COMPENSATE" and details.get("status") != "not_compensable":
                self._metrics.action_compensation.labels(definition.type).inc()

        return count

    def _count(self, outcome: DispatchOutcome) -> DispatchOutcome:
        key = (outcome.executor_type, outcome.status)
        counter = self._dispatched.get(key)
        if counter is None:
            counter = self._dispatched[key] = self._metrics.action_dispatched.labels(*key)
        counter.inc()
        if outcome.status == "DEAD":
            self._metrics.action_dead_letter.labels("compensation_failed").inc()
        return outcome


def _actions_within(definition: ActionDefinition, config: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The action itself and every action nested in it (a composite's steps, recursively)."""
    found: list[tuple[str, Mapping[str, Any]]] = [(definition.type, config)]
    for nested, nested_config in definition.nested_actions(config):
        found.extend(_actions_within(nested, nested_config))
    return found


_HIDDEN = "(hidden: the field holds a secret)"


def _masked(error: FieldError) -> FieldError:
    """The error without its value when a segment of its path names a secret-like field."""
    segments = [part for part in re.split(r"[.\[\]]", error.field) if part]
    if any(mask_secrets({part: ""}) != {part: ""} for part in segments):
        return FieldError(error.field, "***", _HIDDEN)
    return error


def _status_of(result: ActionResult) -> tuple[str, str | None]:
    if result.succeeded:
        return "SUCCEEDED", None
    if result.data.get("dead"):
        return "DEAD", "compensation_failed"
    if result.data.get("rolled_back"):
        return "ROLLED_BACK", "rolled_back"
    return "FAILED", result.code or "error"


class _Trail:
    """The audit records of one dispatch, in order."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.records: list[AuditRecord] = []

    def add(self, phase: str, **details: Any) -> None:
        self.records.append(AuditRecord(phase, details, self._clock.now()))

    def sink(self, on_phase: Callable[[str, Mapping[str, Any]], None]) -> AuditSink:
        async def audit(phase: str, details: Mapping[str, Any]) -> None:
            on_phase(phase, details)
            self.add(phase, **masked(dict(details)))

        return audit

    def outcome(
        self,
        status: str,
        reason: str | None,
        result: ActionResult,
        executor_type: str,
        duration_s: float = 0.0,
    ) -> DispatchOutcome:
        return DispatchOutcome(
            status=status,
            reason=reason,
            result=result,
            executor_type=executor_type,
            audit=tuple(self.records),
            duration_s=duration_s,
        )
