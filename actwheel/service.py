"""The application layer: what the API, bus commands and agents may do to automations.

Input is validated where it enters (every error at once, each naming its field
and value); each change commits with its outbox event in one transaction.

``durable: false`` automations go to this instance's :class:`TransientRegistry`
instead of the ``automations`` table (only where a wheel ticker runs to fire
them); every method here takes their ids as well. They announce no
``automation.*`` events (nothing outside this process could act on them), but
disabling or deleting one cancels its PENDING runs like a stored one's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from actwheel.actions.registry import ActionRegistry
from actwheel.clock import Clock
from actwheel.errors import FieldError, InvalidInput, InvalidTrigger, NotAvailable
from actwheel.events import EventFactory
from actwheel.messages import ActionRequested
from actwheel.policy import Policy
from actwheel.run_context import (
    CANCELED_DELETED,
    CANCELED_DISABLED,
    DRY_RUN_KEY,
    OWNER_KEY,
    owner_snapshot,
)
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import (
    Automation,
    AutomationChanges,
    AutomationStatus,
    Deleted,
    InsertedRun,
    NewAutomation,
    NewRun,
    Origin,
    Run,
    RunStatus,
)
from actwheel.transient import TransientRegistry
from actwheel.triggers import Trigger, parse

__all__ = ["AutomationService", "Caller", "caller_snapshot", "cancel_transient_runs"]

_RESERVED_PREFIXES = ("automation.", "run.", "action.", "command.", "cdc.")
_CANCELABLE = [RunStatus.PENDING, RunStatus.RETRY_WAIT]
#: The filters of :meth:`AutomationService.query` that transient automations answer too.
_TRANSIENT_FILTERS = {"owner_id", "session_id", "agent_id", "status", "enabled", "after_id", "limit"}
_FIELDS = {"name", "trigger", "action", "action_type", "action_config", "policy", "labels", "enabled",
           "durable"}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks: the owner of what gets created, and the scopes they hold."""

    owner_id: str
    scopes: frozenset[str] = frozenset({"*"})


def caller_snapshot(caller: Caller) -> dict[str, Any]:
    """The run-context owner snapshot of a run ``caller`` asked for."""
    return owner_snapshot(caller.owner_id, caller.scopes)


@dataclass(frozen=True, slots=True)
class _Spec:
    name: str
    trigger: Trigger
    trigger_spec: dict[str, Any]
    action_type: str
    action_config: dict[str, Any]
    policy: Policy
    labels: dict[str, Any]
    enabled: bool
    durable: bool


