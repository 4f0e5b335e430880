"""The automation use cases: what the API, bus commands and agents may do to automations.

Input is validated where it enters (every error at once, each naming its field and value, see
:mod:`actwheel.service.payload`); each change commits with its outbox event in one transaction.

``durable: false`` automations go to this instance's transient registry instead of the
``automations`` table (only where a wheel ticker runs to fire them); every method here takes their
ids as well and hands them to :class:`~actwheel.service.transient.TransientAutomations`, once per
method.

Every use case takes the :class:`Caller` first, whichever face asks: the HTTP API, a bus command,
the MCP server or the dashboard — and checks it here, once, by the rules of
:mod:`actwheel.service.authorize` (resource scope, the double-scope rule, owner isolation in SQL).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from actwheel.actions.registry import ActionRegistry
from actwheel.batching import GroupCommitter
from actwheel.clock import Clock
from actwheel.errors import ActwheelError, FieldError, InvalidInput, NotFound, PermissionDenied
from actwheel.events import EventFactory
from actwheel.run_context import CANCELED_DELETED, CANCELED_DISABLED, CANCELED_UPDATED, OWNER_KEY
from actwheel.service.authorize import listing_owner, owner_by_id, require, sees
from actwheel.service.caller import Caller, caller_snapshot
from actwheel.service.history import record_change, record_creates
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

__all__ = ["MAX_BATCH", "READ", "WRITE", "AutomationService"]

READ = "automation:read"
WRITE = "automation:write"
#: The most automations one ``create_many`` (``POST /v1/automations/batch``) stores.
MAX_BATCH = 1000


@dataclass(frozen=True, slots=True)
class _Create:
    """One validated, authorized create waiting for its transaction."""

    caller: Caller
    spec: AutomationSpec


class AutomationService:
    def __init__(self, *, store: Store, parser: SpecParser, events: EventFactory,
                 transients: TransientAutomations | None = None) -> None:
        """``transients``: where ``durable: false`` automations live; ``None`` (no ticker here) refuses them."""
        self._store = store
        self._parser = parser
        self._events = events
        self._transients = transients
        # Concurrent single creates share one transaction (speed only: each is its own row, its own
        # event and history entry, validated and authorized alone before it is queued).
        self._creates: GroupCommitter[_Create, Automation | ActwheelError] = GroupCommitter(
            self._commit_creates, max_batch=MAX_BATCH)

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
        :raises PermissionDenied: naming every missing scope of ``automation:write`` and, created
            enabled, the action's (the double-scope rule)
        """
        spec = self._parser.parse(_as_agent(caller, payload))
        self._require_change(caller, "automation.create", spec.action_type, spec.action_config, fires=spec.enabled)
        if not spec.durable:
            return self._transient_home().create(caller, spec)
        result = await self._creates.submit(_Create(caller, spec))
        if isinstance(result, ActwheelError):
            raise result
        return result

    async def create_many(self, caller: Caller, payloads: Any) -> list[Automation]:
        """Validate every item, then store them all in one transaction, or none.

        Each item is a create payload, checked as :meth:`create` checks one (the double-scope rule
        included), owned by the caller; ``durable: false`` is refused (a batch is stored).

        :raises InvalidInput: ``items`` is not a list of 1 to :data:`MAX_BATCH`, or listing every bad
            field of every item as ``items[i].<field>``; nothing is stored
        :raises PermissionDenied: naming the first item the caller may not create (``items[i]``) and every
            scope missing for any item, ``automation:write`` and the actions'; nothing is stored
        """
        if not isinstance(payloads, list) or not 1 <= len(payloads) <= MAX_BATCH:
            raise InvalidInput("items", payloads if not isinstance(payloads, list) else f"{len(payloads)} items",
                               f"a list of 1 to {MAX_BATCH} automation payloads")
        specs = self._parse_items(caller, payloads)
        self._require_items(caller, specs)
        return await self._write_creates([_Create(caller, spec) for spec in specs])

    def _require_items(self, caller: Caller, specs: Sequence[AutomationSpec]) -> None:
        """The double-scope rule for every item of a batch, refused at once: the scopes missing for any item.

        :raises PermissionDenied: naming the first refused item (and how many more) and every scope missing
        """
        refused: list[int] = []
        missing: set[str] = set()
        for i, spec in enumerate(specs):
            try:
                self._require_change(caller, "automation.create", spec.action_type, spec.action_config,
                                     fires=spec.enabled)
            except PermissionDenied as exc:
                refused.append(i)
                missing.update(exc.missing)
        if refused:
            more = f" and {len(refused) - 1} more" if len(refused) > 1 else ""
            raise PermissionDenied(caller.who, f"automation.create of items[{refused[0]}]{more}", sorted(missing))

    def _parse_items(self, caller: Caller, payloads: Sequence[Any]) -> list[AutomationSpec]:
        specs: list[AutomationSpec] = []
        errors: list[FieldError] = []
        for i, payload in enumerate(payloads):
            try:
                spec = self._parser.parse(_as_agent(caller, payload))
            except InvalidInput as exc:
                errors.extend(FieldError(f"items[{i}].{e.field}", e.value, e.expected) for e in exc.errors)
                continue
            if not spec.durable:
                errors.append(FieldError(f"items[{i}].durable", False, "true: a batch stores its automations"))
            specs.append(spec)
        if errors:
            raise InvalidInput.collect(errors)
        return specs

    async def _commit_creates(self, batch: Sequence[_Create]) -> list[Automation | ActwheelError]:
        """The group committer's flush: the batch in one transaction; if that fails, each create in its
        own, so a failing one fails alone (with its own error) and the others are stored."""
        try:
            return list(await self._write_creates(batch))
        except ActwheelError:
            if len(batch) == 1:
                raise
        results: list[Automation | ActwheelError] = []
        for item in batch:
            try:
                results.extend(await self._write_creates([item]))
            except ActwheelError as exc:
                results.append(exc)
        return results

    async def _write_creates(self, batch: Sequence[_Create]) -> list[Automation]:
        async with self._store.transaction() as tx:
            now = await tx.now()
            created = await tx.automations.create_many([_new_automation(item.caller, item.spec, now) for item in batch])
            await tx.outbox.append_many([self._events.automation_changed(a, "created") for a in created])
            await record_creates(tx, [(item.caller, a) for item, a in zip(batch, created, strict=True)])
        return created

    async def close(self) -> None:
        """Commit the creates queued, then write each later one alone (idempotent)."""
        await self._creates.close()

    async def get(self, caller: Caller, automation_id: str) -> Automation:
        """:raises NotFound: no automation ``automation_id`` that the caller may see"""
        require(caller, "automation.read", [READ])
        return await self._visible(caller, automation_id)

    async def get_to_run(self, caller: Caller, automation_id: str) -> Automation:
        """The automation as the run-now rule sees it: ``automation:write`` suffices (no ``automation:read``),
        so a face can restate what it is about to run to a caller who may run it.

        :raises NotFound: no automation ``automation_id`` that the caller may change
        """
        require(caller, "automation.run", [WRITE])
        return await self._visible(caller, automation_id, write=True)

    async def query(self, caller: Caller, *, owner_id: str | None = None, session_id: str | None = None,
                    agent_id: str | None = None, status: AutomationStatus | None = None,
                    enabled: bool | None = None, after_id: str | None = None, limit: int = 100,
                    name_contains: str | None = None, action_type: str | None = None,
                    labels: Mapping[str, str] | None = None) -> list[Automation]:
        """The caller's stored and this instance's transient automations matching every given filter,
        ordered by id (page with ``after_id``). Another ``owner_id`` needs ``admin:read``; an agent-bound
        key lists only its agent's. ``name_contains``: a case-insensitive substring of the name;
        ``labels``: each label has that string value.

        :raises PermissionDenied: no ``automation:read``; another owner without ``admin:read``; an
            agent-bound key naming another agent
        """
        require(caller, "automation.read", [READ])
        agent_id = _agent_filter(caller, agent_id)
        filters: dict[str, Any] = {"owner_id": listing_owner(caller, owner_id), "session_id": session_id,
                                   "agent_id": agent_id, "status": status, "enabled": enabled,
                                   "after_id": after_id, "limit": limit}
        extra: dict[str, Any] = {"name_contains": name_contains, "action_type": action_type, "labels": labels}
        async with self._store.transaction() as tx:
            stored = await tx.automations.query(**filters, **extra)
        if self._transients is None or len(self._transients) == 0:
            return stored
        transient = [a for a in self._transients.query(**filters) if _matches(a, **extra)]
        return sorted([*stored, *transient], key=lambda a: a.id)[:limit]

    async def update(self, caller: Caller, automation_id: str, payload: Mapping[str, Any],
                     expected_version: int) -> Automation:
        """Replace the fields in ``payload``; a new trigger recomputes ``next_run_at`` from now.

        :raises Conflict: ``expected_version`` is stale
        """
        if "enabled" in payload:
            raise InvalidInput("enabled", payload["enabled"],
                               "no 'enabled' in an update: POST /v1/automations/{id}/enable or /disable")
        if "labels" in payload:
            payload = _as_agent(caller, payload)
        if self._transient(automation_id) is not None:
            current = await self._visible(caller, automation_id, write=True)
            self._require_update(caller, current, payload)
            return await self._transient_home().update(automation_id, payload, expected_version)
        if payload.get("durable", True) is not True:
            raise InvalidInput("durable", payload["durable"], "true: an automation stays durable or not as created")
        async with self._store.transaction() as tx:
            current = await self._stored(tx, caller, automation_id, write=True)
            spec = self._parser.parse(merged_payload(current, payload), check_ended="trigger" in payload)
            self._require_change(caller, "automation.update", spec.action_type, spec.action_config,
                                 fires=current.enabled)
            changes = await _changes(tx, current, spec, trigger_changed="trigger" in payload)
            updated = await tx.automations.update(automation_id, expected_version, changes)
            # After the version bump (a planner's cursor CAS now fails and plans again from the edited
            # automation), so that this sees every run planned ahead that was committed before it.
            withdrawn = await tx.runs.withdraw_ahead(automation_id, CANCELED_UPDATED)
            if withdrawn and "trigger" not in payload and withdrawn[0].scheduled_for is not None:
                updated = await tx.automations.rewind_cursor(automation_id, withdrawn[0].scheduled_for)
            await tx.outbox.append(self._events.automation_changed(updated, "updated"))
            await tx.outbox.append_many(self._events.runs_canceled([r.id for r in withdrawn], automation_id,
                                                                   CANCELED_UPDATED))
            await record_change(tx, caller, "updated", before=current, after=updated)
        return updated

    async def set_enabled(self, caller: Caller, automation_id: str, enabled: bool,
                          expected_version: int | None = None) -> tuple[Automation, list[str]]:
        """Enable (recomputing a past ``next_run_at`` from now) or disable (canceling waiting runs).

        Enabling needs the action's scopes too (checked with ``automation:write`` once the automation is
        found, so a refusal names both); disabling only ``automation:write``, checked first.
        """
        action = "automation.enable" if enabled else "automation.disable"
        if not enabled:
            require(caller, action, [WRITE])
        if self._transient(automation_id) is not None:
            current = await self._visible(caller, automation_id, write=True)
            self._require_change(caller, action, current.action_type, current.action_config, fires=enabled)
            return await self._transient_home().set_enabled(automation_id, enabled, expected_version)
        async with self._store.transaction() as tx:
            current = await self._stored(tx, caller, automation_id, write=True)
            self._require_change(caller, action, current.action_type, current.action_config, fires=enabled)
            automation, canceled = await tx.automations.set_enabled(
                automation_id, enabled, expected_version=expected_version)
            if enabled:
                automation = await _move_past_cursor(tx, automation)
            await tx.outbox.append(self._events.automation_changed(
                automation, "enabled" if enabled else "disabled"))
            await tx.outbox.append_many(self._events.runs_canceled(canceled, automation.id, CANCELED_DISABLED))
            await record_change(tx, caller, "enabled" if enabled else "disabled", before=current, after=automation)
        return automation, canceled

    async def delete(self, caller: Caller, automation_id: str) -> Deleted:
        require(caller, "automation.delete", [WRITE])
        if self._transient(automation_id) is not None:
            await self._visible(caller, automation_id, write=True)
            return await self._transient_home().delete(automation_id)
        async with self._store.transaction() as tx:
            current = await self._stored(tx, caller, automation_id, write=True)
            deleted = await tx.automations.delete(automation_id)
            await self._announce_deleted(tx, deleted)
            await record_change(tx, caller, "deleted", before=current)
        return deleted

    async def delete_by(self, caller: Caller, *, session_id: str | None = None,
                        agent_id: str | None = None) -> Deleted:
        """Cascade-delete by session or agent label; their pending runs are canceled, history kept."""
        require(caller, "automation.delete", [WRITE])
        if (session_id is None) == (agent_id is None):
            raise InvalidInput("session_id", session_id, "exactly one of session_id or agent_id")
        if caller.agent_id is not None and agent_id != caller.agent_id:
            raise InvalidInput("agent_id", agent_id, f"{caller.agent_id!r}: an agent-bound key deletes only its "
                               "agent's automations")
        owner = caller.owner_id  # a cascade never reaches another owner's automations
        async with self._store.transaction() as tx:
            if session_id is not None:
                deleted = await tx.automations.delete_by_session(session_id, owner_id=owner)
            else:
                deleted = await tx.automations.delete_by_agent(str(agent_id), owner_id=owner)
            await self._announce_deleted(tx, deleted)
        if self._transients is not None:
            gone = await self._transients.delete_by(owner_id=owner, session_id=session_id, agent_id=agent_id)
            deleted = Deleted(automation_ids=deleted.automation_ids + gone.automation_ids,
                              canceled_run_ids=deleted.canceled_run_ids + gone.canceled_run_ids)
        return deleted

    async def run_now(self, caller: Caller, automation_id: str, *, dedupe_id: str | None = None) -> Run:
        """A manual run of the automation's current action (dedupe key ``manual:<id>``).

        ``dedupe_id``: the ``<id>`` (default: a fresh one). A repeated call with the same one returns the
        first run and creates nothing (the MCP face passes its confirmation's id, so a retried call is safe).
        """
        transient = await self._visible(caller, automation_id, write=True) if self._transient(automation_id) else None
        async with self._store.transaction() as tx:
            automation = transient or await self._stored(tx, caller, automation_id, write=True)
            self._require_change(caller, "automation.run", automation.action_type, automation.action_config,
                                 fires=True)
            now = await tx.now()
            inserted = await tx.runs.insert(NewRun(
                automation_id=automation.id, dedupe_key=f"manual:{dedupe_id or uuid.uuid4().hex}",
                owner_id=automation.owner_id, action_type=automation.action_type,
                action_config=automation.action_config, policy=automation.policy, origin=Origin.MANUAL,
                scheduled_for=now, context={OWNER_KEY: caller_snapshot(caller)}))
            if inserted.created:
                await tx.outbox.append_many(self._events.runs_ready([inserted.run.id]))
        return inserted.run

    # --- helpers ---------------------------------------------------------------------

    def _require_change(self, caller: Caller, action: str, action_type: str, action_config: Mapping[str, Any], *,
                        fires: bool) -> None:
        """The double-scope rule: ``automation:write``, and for a change after which the automation can fire
        the action's scopes as well — in one check, so a refusal names every scope missing.

        Every create, update, enable and run now goes through here (whichever face asks; the HTTP guard
        leaves these routes' scopes to it), so none of them skips ``automation:write``.
        """
        scopes = [WRITE, *self._parser.action_scopes(action_type, action_config)] if fires else [WRITE]
        require(caller, action, scopes)

    def _require_update(self, caller: Caller, current: Automation, payload: Mapping[str, Any]) -> None:
        spec = self._parser.parse(merged_payload(current, payload), check_ended="trigger" in payload)
        self._require_change(caller, "automation.update", spec.action_type, spec.action_config, fires=current.enabled)

    async def _visible(self, caller: Caller, automation_id: str, *, write: bool = False) -> Automation:
        """The automation if the caller may reach it, else :class:`NotFound` exactly as for a missing id."""
        transient = self._transient(automation_id)
        if transient is not None:
            owner = owner_by_id(caller, write=write)
            if (owner is None or transient.owner_id == owner) and sees(caller, transient.agent_id):
                return transient
            raise NotFound("automation", automation_id)
        async with self._store.transaction() as tx:
            return await self._stored(tx, caller, automation_id, write=write)

    async def _stored(self, tx: Transaction, caller: Caller, automation_id: str, *, write: bool) -> Automation:
        automation = await tx.automations.get(automation_id, owner_id=owner_by_id(caller, write=write))
        if not sees(caller, automation.agent_id):
            raise NotFound("automation", automation_id)
        return automation

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


