"""Parsing an automation payload (create / update, HTTP body or bus command alike) into a spec.

Every error at once, each naming its field from the body root and the value, with what would be
valid. Pure but for the action registry (a type's config schema) and the clock (has a schedule
already ended?).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from actwheel.actions.registry import ActionRegistry
from actwheel.actions.valid_configs import ValidConfigs
from actwheel.clock import Clock
from actwheel.errors import FieldError, InvalidInput, InvalidTrigger
from actwheel.policy import Policy
from actwheel.storage.records import Automation
from actwheel.triggers import Trigger, parse

__all__ = ["AutomationSpec", "SpecParser", "as_payload", "cursor_on_enable", "first_fire", "merged_payload",
           "trigger_errors", "trigger_field"]

_FIELDS = {"name", "trigger", "action", "action_type", "action_config", "policy", "labels", "enabled",
           "durable"}
_MAX_NAME = 200


@dataclass(frozen=True, slots=True)
class AutomationSpec:
    """A valid automation payload, parsed: what a create stores and an update replaces."""

    name: str
    trigger: Trigger
    trigger_spec: dict[str, Any]
    action_type: str
    action_config: dict[str, Any]
    policy: Policy
    labels: dict[str, Any]
    enabled: bool
    durable: bool
    #: ``(when parsed, the first fire after it)`` if the parse computed it (the has-it-ended check).
    fire_after_parse: tuple[datetime, datetime | None] | None = None

    @property
    def end_at(self) -> datetime | None:
        return self.trigger.end

    def first_fire(self, now: datetime) -> datetime | None:
        """:func:`first_fire` at ``now``, reusing the parse's when it still answers (the first fire after
        the parse is also the first after a later ``now`` if it is still ahead of it)."""
        if self.fire_after_parse is not None:
            parsed_at, fire = self.fire_after_parse
            if parsed_at <= now and fire is not None and fire > now:
                return fire
        return first_fire(self.trigger, now)


class SpecParser:
    """Payload → :class:`AutomationSpec`, validating the action config against the registry."""

    def __init__(self, registry: ActionRegistry, clock: Clock) -> None:
        self._registry = registry
        self._clock = clock
        self._valid_configs = ValidConfigs()  # a batch of creates often repeats one config

    def parse(self, payload: Mapping[str, Any], *, check_ended: bool = True) -> AutomationSpec:
        """:raises InvalidInput: listing every bad field with its value"""
        if not isinstance(payload, Mapping):
            raise InvalidInput("body", payload, "a JSON object")
        errors: list[FieldError] = [FieldError(k, payload[k], "one of the fields " + ", ".join(sorted(_FIELDS)))
                                    for k in sorted(set(payload) - _FIELDS)]
        durable = _parse_durable(payload.get("durable", True), errors)
        trigger = _parse_trigger(payload.get("trigger"), errors)
        fire_after: tuple[datetime, datetime | None] | None = None
        if check_ended and trigger is not None and not trigger.is_event:
            parsed_at = self._clock.now()
            fire_after = (parsed_at, trigger.next_after(parsed_at))
        if fire_after is not None and fire_after[1] is None:
            errors.append(FieldError("trigger", payload.get("trigger"), "a schedule with a fire still to come "
                                     "(this one has ended: a 'once' in the past, or an end before now)"))
        action_type, action_config = self._parse_action(payload, errors)
        policy = _parse_policy(payload.get("policy"), errors)
        labels = _parse_labels(payload.get("labels", {}), errors)
        name = _parse_name(payload.get("name") or f"{action_type} automation", errors)
        enabled = payload.get("enabled", True)
        if not isinstance(enabled, bool):
            errors.append(FieldError("enabled", enabled, "true or false"))
        if errors or trigger is None or policy is None:
            raise InvalidInput.collect(errors or [FieldError("trigger", None, "a trigger spec")])
        return AutomationSpec(name, trigger, trigger.to_spec(), action_type, action_config, policy, labels,
                              bool(enabled), durable, fire_after)

    def action_scopes(self, action_type: str, action_config: Mapping[str, Any]) -> frozenset[str]:
        """The scopes running this action needs (a composite's steps included).

        :raises InvalidInput: ``action_type`` is not registered
        """
        return self._registry.get(action_type).required_scopes_for(action_config)

    def _parse_action(self, payload: Mapping[str, Any], errors: list[FieldError]) -> tuple[str, dict[str, Any]]:
        action = payload.get("action")
        if action is None:
            action = {"type": payload.get("action_type"), "config": payload.get("action_config", {})}
        if not isinstance(action, Mapping):
            errors.append(FieldError("action", action, "an object {type, config}"))
            return "", {}
        kind = action.get("type") or action.get("executor_type")
        config = action.get("config", action.get("parameters", {}))
        if not isinstance(kind, str) or not kind:
            errors.append(FieldError("action.type", kind, "an action type, e.g. 'simple.op' (GET /v1/actions/types)"))
            return "", dict(config) if isinstance(config, Mapping) else {}
        if not isinstance(config, Mapping):
            errors.append(FieldError("action.config", config, "an object"))
            return str(kind), {}
        try:
            definition = self._registry.get(kind)
        except InvalidInput as exc:
            errors.extend(FieldError(f"action.{e.field}", e.value, e.expected) for e in exc.errors)
            return str(kind), dict(config)
        errors.extend(FieldError(f"action.config.{e.field}".rstrip("."), e.value, e.expected)
                      for e in self._valid_configs.errors(definition, config))
        return definition.type, dict(config)


def as_payload(automation: Automation, *, flat: bool = False) -> dict[str, Any]:
    """The stored automation as a create payload; ``flat`` uses action_type/action_config like the update."""
    action: dict[str, Any] = (
        {"action_type": automation.action_type, "action_config": automation.action_config} if flat
        else {"action": {"type": automation.action_type, "config": automation.action_config}})
    return {"name": automation.name, "trigger": automation.trigger, **action, "policy": automation.policy,
            "labels": automation.labels}


def merged_payload(current: Automation, changes: Mapping[str, Any]) -> dict[str, Any]:
    """An update's payload: the current automation with ``changes`` over it (in the update's flat action
    shape when the changes name ``action_type`` / ``action_config``)."""
    flat = "action_type" in changes or "action_config" in changes
    return {**as_payload(current, flat=flat), **changes}


def first_fire(trigger: Trigger, now: datetime) -> datetime | None:
    """The cursor of a new (or re-triggered, or re-enabled past-due) automation."""
    return trigger.next_after(now)


def cursor_on_enable(automation: Automation, now: datetime) -> datetime | None:
    """The cursor an automation gets when enabled: a past one (it was off while instants went by) is
    recomputed from now, so enabling never fires a backlog; a future or absent one stays."""
    if automation.next_run_at is None or automation.next_run_at >= now:
        return automation.next_run_at
    return first_fire(parse(automation.trigger), now)


def trigger_field(field: str) -> str:
    """A trigger error's field named from the body root (``trigger.expression.seconds``)."""
    return field if field == "trigger" or field.startswith("trigger.") else f"trigger.{field}"