class AutomationService:
    def __init__(self, *, store: Store, registry: ActionRegistry, events: EventFactory, clock: Clock,
                 transients: TransientRegistry | None = None) -> None:
        """``transients``: where ``durable: false`` automations live; ``None`` (no ticker here) refuses them."""
        self._store = store
        self._registry = registry
        self._events = events
        self._clock = clock
        self._transients = transients

    # --- automations ------------------------------------------------------------------

    async def create(self, caller: Caller, payload: Mapping[str, Any]) -> Automation:
        """Validate and store a new automation with its first ``next_run_at``.

        :raises InvalidInput: listing every bad field with its value; naming ``durable`` when
            ``durable: false`` is asked of an instance without a ticker, or of a full registry
        :raises NotAvailable: ``durable: false`` with an event trigger
        """
        spec = self._parse(payload)
        if not spec.durable:
            return self._create_transient(caller, spec)
        async with self._store.transaction() as tx:
            now = await tx.now()
            automation = await tx.automations.create(NewAutomation(
                owner_id=caller.owner_id, name=spec.name, trigger=spec.trigger_spec,
                action_type=spec.action_type, action_config=spec.action_config,
                policy=spec.policy.to_dict(), labels=spec.labels, enabled=spec.enabled,
                next_run_at=_first_fire(spec.trigger, now), end_at=_end_of(spec.trigger_spec)))
            await tx.outbox.append(self._events.automation_changed(automation, "created"))
        return automation

    async def get(self, automation_id: str) -> Automation:
        transient = self._transient(automation_id)
        if transient is not None:
            return transient
        async with self._store.transaction() as tx:
            return await tx.automations.get(automation_id)

    async def query(self, **filters: Any) -> list[Automation]:
        """Stored automations and this instance's transient ones, ordered by id (page with ``after_id``)."""
        async with self._store.transaction() as tx:
            stored = await tx.automations.query(**filters)
        if self._transients is None or len(self._transients) == 0 or filters.get("due_before") is not None \
                or filters.get("partitions") is not None:
            return stored
        limit = filters.get("limit", 100)
        transient = self._transients.query(**{k: v for k, v in filters.items() if k in _TRANSIENT_FILTERS})
        return sorted([*stored, *transient], key=lambda a: a.id)[:limit]

    async def update(self, automation_id: str, payload: Mapping[str, Any], expected_version: int) -> Automation:
        """Replace the fields in ``payload``; a new trigger recomputes ``next_run_at`` from now.

        :raises Conflict: ``expected_version`` is stale
        """
        if "enabled" in payload:
            raise InvalidInput("enabled", payload["enabled"],
                               "no 'enabled' in an update: POST /v1/automations/{id}/enable or /disable")
        if self._transient(automation_id) is not None:
            return await self._update_transient(automation_id, payload, expected_version)
        if payload.get("durable", True) is not True:
            raise InvalidInput("durable", payload["durable"], "true: an automation stays durable or not as created")
        async with self._store.transaction() as tx:
            current = await tx.automations.get(automation_id)
            merged = {**_as_payload(current, flat=("action_type" in payload or "action_config" in payload)),
                      **payload}
            spec = self._parse(merged, check_ended="trigger" in payload)
            changes = await self._changes(tx, current, spec, trigger_changed="trigger" in payload)
            updated = await tx.automations.update(automation_id, expected_version, changes)
            await tx.outbox.append(self._events.automation_changed(updated, "updated"))
        return updated

    async def set_enabled(self, automation_id: str, enabled: bool,
                          expected_version: int | None = None) -> tuple[Automation, list[str]]:
        """Enable (recomputing a past ``next_run_at`` from now) or disable (canceling PENDING runs)."""
        if self._transient(automation_id) is not None:
            return await self._set_transient_enabled(automation_id, enabled, expected_version)
        async with self._store.transaction() as tx:
            automation, canceled = await tx.automations.set_enabled(
                automation_id, enabled, expected_version=expected_version)
            if enabled:
                automation = await self._refresh_cursor(tx, automation)
            await tx.outbox.append(self._events.automation_changed(
                automation, "enabled" if enabled else "disabled"))
            await tx.outbox.append_many(self._events.runs_canceled(canceled, automation.id, CANCELED_DISABLED))
        return automation, canceled

    async def delete(self, automation_id: str) -> Deleted:
        if self._transient(automation_id) is not None:
            return await self._delete_transients(lambda registry: [registry.get(automation_id).id])
        async with self._store.transaction() as tx:
            deleted = await tx.automations.delete(automation_id)
            await self._announce_deleted(tx, deleted)
        return deleted

    async def delete_by(self, *, session_id: str | None = None, agent_id: str | None = None) -> Deleted:
        """Cascade-delete by session or agent label; their pending runs are canceled, history kept."""
        if (session_id is None) == (agent_id is None):
            raise InvalidInput("session_id", session_id, "exactly one of session_id or agent_id")
        async with self._store.transaction() as tx:
            if session_id is not None:
                deleted = await tx.automations.delete_by_session(session_id)
            else:
                deleted = await tx.automations.delete_by_agent(str(agent_id))
            await self._announce_deleted(tx, deleted)
        if self._transients is not None:
            gone = await self._delete_transients(lambda registry: [a.id for a in registry.query(
                session_id=session_id, agent_id=agent_id, limit=max(1, len(registry)))])
            deleted = Deleted(automation_ids=deleted.automation_ids + gone.automation_ids,
                              canceled_run_ids=deleted.canceled_run_ids + gone.canceled_run_ids)
        return deleted

    async def run_now(self, caller: Caller, automation_id: str) -> Run:
        """A manual run of the automation's current action (dedupe key ``manual:<id>``)."""
        transient = self._transient(automation_id)
        async with self._store.transaction() as tx:
            automation = transient or await tx.automations.get(automation_id)
            now = await tx.now()
            inserted = await tx.runs.insert(NewRun(
                automation_id=automation.id, dedupe_key=f"manual:{uuid.uuid4().hex}",
                owner_id=automation.owner_id, action_type=automation.action_type,
                action_config=automation.action_config, policy=automation.policy, origin=Origin.MANUAL,
                scheduled_for=now, context={OWNER_KEY: caller_snapshot(caller)}))
            await tx.outbox.append_many(self._events.runs_ready([inserted.run.id]))
        return inserted.run

    # --- ad hoc action requests ----------------------------------------------------------

    async def submit_action(self, caller: Caller, request: ActionRequested) -> InsertedRun:
        """Insert a run for an ad hoc request; a repeated idempotency key returns the first run."""
        async with self._store.transaction() as tx:
            inserted = await self.insert_request(tx, caller, request)
            if inserted.created:
                await tx.outbox.append_many(self._events.runs_ready([inserted.run.id]))
        return inserted

    async def insert_request(self, tx: Transaction, caller: Caller, request: ActionRequested) -> InsertedRun:
        key = request.idempotency_key or uuid.uuid4().hex
        context = {**request.context, OWNER_KEY: caller_snapshot(caller)}
        if request.dry_run:
            context[DRY_RUN_KEY] = True
        return await tx.runs.insert(NewRun(
            automation_id=None, dedupe_key=f"request:{caller.owner_id}:{key}", owner_id=caller.owner_id,
            action_type=request.type, action_config=dict(request.config), origin=Origin.REQUEST,
            scheduled_for=await tx.now(), context=context))

    # --- transient (durable: false) automations --------------------------------------------

    def _transient(self, automation_id: str) -> Automation | None:
        return self._transients.find(automation_id) if self._transients is not None else None

    def _create_transient(self, caller: Caller, spec: _Spec) -> Automation:
        if self._transients is None:
            raise InvalidInput("durable", False, "true: this instance runs no wheel ticker (--actors), so a "
                               "non-durable automation accepted here would never fire")
        _refuse_transient_event(spec)
        now = self._clock.now()
        return self._transients.add(Automation(
            id=self._transients.new_id(), owner_id=caller.owner_id, name=spec.name, trigger=spec.trigger_spec,
            action_type=spec.action_type, action_config=spec.action_config, policy=spec.policy.to_dict(),
            labels=spec.labels, enabled=spec.enabled, status=AutomationStatus.ACTIVE, durable=False,
            next_run_at=_first_fire(spec.trigger, now), end_at=_end_of(spec.trigger_spec), version=1,
            partition=-1, created_at=now, updated_at=now))

    async def _update_transient(self, automation_id: str, payload: Mapping[str, Any],
                                expected_version: int) -> Automation:
        if payload.get("durable", False) is not False:
            raise InvalidInput("durable", payload["durable"], "false: an automation stays durable or not as created")
        transients = self._registry_of_transients()
        async with transients.lock:  # not while one of its instants is being fired
            # read under the lock: a fire that held it moved the cursor (without a new version) or ended it
            current = transients.check_version(automation_id, expected_version)
            merged = {**_as_payload(current, flat=("action_type" in payload or "action_config" in payload)),
                      **payload, "durable": False}
            spec = self._parse(merged, check_ended="trigger" in payload)
            _refuse_transient_event(spec)
            next_run_at = _first_fire(spec.trigger, self._clock.now()) if "trigger" in payload else current.next_run_at
            return transients.change(
                current.id, expected_version, name=spec.name, trigger=spec.trigger_spec, action_type=spec.action_type,
                action_config=spec.action_config, policy=spec.policy.to_dict(), labels=spec.labels,
                next_run_at=next_run_at, end_at=_end_of(spec.trigger_spec))

    async def _set_transient_enabled(self, automation_id: str, enabled: bool,
                                     expected_version: int | None) -> tuple[Automation, list[str]]:
        transients = self._registry_of_transients()
        async with transients.lock:  # a disable never misses a run being inserted for it
            current = transients.check_version(automation_id, expected_version)
            canceled: list[str] = []
            next_run_at = current.next_run_at
            if enabled and next_run_at is not None and next_run_at < self._clock.now():
                next_run_at = _first_fire(parse(current.trigger), self._clock.now())
            if not enabled:
                async with self._store.transaction() as tx:
                    canceled = await self._cancel_pending(tx, automation_id, CANCELED_DISABLED)
            status = AutomationStatus.COMPLETED if next_run_at is None else current.status
            updated = transients.change(automation_id, None, enabled=enabled, next_run_at=next_run_at, status=status)
            if status is AutomationStatus.COMPLETED:
                transients.discard(automation_id)  # an ended schedule leaves memory (and frees its place)
        return updated, canceled

    async def _delete_transients(self, select: Callable[[TransientRegistry], list[str]]) -> Deleted:
        """Cancel the PENDING runs of the ones ``select`` picks (committed first: a failure leaves them in
        place), then forget them. Picked under the lock: one that a fire ended meanwhile is not picked."""
        transients = self._registry_of_transients()
        async with transients.lock:
            automation_ids = select(transients)
            canceled: list[str] = []
            if automation_ids:
                async with self._store.transaction() as tx:
                    for automation_id in automation_ids:
                        canceled += await self._cancel_pending(tx, automation_id, CANCELED_DELETED)
            for automation_id in automation_ids:
                transients.discard(automation_id)
        return Deleted(automation_ids=tuple(automation_ids), canceled_run_ids=tuple(canceled))

    async def _cancel_pending(self, tx: Transaction, automation_id: str, reason: str) -> list[str]:
        return await cancel_transient_runs(tx, self._events, automation_id, reason)

    def _registry_of_transients(self) -> TransientRegistry:
        assert self._transients is not None  # only reached for an id found in it
        return self._transients

    # --- helpers ---------------------------------------------------------------------

    def _parse(self, payload: Mapping[str, Any], *, check_ended: bool = True) -> _Spec:
        if not isinstance(payload, Mapping):
            raise InvalidInput("body", payload, "a JSON object")
        errors: list[FieldError] = [FieldError(k, payload[k], "one of the fields " + ", ".join(sorted(_FIELDS)))
                                    for k in sorted(set(payload) - _FIELDS)]
        durable = payload.get("durable", True)
        if not isinstance(durable, bool):
            errors.append(FieldError("durable", durable, "true (stored, the default) or false (held in memory by "
                                     "this instance only, lost when it stops)"))
        trigger, trigger_spec = _parse_trigger(payload.get("trigger"), errors)
        if check_ended and trigger is not None and _has_ended(trigger, self._clock.now()):
            errors.append(FieldError("trigger", payload.get("trigger"), "a schedule with a fire still to come "
                                     "(this one has ended: a 'once' in the past, or an end before now)"))
        action_type, action_config = self._parse_action(payload, errors)
        policy = _parse_policy(payload.get("policy"), errors)
        labels = _parse_labels(payload.get("labels", {}), errors)
        name = payload.get("name") or f"{action_type} automation"
        if not isinstance(name, str) or len(name) > 200:
            errors.append(FieldError("name", name, "a string of at most 200 characters"))
        enabled = payload.get("enabled", True)
        if not isinstance(enabled, bool):
            errors.append(FieldError("enabled", enabled, "true or false"))
        if errors or trigger is None or policy is None:
            raise InvalidInput.collect(errors or [FieldError("trigger", None, "a trigger spec")])
        return _Spec(str(name), trigger, trigger_spec, action_type, action_config, policy, labels, bool(enabled),
                     durable is not False)

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
                      for e in definition.validate(config))
        return definition.type, dict(config)

    async def _changes(self, tx: Transaction, current: Automation, spec: _Spec, *,
                       trigger_changed: bool) -> AutomationChanges:
        next_run_at = current.next_run_at
        if trigger_changed:
            next_run_at = _first_fire(spec.trigger, await tx.now())
        return AutomationChanges(
            name=spec.name, trigger=spec.trigger_spec, action_type=spec.action_type,
            action_config=spec.action_config, policy=spec.policy.to_dict(), labels=spec.labels,
            next_run_at=next_run_at, clear_next_run_at=next_run_at is None,
            status=AutomationStatus.ACTIVE if next_run_at is not None or spec.trigger.is_event
            else current.status)

    async def _refresh_cursor(self, tx: Transaction, automation: Automation) -> Automation:
        now = await tx.now()
        if automation.next_run_at is None or automation.next_run_at >= now:
            return automation
        following = _first_fire(parse(automation.trigger), now)
        return await tx.automations.update(automation.id, automation.version, AutomationChanges(
            next_run_at=following, clear_next_run_at=following is None))

    async def _announce_deleted(self, tx: Transaction, deleted: Deleted) -> None:
        await tx.outbox.append_many([self._events.automation_gone(a, "deleted") for a in deleted.automation_ids])
        await tx.outbox.append_many(self._events.runs_canceled(
            deleted.canceled_run_ids, deleted.automation_ids[0] if len(deleted.automation_ids) == 1 else None,
            CANCELED_DELETED))