def _new_automation(caller: Caller, spec: AutomationSpec, now: Any) -> NewAutomation:
    return NewAutomation(
        owner_id=caller.owner_id, name=spec.name, trigger=spec.trigger_spec, action_type=spec.action_type,
        action_config=spec.action_config, policy=spec.policy.to_dict(), labels=spec.labels, enabled=spec.enabled,
        next_run_at=spec.first_fire(now), end_at=spec.end_at, created_by=caller.who,
        created_by_key=caller.key_id)


async def _changes(tx: Transaction, current: Automation, spec: AutomationSpec, *,
                   trigger_changed: bool) -> AutomationChanges:
    """The stored changes of an update. A new trigger starts its cursor from now; otherwise the cursor and
    the status are left as the state row has them (``None``), not as ``current`` read them: a planner may
    have moved the cursor since (its CAS does not bump the version), and writing the read value back
    would move it backwards over instants already recorded."""
    changes = AutomationChanges(
        name=spec.name, trigger=spec.trigger_spec, action_type=spec.action_type,
        action_config=spec.action_config, policy=spec.policy.to_dict(), labels=spec.labels)
    if not trigger_changed:
        return changes
    next_run_at = first_fire(spec.trigger, await tx.now())
    return replace(
        changes, next_run_at=next_run_at, clear_next_run_at=next_run_at is None,
        status=AutomationStatus.ACTIVE if next_run_at is not None or spec.trigger.is_event else current.status)