def trigger_errors(exc: InvalidTrigger) -> InvalidInput:
    """A trigger's own errors renamed from the body root, as every face reports them."""
    return InvalidInput.collect([FieldError(trigger_field(e.field), e.value, e.expected) for e in exc.errors])


def _parse_durable(raw: Any, errors: list[FieldError]) -> bool:
    if not isinstance(raw, bool):
        errors.append(FieldError("durable", raw, "true (stored, the default) or false (held in memory by "
                                 "this instance only, lost when it stops)"))
    return raw is not False


def _parse_trigger(raw: Any, errors: list[FieldError]) -> Trigger | None:
    try:
        return parse(raw)
    except InvalidTrigger as exc:
        errors.extend(trigger_errors(exc).errors)
        return None


def _parse_name(raw: Any, errors: list[FieldError]) -> str:
    if not isinstance(raw, str) or len(raw) > _MAX_NAME:
        errors.append(FieldError("name", raw, f"a string of at most {_MAX_NAME} characters"))
    return str(raw)


def _parse_policy(raw: Any, errors: list[FieldError]) -> Policy | None:
    try:
        return Policy.parse(raw)
    except InvalidInput as exc:
        errors.extend(exc.errors)
        return None


def _parse_labels(raw: Any, errors: list[FieldError]) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        errors.append(FieldError("labels", raw, "an object with session_id, agent_id and free tags"))
        return {}
    for key in ("session_id", "agent_id"):
        if key in raw and not isinstance(raw[key], str):
            errors.append(FieldError(f"labels.{key}", raw[key], "a string"))
    return dict(raw)