async def cancel_transient_runs(tx: Transaction, events: EventFactory, automation_id: str, reason: str) -> list[str]:
    """PENDING / RETRY_WAIT runs of a transient automation → CANCELED(reason), with their ``run.canceled``
    (the store does this for stored automations in ``set_enabled`` / ``delete``)."""
    canceled: list[str] = []
    while True:
        waiting = await tx.runs.query(automation_id=automation_id, statuses=_CANCELABLE, limit=1000)
        done = [run.id for run in waiting if await tx.runs.cancel(run.id, reason)]
        canceled += done
        if len(waiting) < 1000 or not done:
            break
    await tx.outbox.append_many(events.runs_canceled(canceled, automation_id, reason))
    return canceled


def _refuse_transient_event(spec: _Spec) -> None:
    if spec.trigger.is_event:
        raise NotAvailable("non-durable event automations (durable: false with an event trigger)",
                           "event triggers are matched against stored automations; omit 'durable'")


def _first_fire(trigger: Trigger, now: datetime) -> datetime | None:
    return trigger.next_after(now)


def _end_of(trigger_spec: Mapping[str, Any]) -> datetime | None:
    raw = trigger_spec.get("end_date_time") or trigger_spec.get("end")
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError:
            return None
        return parsed if parsed.tzinfo is not None else None
    return None


