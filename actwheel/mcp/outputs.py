"""The structured outputs of the MCP tools (each tool publishes the JSON schema of its model).

Engine internals stay out: no lease owner, lease expiry or epoch, no dedupe key, no owner snapshot
from a run's context.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from actwheel.actions.base import ActionDefinition
from actwheel.mcp.rules import offset_of, run_flags
from actwheel.storage.records import AuditEntry, Automation, Run
from actwheel.triggers import Fire

__all__ = [
    "ActionTypeOut",
    "ActionTypesOut",
    "AuditOut",
    "AutomationDetailOut",
    "AutomationOut",
    "AutomationsOut",
    "ChangedOut",
    "DisabledOut",
    "FireOut",
    "PreviewOut",
    "RunDetailOut",
    "RunNowOut",
    "RunOut",
    "RunsOut",
    "action_type_out",
    "audit_out",
    "automation_out",
    "fires_out",
    "run_out",
]


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


class FireOut(BaseModel):
    at: str = Field(description="ISO-8601 instant with the trigger zone's offset")
    offset: str = Field(description="the UTC offset of that fire, e.g. +08:00")
    note: str | None = Field(None, description="why a DST rule or a holiday moved this fire, if it did")


class PreviewOut(BaseModel):
    fires: list[FireOut]
    timezone: str | None = Field(description="the IANA zone the trigger names")
    summary: str = Field(description="the server-written sentence to show the user")
    preview_digest: str = Field(description="pass to create_automation / update_automation with exactly this trigger")


class ActionTypeOut(BaseModel):
    type: str
    aliases: list[str]
    display_name: str
    description: str = Field(description="what the action does, for agents")
    config_schema: dict[str, Any]
    idempotency: str = Field(description="STRONG, BEST_EFFORT or NONE: whether a crashed run can be retried safely")
    required_scopes: list[str]


class ActionTypesOut(BaseModel):
    items: list[ActionTypeOut]


class AutomationOut(BaseModel):
    id: str
    name: str
    owner_id: str
    trigger: dict[str, Any]
    action_type: str
    action_config: dict[str, Any]
    policy: dict[str, Any]
    labels: dict[str, Any]
    enabled: bool
    status: str
    next_run_at: str | None
    version: int = Field(description="pass to update_automation (optimistic locking)")
    created_at: str
    updated_at: str


class AutomationsOut(BaseModel):
    items: list[AutomationOut]
    next_after_id: str | None = Field(description="pass as after_id for the next page; null on the last one")


class AutomationDetailOut(BaseModel):
    automation: AutomationOut
    next_fires: list[FireOut] = Field(description="the next 3 fires (none while disabled or for event triggers)")
    owner_id: str
    owner_status: str = Field(description="ACTIVE, PAUSED or COMPLETED, and whether it is enabled")
    summary: str


class ChangedOut(BaseModel):
    automation: AutomationOut
    summary: str = Field(description="the server-written sentence to show the user")


class DisabledOut(BaseModel):
    automation: AutomationOut
    canceled_run_ids: list[str]
    summary: str


class RunOut(BaseModel):
    id: str
    automation_id: str | None
    origin: str
    status: str
    reason: str | None
    attempt: int
    action_type: str
    scheduled_for: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    result: Any = None
    error: Any = None
    duplicate_risk: bool = Field(description="true for UNKNOWN: the action may have happened already")
    retry_allowed: bool = Field(description="false for UNKNOWN: never run it again without the user")
    note: str | None = Field(description="a sentence to tell the user, when there is one")


class RunsOut(BaseModel):
    items: list[RunOut]


class AuditOut(BaseModel):
    phase: str
    actor: str
    occurred_at: str
    details: dict[str, Any]


class RunDetailOut(BaseModel):
    run: RunOut
    audit: list[AuditOut] = Field(description="the run's audit trail, oldest first, condensed")


class RunNowOut(BaseModel):
    status: Literal["started", "confirmation_required", "declined", "cancelled"]
    summary: str = Field(description="the server-written sentence the user confirmed or must confirm")
    confirmation_token: str | None = None
    expires_at: str | None = None
    run_id: str | None = None
    run: RunOut | None = None
    warning: str | None = Field(None, description="set when the last run is UNKNOWN: running again may duplicate it")

    @model_serializer(mode="wrap")
    def _only_what_is_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Each answer carries its own keys (``confirmation_required``: the token and its expiry;
        ``started``: the run), not the other answers' keys as nulls."""
        return {k: v for k, v in handler(self).items() if v is not None}


def fires_out(fires: Sequence[Fire]) -> list[FireOut]:
    return [FireOut(at=f.at.isoformat(), offset=offset_of(f.at), note=f.note) for f in fires]


def action_type_out(definition: ActionDefinition) -> ActionTypeOut:
    d = definition.describe()
    return ActionTypeOut(type=d["type"], aliases=d["aliases"], display_name=d["display_name"],
                         description=d["description"], config_schema=d["config_schema"],
                         idempotency=d["idempotency"], required_scopes=d["required_scopes"])


def automation_out(a: Automation) -> AutomationOut:
    return AutomationOut(id=a.id, name=a.name, owner_id=a.owner_id, trigger=a.trigger, action_type=a.action_type,
                         action_config=a.action_config, policy=a.policy, labels=a.labels, enabled=a.enabled,
                         status=a.status.value, next_run_at=_iso(a.next_run_at), version=a.version,
                         created_at=a.created_at.isoformat(), updated_at=a.updated_at.isoformat())


def run_out(r: Run) -> RunOut:
    duplicate_risk, retry_allowed, note = run_flags(r.status)
    return RunOut(id=r.id, automation_id=r.automation_id, origin=r.origin.value, status=r.status.value,
                  reason=r.reason, attempt=r.attempt, action_type=r.action_type,
                  scheduled_for=_iso(r.scheduled_for), created_at=r.created_at.isoformat(),
                  started_at=_iso(r.started_at), finished_at=_iso(r.finished_at), result=r.result, error=r.error,
                  duplicate_risk=duplicate_risk, retry_allowed=retry_allowed, note=note)


#: Audit detail fields worth an agent's tokens; the rest (epochs, lease owners, ids) stays out.
_AUDIT_FIELDS = ("status", "reason", "error", "attempt", "outcome", "message", "code")


def audit_out(e: AuditEntry) -> AuditOut:
    details = {k: v for k, v in e.details.items() if k in _AUDIT_FIELDS}
    return AuditOut(phase=e.phase, actor=e.actor, occurred_at=e.occurred_at.isoformat(), details=details)
