"""Ad hoc action requests and what the action registry offers; trigger previews.

An ad hoc request is a run without an automation: its dedupe key ``request:<owner>:<idempotency key>``
makes a repeated request answer the first run. Used by ``POST /v1/actions``, the router's
``action.request`` consumer and, later, the MCP server alike.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from actwheel.actions.base import ActionDefinition
from actwheel.actions.registry import ActionRegistry
from actwheel.clock import Clock
from actwheel.errors import FieldError, InvalidAction, InvalidInput, InvalidTrigger
from actwheel.events import EventFactory
from actwheel.messages import ActionRequested
from actwheel.run_context import DRY_RUN_KEY, OWNER_KEY
from actwheel.service.authorize import listing_owner, require
from actwheel.service.caller import Caller, caller_snapshot
from actwheel.service.payload import trigger_errors
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import InsertedRun, NewRun, Origin
from actwheel.triggers import Fire, preview_fires

__all__ = ["MAX_PREVIEW", "REQUEST", "ActionService", "TriggerService"]

REQUEST = "action:request"

#: The most fires one preview computes.
MAX_PREVIEW = 500


class ActionService:
    def __init__(self, *, store: Store, registry: ActionRegistry, events: EventFactory) -> None:
        self._store = store
        self._registry = registry
        self._events = events

    def types(self, caller: Caller) -> list[ActionDefinition]:
        """The action types whose scopes the caller holds, in registration order."""
        grant = caller.grant
        return [d for d in self._registry if not grant.missing(d.required_scopes)]

    async def submit(self, caller: Caller, request: ActionRequested) -> InsertedRun:
        """Insert a run for an ad hoc request; a repeated idempotency key returns the first run.

        Needs ``action:request`` and the action's scopes; a request for another owner ``admin:write``.

        :raises PermissionDenied: naming every missing scope
        :raises InvalidInput: an unknown action type (``type``), or a config the type refuses, naming every
            bad ``config.<field>`` (as ``POST /v1/automations`` does); no run is created
        """
        caller = _for_owner(caller, request.owner_id)
        needed = self._validated(request).required_scopes_for(request.config)
        require(caller, "action.request", [REQUEST, *needed])
        async with self._store.transaction() as tx:
            inserted = await self._insert(tx, caller, request)
            if inserted.created:
                await tx.outbox.append_many(self._events.runs_ready([inserted.run.id]))
        return inserted

    async def submit_published(self, request: ActionRequested) -> InsertedRun:
        """Insert a run for a request that arrived on the bus: no scope gate here — the scopes it declares
        are its snapshot, and the router authorises the run when it is dispatched (snapshot ∩ the owner's
        ceiling; a missing or banned owner's run is SKIPPED). Whoever may publish ``action.request``
        is decided by the bus (docs/bus.md).

        :raises InvalidInput: as :meth:`submit`: the config is validated here, not when the run executes
        """
        self._validated(request)
        caller = Caller(request.owner_id, frozenset(request.scopes))
        async with self._store.transaction() as tx:
            inserted = await self._insert(tx, caller, request)
            if inserted.created:
                await tx.outbox.append_many(self._events.runs_ready([inserted.run.id]))
        return inserted

    def _validated(self, request: ActionRequested) -> ActionDefinition:
        """The request's action definition, once its config passed the type's validation."""
        definition = self._registry.get(request.type)
        errors = definition.validate(request.config)
        if errors:
            raise InvalidAction.collect([FieldError(f"config.{e.field}".rstrip("."), e.value, e.expected)
                                         for e in errors])
        return definition

    async def _insert(self, tx: Transaction, caller: Caller, request: ActionRequested) -> InsertedRun:
        key = request.idempotency_key or uuid.uuid4().hex
        context: dict[str, Any] = {**request.context, OWNER_KEY: caller_snapshot(caller)}
        if request.dry_run:
            context[DRY_RUN_KEY] = True
        return await tx.runs.insert(NewRun(
            automation_id=None, dedupe_key=f"request:{caller.owner_id}:{key}", owner_id=caller.owner_id,
            action_type=request.type, action_config=dict(request.config), origin=Origin.REQUEST,
            scheduled_for=await tx.now(), context=context))


def _for_owner(caller: Caller, owner_id: str | None) -> Caller:
    """The caller acting for ``owner_id`` (its own unless an admin asks for another owner)."""
    owner = listing_owner(caller, owner_id, write=True)
    return caller if owner == caller.owner_id else Caller(owner, caller.scopes, caller.who, caller.kind,
                                                          caller.key_id, caller.agent_id)


class TriggerService:
    def __init__(self, *, clock: Clock) -> None:
        self._clock = clock

    def preview(self, caller: Caller, trigger: Any, *, count: Any = 10, after: datetime | None = None) -> list[Fire]:
        """The next ``count`` fires of ``trigger`` after ``after`` (default now), with their DST and holiday
        notes; fewer when the schedule ends.

        :raises InvalidInput: naming ``count``, ``trigger`` or a ``trigger.…`` field from the body root
        """
        if not isinstance(count, int) or isinstance(count, bool) or not 0 < count <= MAX_PREVIEW:
            raise InvalidInput("count", count, f"an integer from 1 to {MAX_PREVIEW}")
        if not isinstance(trigger, Mapping):
            raise InvalidInput("trigger", trigger, "a trigger spec object")
        try:
            return preview_fires(trigger, after=after or self._clock.now(), count=count)
        except InvalidTrigger as exc:
            raise trigger_errors(exc) from None