def _parse_trigger(raw: Any, errors: list[FieldError]) -> tuple[Trigger | None, dict[str, Any]]:
    try:
        trigger = parse(raw)
    except InvalidTrigger as exc:
        errors.extend(FieldError(trigger_field(e.field), e.value, e.expected) for e in exc.errors)
        return None, {}
    spec = trigger.to_spec()
    routing_key = spec.get("routing_key")
    if isinstance(routing_key, str) and (routing_key.startswith(_RESERVED_PREFIXES) or routing_key[0] in "#*"):
        errors.append(FieldError("trigger.routing_key", routing_key,
                                 "a pattern outside actwheel's own namespaces " + ", ".join(_RESERVED_PREFIXES)
                                 + " that does not start with a wildcard"))
    return trigger, spec


def _has_ended(trigger: Trigger, now: datetime) -> bool:
    return not trigger.is_event and trigger.next_after(now) is None


def trigger_field(field: str) -> str:
    """A trigger error's field named from the body root (``trigger.expression.seconds``)."""
    return field if field == "trigger" or field.startswith("trigger.") else f"trigger.{field}"


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


def _as_payload(automation: Automation, *, flat: bool = False) -> dict[str, Any]:
    """The stored automation as a create payload; ``flat`` uses action_type/action_config like the update."""
    action: dict[str, Any] = (
        {"action_type": automation.action_type, "action_config": automation.action_config} if flat
        else {"action": {"type": automation.action_type, "config": automation.action_config}})
    return {"name": automation.name, "trigger": automation.trigger, **action, "policy": automation.policy,
            "labels": automation.labels}

