"""The use cases of transient (``durable: false``) automations: :class:`AutomationService`'s other half.

They live in this instance's :class:`~actwheel.transient.TransientRegistry` (plain data) instead of
the ``automations`` table; their runs are ordinary rows. They announce no ``automation.*`` events
(nothing outside this process could act on them), but disabling or deleting one cancels its waiting
runs like a stored one's. Every change that also writes runs holds the registry's lock, so a disable
never misses a run being inserted for the same automation by a fire.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from actwheel.clock import Clock
from actwheel.errors import InvalidInput, Unsupported
from actwheel.events import EventFactory
from actwheel.run_context import CANCELED_DELETED, CANCELED_DISABLED
from actwheel.service.caller import Caller
from actwheel.service.payload import AutomationSpec, SpecParser, cursor_on_enable, first_fire, merged_payload
from actwheel.storage.base import Store
from actwheel.storage.records import Automation, AutomationStatus, Deleted
from actwheel.transient import TransientRegistry, cancel_transient_runs

__all__ = ["TransientAutomations"]


class TransientAutomations:
    """Create, change, enable, disable and delete the automations of one :class:`TransientRegistry`."""

    def __init__(self, *, registry: TransientRegistry, store: Store, events: EventFactory, clock: Clock,
                 parser: SpecParser) -> None:
        self._registry = registry
        self._store = store
        self._events = events
        self._clock = clock
        self._parser = parser

    def find(self, automation_id: str) -> Automation | None:
        return self._registry.find(automation_id)

    def __len__(self) -> int:
        return len(self._registry)

    def query(self, *, owner_id: str | None, session_id: str | None, agent_id: str | None,
              status: AutomationStatus | None, enabled: bool | None, after_id: str | None,
              limit: int) -> list[Automation]:
        return self._registry.query(owner_id=owner_id, session_id=session_id, agent_id=agent_id, status=status,
                                    enabled=enabled, after_id=after_id, limit=limit)

    def create(self, caller: Caller, spec: AutomationSpec) -> Automation:
        """:raises Unsupported: an event trigger (matched against stored automations only)
        :raises InvalidInput: naming ``durable`` when the registry is full"""
        _refuse_event_trigger(spec)
        now = self._clock.now()
        return self._registry.add(Automation(
            id=self._registry.new_id(), owner_id=caller.owner_id, name=spec.name, trigger=spec.trigger_spec,
            action_type=spec.action_type, action_config=spec.action_config, policy=spec.policy.to_dict(),
            labels=spec.labels, enabled=spec.enabled, status=AutomationStatus.ACTIVE, durable=False,
            next_run_at=first_fire(spec.trigger, now), end_at=spec.end_at, version=1,
            partition=-1, created_at=now, updated_at=now, created_by=caller.who, created_by_key=caller.key_id))

    async def update(self, automation_id: str, payload: Mapping[str, Any], expected_version: int) -> Automation:
        """:raises Conflict: ``expected_version`` is stale"""
        if payload.get("durable", False) is not False:
            raise InvalidInput("durable", payload["durable"], "false: an automation stays durable or not as created")
        async with self._registry.lock:  # not while one of its instants is being fired
            # read under the lock: a fire that held it moved the cursor (without a new version) or ended it
            current = self._registry.check_version(automation_id, expected_version)
            spec = self._parser.parse({**merged_payload(current, payload), "durable": False},
                                      check_ended="trigger" in payload)
            _refuse_event_trigger(spec)
            next_run_at = first_fire(spec.trigger, self._clock.now()) if "trigger" in payload else current.next_run_at
            return self._registry.change(
                current.id, expected_version, name=spec.name, trigger=spec.trigger_spec, action_type=spec.action_type,
                action_config=spec.action_config, policy=spec.policy.to_dict(), labels=spec.labels,
                next_run_at=next_run_at, end_at=spec.end_at)

    async def set_enabled(self, automation_id: str, enabled: bool,
                          expected_version: int | None) -> tuple[Automation, list[str]]:
        async with self._registry.lock:  # a disable never misses a run being inserted for it
            current = self._registry.check_version(automation_id, expected_version)
            canceled: list[str] = []
            next_run_at = cursor_on_enable(current, self._clock.now()) if enabled else current.next_run_at
            if not enabled:
                async with self._store.transaction() as tx:
                    canceled = await cancel_transient_runs(tx, self._events, automation_id, CANCELED_DISABLED)
            status = AutomationStatus.COMPLETED if next_run_at is None else current.status
            updated = self._registry.change(automation_id, None, enabled=enabled, next_run_at=next_run_at,
                                            status=status)
            if status is AutomationStatus.COMPLETED:
                self._registry.discard(automation_id)  # an ended schedule leaves memory (and frees its place)
        return updated, canceled

    async def delete(self, automation_id: str) -> Deleted:
        return await self._delete(lambda registry: [registry.get(automation_id).id])

    async def delete_by(self, *, owner_id: str, session_id: str | None, agent_id: str | None) -> Deleted:
        return await self._delete(lambda registry: [a.id for a in registry.query(
            owner_id=owner_id, session_id=session_id, agent_id=agent_id, limit=max(1, len(registry)))])

    async def _delete(self, select: Callable[[TransientRegistry], list[str]]) -> Deleted:
        """Cancel the waiting runs of the ones ``select`` picks (committed first: a failure leaves them in
        place), then forget them. Picked under the lock: one that a fire ended meanwhile is not picked."""
        async with self._registry.lock:
            automation_ids = select(self._registry)
            canceled: list[str] = []
            if automation_ids:
                async with self._store.transaction() as tx:
                    for automation_id in automation_ids:
                        canceled += await cancel_transient_runs(tx, self._events, automation_id, CANCELED_DELETED)
            for automation_id in automation_ids:
                self._registry.discard(automation_id)
        return Deleted(automation_ids=tuple(automation_ids), canceled_run_ids=tuple(canceled))


def _refuse_event_trigger(spec: AutomationSpec) -> None:
    if spec.trigger.is_event:
        raise Unsupported("durable", False, "true (or omitted) with an event trigger: event triggers are matched "
                          "against stored automations only")
