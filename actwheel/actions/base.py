"""The action port: what an action type declares, what it is given, what it returns.

An :class:`ActionDefinition` is one action type (``ontology.create_object``,
``webhook.call``...). The dispatch pipeline resolves it through an
:class:`~actwheel.actions.registry.ActionRegistry`, checks scopes, calls
:meth:`~ActionDefinition.validate`, then :meth:`~ActionDefinition.execute` with
an :class:`ActionContext`, and stores the :class:`ActionResult` it gets back.

Executors never write run status: they return a result and the pipeline moves
the state machine (docs/design.md invariant 10).
"""

from __future__ import annotations

import asyncio
import enum
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar, Literal

import structlog

from actwheel.actions.ontology_port import OntologyGateway
from actwheel.actions.schema import schema_errors
from actwheel.actions.secrets import NoSecrets, SecretResolver
from actwheel.clock import Clock, SystemClock
from actwheel.errors import FieldError, InvalidAction, NotAvailable, Unsupported

__all__ = [
    "ActionContext",
    "ActionDefinition",
    "ActionResult",
    "AuditSink",
    "Capabilities",
    "Idempotency",
    "Publisher",
    "StepEvent",
    "StepEventSink",
    "execute_with_deadline",
    "schema_errors",
]


class Idempotency(enum.Enum):
    """How safe it is to execute an action again after a crash (docs/design.md invariant 7).

    ``STRONG``: executing twice has the effect of once. ``BEST_EFFORT``: a retry is
    safe only when :meth:`ActionDefinition.confirm` says no side effect happened.
    ``NONE``: never retried automatically.
    """

    STRONG = "STRONG"
    BEST_EFFORT = "BEST_EFFORT"
    NONE = "NONE"

    @property
    def rank(self) -> int:
        """Strength for comparisons: NONE 0 < BEST_EFFORT 1 < STRONG 2."""
        return {"NONE": 0, "BEST_EFFORT": 1, "STRONG": 2}[self.value]


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    """What an action type can do besides execute."""

    compensable: bool = False
    dry_run: bool = False
    timeout_control: bool = False
    parallel_safe: bool = False

    def as_dict(self) -> dict[str, bool]:
        return {
            "compensable": self.compensable,
            "dry_run": self.dry_run,
            "timeout_control": self.timeout_control,
            "parallel_safe": self.parallel_safe,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ActionResult:
    """The standard outcome of execute, compensate or dry run.

    :ivar status: ``succeeded`` or ``failed``
    :ivar summary: one human line
    :ivar data: JSON-able details (ids created, response status...)
    :ivar retryable: for failures, whether trying again may succeed
    :ivar error: the error text of a failure
    :ivar code: a machine-readable failure kind (``conflict``, ``timeout``, ``dead``...)
    """

    status: Literal["succeeded", "failed"]
    summary: str
    data: dict[str, Any] = field(default_factory=dict)
    retryable: bool = False
    error: str | None = None
    code: str | None = None

    @classmethod
    def ok(cls, summary: str, data: Mapping[str, Any] | None = None) -> ActionResult:
        return cls(status="succeeded", summary=summary, data=dict(data or {}))

    @classmethod
    def fail(
        cls,
        summary: str,
        *,
        retryable: bool,
        error: str | None = None,
        data: Mapping[str, Any] | None = None,
        code: str | None = None,
    ) -> ActionResult:
        return cls(
            status="failed",
            summary=summary,
            data=dict(data or {}),
            retryable=retryable,
            error=error if error is not None else summary,
            code=code,
        )

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "summary": self.summary,
            "data": self.data,
            "retryable": self.retryable,
            "error": self.error,
            "code": self.code,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class StepEvent:
    """A composite step changed state; maps 1:1 onto ``messages.StepProgressed``.

    :ivar state: ``waiting``, ``in_progress``, ``completed``, ``failed``, ``skipped``,
        ``compensating``, ``compensated`` or ``compensation_failed``
    """

    run_id: str
    step: str
    state: str
    detail: dict[str, Any] = field(default_factory=dict)


StepEventSink = Callable[[StepEvent], Awaitable[None]]
AuditSink = Callable[[str, Mapping[str, Any]], Awaitable[None]]
Publisher = Callable[[str, Mapping[str, Any]], Awaitable[None]]


async def _ignore_step_event(event: StepEvent) -> None:
    return None


async def _ignore_audit(phase: str, details: Mapping[str, Any]) -> None:
    return None


class _RunLog:
    """The run's logger, bound to its id on first use: most runs never log, and binding a structlog
    logger for each one cost ~50 µs of a run's CPU (bench/e2e.py, sustained)."""

    __slots__ = ("_logger", "_run_id")

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id
        self._logger: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._logger is None:
            self._logger = structlog.get_logger("actwheel.actions").bind(run_id=self._run_id)
        return getattr(self._logger, name)

    def __repr__(self) -> str:
        return f"<run log {self._run_id}>"


@dataclass(frozen=True, kw_only=True)
class ActionContext:
    """Everything an executor may use; built by the pipeline for one attempt of one run.

    ``idempotency_key`` defaults to ``run:<run_id>``; composite steps get
    ``<parent key>/<step name>``. ``ontology`` and ``publish`` are ``None`` when the
    host has no ontology store or bus. Secret values are only reachable through
    ``secrets`` and never appear in the repr.
    """

    run_id: str
    owner_id: str
    automation_id: str | None = None
    scopes: frozenset[str] = frozenset()
    attempt: int = 1
    idempotency_key: str = ""
    variables: Mapping[str, Any] = field(default_factory=dict)
    steps: Mapping[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    deadline: datetime | None = None
    clock: Clock = field(default_factory=SystemClock, repr=False)
    secrets: SecretResolver = field(default_factory=NoSecrets, repr=False)
    ontology: OntologyGateway | None = field(default=None, repr=False)
    publish: Publisher | None = field(default=None, repr=False)
    emit_step_event: StepEventSink = field(default=_ignore_step_event, repr=False)
    audit: AuditSink = field(default=_ignore_audit, repr=False)
    log: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.idempotency_key:
            object.__setattr__(self, "idempotency_key", f"run:{self.run_id}")
        if self.log is None:
            object.__setattr__(self, "log", _RunLog(self.run_id))

    def remaining(self) -> float | None:
        """Seconds left before the timeout or deadline, whichever is sooner; ``None`` = unbounded."""
        left = [self.timeout] if self.timeout is not None else []
        if self.deadline is not None:
            left.append((self.deadline - self.clock.now()).total_seconds())
        return max(0.0, min(left)) if left else None

    def for_step(
        self, name: str, *, steps: Mapping[str, Any], variables: Mapping[str, Any], timeout: float | None
    ) -> ActionContext:
        """The context a composite step runs with: its own key, the steps so far, its timeout."""
        own = self.remaining()
        bounded = timeout if own is None else (own if timeout is None else min(own, timeout))
        return replace(
            self,
            idempotency_key=f"{self.idempotency_key}/{name}",
            steps=steps,
            variables=variables,
            timeout=bounded,
            log=self.log.bind(step=name),
        )

    def expression_names(self) -> dict[str, Any]:
        """Names visible to expressions and templates: the variables, ``vars``, ``steps``, ``run``."""
        names: dict[str, Any] = dict(self.variables)
        names.update(
            vars=dict(self.variables),
            steps=dict(self.steps),
            run={"id": self.run_id, "automation_id": self.automation_id, "attempt": self.attempt},
        )
        return names


class ActionDefinition(ABC):
    """One action type. Subclasses set the class attributes and implement :meth:`execute`.

    Contract for executors:

    - :meth:`execute` returns an :class:`ActionResult`; expected failures (a
      conflict, a 4xx, an assertion) are *results*, not exceptions. An exception
      escaping means a bug or an infrastructure fault; the pipeline records it.
    - An executor never writes run status and never reads secrets outside
      :meth:`execute` / :meth:`compensate`.
    - :meth:`dry_run` changes nothing and says what would happen.
    """

    type: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    display_name: ClassVar[str]
    description: ClassVar[str]
    config_schema: ClassVar[dict[str, Any]]
    idempotency: ClassVar[Idempotency] = Idempotency.NONE
    required_scopes: ClassVar[frozenset[str]] = frozenset()
    capabilities: ClassVar[Capabilities] = Capabilities()

    def validate(self, config: Mapping[str, Any]) -> list[FieldError]:
        """Every problem with ``config`` at once (JSON Schema, then :meth:`check`); empty = valid."""
        errors = schema_errors(self.schema(), config)
        return errors or self.check(config)

    def schema(self) -> dict[str, Any]:
        """The config's JSON Schema (default: the class's ``config_schema``)."""
        return self.config_schema

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        """Checks beyond the schema (expressions parse, names exist); runs on schema-valid configs."""
        return []

    def validate_or_raise(self, config: Mapping[str, Any]) -> None:
        """:raises InvalidAction: listing every error of :meth:`validate`"""
        errors = self.validate(config)
        if errors:
            raise InvalidAction.collect(errors)

    def idempotency_for(self, config: Mapping[str, Any]) -> Idempotency:
        """The idempotency of this particular config (default: the type's static one)."""
        return self.idempotency

    def never_waits(self, config: Mapping[str, Any]) -> bool:
        """True when :meth:`execute` of this config never suspends (no IO, no sleep): a deadline could
        not interrupt it, so :func:`execute_with_deadline` arms none (default: False, a deadline is armed)."""
        return False

    def required_scopes_for(self, config: Mapping[str, Any]) -> frozenset[str]:
        """Scopes this particular config needs (default: the type's static ones)."""
        return self.required_scopes

    def nested_actions(self, config: Mapping[str, Any]) -> list[tuple[ActionDefinition, dict[str, Any]]]:
        """The actions this config will run inside this one (a composite's steps), for permission checks."""
        return []

    def idempotency_key(self, config: Mapping[str, Any]) -> str | None:
        """A natural key for this config's effect (``{type}:...``), or ``None`` to key by run."""
        return None

    @abstractmethod
    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        """Do the action once. ``config`` has passed :meth:`validate`."""

    async def compensate(self, config: Mapping[str, Any], result: ActionResult, ctx: ActionContext) -> ActionResult:
        """Undo the effect recorded in ``result`` (from :meth:`execute` with ``config``).

        :raises Unsupported: the type is not compensable (asking for it is the caller's mistake)
        """
        raise Unsupported("type", self.type, "a compensable action type (capabilities.compensable)")

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        """Say what :meth:`execute` would do; change nothing.

        :raises NotAvailable: the type has no dry run
        """
        raise NotAvailable(f"dry run of {self.type}")

    async def confirm(self, config: Mapping[str, Any], ctx: ActionContext) -> bool | None:
        """After a crash: could the side effect have happened? ``False`` = surely not, ``None`` = unknown."""
        return None

    def describe(self) -> dict[str, Any]:
        """Everything the API publishes about this type."""
        return {
            "type": self.type,
            "aliases": list(self.aliases),
            "display_name": self.display_name,
            "description": self.description,
            "config_schema": self.schema(),
            "idempotency": self.idempotency.value,
            "required_scopes": sorted(self.required_scopes),
            "capabilities": self.capabilities.as_dict(),
        }


async def execute_with_deadline(
    definition: ActionDefinition, config: Mapping[str, Any], ctx: ActionContext
) -> ActionResult:
    """Execute bounded by ``ctx.remaining()``; a timeout becomes a failed result (code ``timeout``).

    A timed-out STRONG action is retryable; others are not, since the side effect may have happened.
    A config that never waits (:meth:`ActionDefinition.never_waits`) runs without a timer: it could not
    be interrupted anyway, and arming and cancelling one costs about 4 µs a run.
    """
    if definition.never_waits(config):  # asyncio cancels only at a suspension: a timer here would do nothing
        return await definition.execute(config, ctx)
    limit = ctx.remaining()
    try:
        async with asyncio.timeout(limit):
            return await definition.execute(config, ctx)
    except TimeoutError:
        retryable = definition.idempotency_for(config) is Idempotency.STRONG
        return ActionResult.fail(f"{definition.type} timed out after {limit}s", retryable=retryable, code="timeout")