async def _move_past_cursor(tx: Transaction, automation: Automation) -> Automation:
    following = cursor_on_enable(automation, await tx.now())
    if following == automation.next_run_at:
        return automation
    return await tx.automations.update(automation.id, automation.version, AutomationChanges(
        next_run_at=following, clear_next_run_at=following is None))


def _as_agent(caller: Caller, payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """An agent-bound key's automation is its agent's: labelled so (else it could not see it), and
    naming another agent is refused."""
    if caller.agent_id is None or not isinstance(payload, Mapping):  # a bad body: the parser names it
        return payload
    labels = payload.get("labels", {})
    if not isinstance(labels, Mapping):
        return payload
    named = labels.get("agent_id", caller.agent_id)
    if named != caller.agent_id:
        raise InvalidInput("labels.agent_id", named, f"{caller.agent_id!r}: an agent-bound key creates and "
                           "labels only its agent's automations")
    return {**payload, "labels": {**labels, "agent_id": caller.agent_id}}


def _matches(automation: Automation, *, name_contains: str | None, action_type: str | None,
             labels: Mapping[str, str] | None) -> bool:
    """The query's extra filters on a transient automation (the store applies them in SQL)."""
    return ((name_contains is None or name_contains.lower() in automation.name.lower())
            and (action_type is None or automation.action_type == action_type)
            and all(automation.labels.get(k) == v for k, v in (labels or {}).items()))


def _agent_filter(caller: Caller, agent_id: str | None) -> str | None:
    """An agent-bound key lists only its agent's automations (naming another agent is refused)."""
    if caller.agent_id is None:
        return agent_id
    if agent_id is not None and agent_id != caller.agent_id:
        raise InvalidInput("agent_id", agent_id, f"{caller.agent_id!r}: an agent-bound key lists only its agent's "
                           "automations")
    return caller.agent_id
