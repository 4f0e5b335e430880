"""The automation use cases: what the API, bus commands and agents may do to automations.

Input is validated where it enters (every error at once, each naming its field and value, see
:mod:`actwheel.service.payload`); each change commits with its outbox event in one transaction.

``durable: false`` automations go to this instance's transient registry instead of the
``automations`` table (only where a wheel ticker runs to fire them); every method here takes their
ids as well and hands them to :class:`~actwheel.service.transient.TransientAutomations`, once per
method.

Every use case takes the :class:`Caller` first, whichever face asks: the HTTP API, a bus command,
the MCP server or the dashboard.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from actwheel.actions.registry import ActionRegistry
from actwheel.clock import Clock
from actwheel.errors import InvalidInput
from actwheel.events import EventFactory
from actwheel.run_context import CANCELED_DELETED, CANCELED_DISABLED, OWNER_KEY
from actwheel.service.caller import Caller, caller_snapshot
from actwheel.service.payload import AutomationSpec, SpecParser, cursor_on_enable, first_fire, merged_payload
from actwheel.service.transient import TransientAutomations
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import (
    Automation,
    AutomationChanges,
    AutomationStatus,
    Deleted,
    NewAutomation,
    NewRun,
    Origin,
    Run,
)
from actwheel.transient import TransientRegistry

__all__ = ["AutomationService"]


class AutomationService:
    def __init__(self, *, store: Store, parser: SpecParser, events: EventFactory,
                 transients: TransientAutomations | None = None) -> None:
        """``transients``: where ``durable: false`` automations live; ``None`` (no ticker here) refuses them."""
        self._store = store
        self._parser = parser
        self._events = events
        self._transients = transients

    @classmethod
    def build(cls, *, store: Store, registry: ActionRegistry, events: EventFactory, clock: Clock,
              transients: TransientRegistry | None = None) -> AutomationService:
        """The service with its payload parser over ``registry`` and, given a registry of transient
        automations, their use cases (one parser for both)."""
        parser = SpecParser(registry, clock)
        home = (None if transients is None else TransientAutomations(
            registry=transients, store=store, events=events, clock=clock, parser=parser))
        return cls(store=store, parser=parser, events=events, transients=home)

    async def create(self, caller: Caller, payload: Mapping[str, Any]) -> Automation:
        """Validate and store a new automation with its first ``next_run_at``.

        :raises InvalidInput: listing every bad field with its value; naming ``durable`` when
            ``durable: false`` is asked of an instance without a ticker, or of a full registry
        :raises Unsupported: ``durable: false`` with an event trigger
        """
        spec = self._parser.parse(payload)
        if not spec.durable:
            return self._transient_home().create(caller, spec)
        async with self._store.transaction() as tx:
            now = await tx.now()
            automation = await tx.automations.create(NewAutomation(
                owner_id=caller.owner_id, name=spec.name, trigger=spec.trigger_spec,
                action_type=spec.action_type, action_config=spec.action_config,
                policy=spec.policy.to_dict(), labels=spec.labels, enabled=spec.enabled,
                next_run_at=first_fire(spec.trigger, now), end_at=spec.end_at))
            await tx.outbox.append(self._events.automation_changed(automation, "created"))
        return automation

    async def get(self, caller: Caller, automation_id: str) -> Automation:
        """:raises NotFound: no automation ``automation_id``"""
        transient = self._transient(automation_id)
        if transient is not None:
            return transient
        async with self._store.transaction() as tx:
            return await tx.automations.get(automation_id)

    async def query(self, caller: Caller, *, owner_id: str | None = None, session_id: str | None = None,
                    agent_id: str | None = None, status: AutomationStatus | None = None,
                    enabled: bool | None = None, after_id: str | None = None, limit: int = 100) -> list[Automation]:
        """Stored automations and this instance's transient ones matching every given filter, ordered by id
        (page with ``after_id``)."""
        filters: dict[str, Any] = {"owner_id": owner_id, "session_id": session_id, "agent_id": agent_id,
                                   "status": status, "enabled": enabled, "after_id": after_id, "limit": limit}
        async with self._store.transaction() as tx:
            stored = await tx.automations.query(**filters)
        if self._transients is None or len(self._transients) == 0:
            return stored
        return sorted([*stored, *self._transients.query(**filters)], key=lambda a: a.id)[:limit]

    async def update(self, caller: Caller, automation_id: str, payload: Mapping[str, Any],
                     expected_version: int) -> Automation:
        """Replace the fields in ``payload``; a new trigger recomputes ``next_run_at`` from now.

        :raises Conflict: ``expected_version`` is stale
        """
        if "enabled" in payload:
            raise InvalidInput("enabled", payload["enabled"],
                               "no 'enabled' in an update: POST /v1/automations/{id}/enable or /disable")
        if self._transient(automation_id) is not None:
            return await self._transient_home().update(automation_id, payload, expected_version)
        if payload.get("durable", True) is not True:
            raise InvalidInput("durable", payload["durable"], "true: an automation stays durable or not as created")
        async with self._store.transaction() as tx:
            current = await tx.automations.get(automation_id)
            spec = self._parser.parse(merged_payload(current, payload), check_ended="trigger" in payload)
            changes = await _changes(tx, current, spec, trigger_changed="trigger" in payload)
            updated = await tx.automations.update(automation_id, expected_version, changes)
            await tx.outbox.append(self._events.automation_changed(updated, "updated"))
        return updated

    async def set_enabled(self, caller: Caller, automation_id: str, enabled: bool,
                          expected_version: int | None = None) -> tuple[Automation, list[str]]:
        """Enable (recomputing a past ``next_run_at`` from now) or disable (canceling waiting runs)."""
        if self._transient(automation_id) is not None:
            return await self._transient_home().set_enabled(automation_id, enabled, expected_version)
        async with self._store.transaction() as tx:
            automation, canceled = await tx.automations.set_enabled(
                automation_id, enabled, expected_version=expected_version)
            if enabled:
                automation = await _move_past_cursor(tx, automation)
            await tx.outbox.append(self._events.automation_changed(
                automation, "enabled" if enabled else "disabled"))
            await tx.outbox.append_many(self._events.runs_canceled(canceled, automation.id, CANCELED_DISABLED))
        return automation, canceled

    async def delete(self, caller: Caller, automation_id: str) -> Deleted:
        if self._transient(automation_id) is not None:
            return await self._transient_home().delete(automation_id)
        async with self._store.transaction() as tx:
            deleted = await tx.automations.delete(automation_id)
            await self._announce_deleted(tx, deleted)
        return deleted

    async def delete_by(self, caller: Caller, *, session_id: str | None = None,
                        agent_id: str | None = None) -> Deleted:
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
            gone = await self._transients.delete_by(session_id=session_id, agent_id=agent_id)
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

    # --- helpers ---------------------------------------------------------------------

    def _transient(self, automation_id: str) -> Automation | None:
        return self._transients.find(automation_id) if self._transients is not None else None

    def _transient_home(self) -> TransientAutomations:
        """:raises InvalidInput: naming ``durable``: no ticker runs here to fire a transient automation"""
        if self._transients is None:
            raise InvalidInput("durable", False, "true: this instance runs no wheel ticker (--actors), so a "
                               "non-durable automation accepted here would never fire")
        return self._transients

    async def _announce_deleted(self, tx: Transaction, deleted: Deleted) -> None:
        await tx.outbox.append_many([self._events.automation_gone(a, "deleted") for a in deleted.automation_ids])
        await tx.outbox.append_many(self._events.runs_canceled(
            deleted.canceled_run_ids, deleted.automation_ids[0] if len(deleted.automation_ids) == 1 else None,
            CANCELED_DELETED))


async def _changes(tx: Transaction, current: Automation, spec: AutomationSpec, *,
                   trigger_changed: bool) -> AutomationChanges:
    next_run_at = first_fire(spec.trigger, await tx.now()) if trigger_changed else current.next_run_at
    return AutomationChanges(
        name=spec.name, trigger=spec.trigger_spec, action_type=spec.action_type,
        action_config=spec.action_config, policy=spec.policy.to_dict(), labels=spec.labels,
        next_run_at=next_run_at, clear_next_run_at=next_run_at is None,
        status=AutomationStatus.ACTIVE if next_run_at is not None or spec.trigger.is_event
        else current.status)


async def _move_past_cursor(tx: Transaction, automation: Automation) -> Automation:
    following = cursor_on_enable(automation, await tx.now())
    if following == automation.next_run_at:
        return automation
    return await tx.automations.update(automation.id, automation.version, AutomationChanges(
        next_run_at=following, clear_next_run_at=following is None))
