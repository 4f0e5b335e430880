"""The operator's use cases (issue 13): cancel, resolve and retry a run, bulk changes by ids or by
filter, and the dead letters.

Every change here goes through the same rules as the rest of the service layer:

- **owner isolation**: a run or automation is read with the caller's owner in SQL (``admin:write``
  reaches every owner's); another owner's id answers 404, exactly like a missing one. A bulk change
  by filter lists the caller's own objects only (another ``owner_id`` needs ``admin:write``);
- **the double-scope rule**: enabling in bulk goes through :meth:`AutomationService.set_enabled`, and
  a retry makes something fire, so it needs the action's own scopes besides ``run:write``;
- **audited**: a manual cancel, resolution or retry appends an audit row to the run's trail
  (``MANUAL_CANCEL``, ``MANUAL_RESOLVE``, ``MANUAL_RETRY``: who, with which key, when, why); each
  automation a bulk change touches gets its history row from the use case it went through, and the
  bulk change itself a security event (``bulk.automations.<op>`` / ``bulk.runs.cancel``) naming the
  ids and the note;
- **compare-and-set**: a resolution is a conditional UPDATE on ``status = 'UNKNOWN'``; a cancel is
  the store's PENDING/RETRY_WAIT → CANCELED statement. A run that moved on answers 409.

A retry is a new run from the old run's snapshot (action type, config, policy, context) with dedupe
key ``retry:<old run id>``, origin ``manual`` and the caller's owner snapshot: **a run is retried at
most once** — asking again answers the same new run (``created=False``); to try once more, retry the
new run.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from actwheel.actions.registry import ActionRegistry
from actwheel.errors import Conflict, InvalidInput, NotFound, PermissionDenied, Unsupported
from actwheel.events import EventFactory
from actwheel.run_context import OWNER_KEY
from actwheel.service.authorize import ADMIN_READ, ADMIN_WRITE, listing_owner, owner_by_id, require, sees
from actwheel.service.automations import AutomationService
from actwheel.service.caller import Caller, caller_snapshot
from actwheel.service.runs import RunService
from actwheel.storage.base import Store, Transaction
from actwheel.storage.records import (
    Automation,
    AutomationStatus,
    DeadLetterRecord,
    InsertedRun,
    NewAuditEntry,
    NewRun,
    NewSecurityEvent,
    Origin,
    Run,
    RunStatus,
)

__all__ = ["BULK_MAX", "RUN_WRITE", "BulkItem", "BulkResult", "OperationsService", "Requeued"]

RUN_WRITE = "run:write"
#: The most objects one bulk call touches (ids given, or matched by its filter).
BULK_MAX = 1000
#: The reason on a run an operator canceled.
CANCELED_MANUALLY = "canceled_manually"
#: The reason on an UNKNOWN run an operator resolved.
RESOLVED_MANUALLY = "resolved_manually"
_MAX_NOTE = 2000
_CANCELABLE = frozenset({RunStatus.PENDING, RunStatus.RETRY_WAIT})
_RETRYABLE = frozenset({RunStatus.DEAD, RunStatus.FAILED})
_OUTCOMES = {"happened": RunStatus.SUCCEEDED, "did_not_happen": RunStatus.FAILED}
_AUTOMATION_OPS = ("enable", "disable", "delete")
_AUTOMATION_FILTER = {"q", "enabled", "action_type", "labels", "session_id", "agent_id", "status", "owner_id"}
_RUN_FILTER = {"statuses", "automation_id", "action_type", "origin", "created_after", "created_before", "owner_id"}

BulkStatus = Literal["applied", "would_apply", "not_found", "forbidden", "conflict", "invalid"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BulkItem:
    """One object of a bulk call: what happened to it (or would, in a dry run) and why not."""

    id: str
    status: BulkStatus
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BulkResult:
    """A bulk call's answer: ``count`` is how many it applied (or would apply, in a dry run);
    ``truncated``: the filter matched more than :data:`BULK_MAX` (call again for the rest)."""

    op: str
    dry_run: bool
    count: int
    items: list[BulkItem]
    truncated: bool = False
    ids: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Requeued:
    """A dead letter sent round again: the new run (source ``run``) or the outbox row republished."""

    letter_id: str
    source: str
    run: Run | None = None
    created: bool = False
    outbox_id: int | None = None


class OperationsService:
    def __init__(self, *, store: Store, events: EventFactory, registry: ActionRegistry,
                 automations: AutomationService, runs: RunService) -> None:
        self._store = store
        self._events = events
        self._registry = registry
        self._automations = automations
        self._runs = runs

    # --- one run -------------------------------------------------------------------------

    async def cancel_run(self, caller: Caller, run_id: str, *, note: str | None = None) -> Run:
        """PENDING or RETRY_WAIT → CANCELED(``canceled_manually``), audited ``MANUAL_CANCEL``.

        :raises PermissionDenied: no ``run:write``
        :raises NotFound: no run ``run_id`` of the caller's
        :raises Conflict: the run is in another status (it started, or finished)
        """
        require(caller, "run.cancel", [RUN_WRITE])
        note = _note(note, required=False)
        async with self._store.transaction() as tx:
            run = await self._reachable_run(tx, caller, run_id)
            await self._cancel_in(tx, caller, run, note)
            return await tx.runs.get(run_id)

    async def resolve_run(self, caller: Caller, run_id: str, outcome: str, note: str | None) -> Run:
        """An operator's verdict on an UNKNOWN run: ``happened`` → SUCCEEDED, ``did_not_happen`` → FAILED,
        with reason ``resolved_manually``; the note is required and goes to the ``MANUAL_RESOLVE`` audit row.

        A conditional UPDATE on ``status = 'UNKNOWN'``: of two resolutions, one wins; the other is 409.

        :raises InvalidInput: ``outcome`` is not one of the two, ``note`` is missing, empty or too long
        :raises NotFound: no run ``run_id`` of the caller's
        :raises Conflict: the run is not UNKNOWN (any more)
        """
        require(caller, "run.resolve", [RUN_WRITE])
        if not isinstance(outcome, str) or outcome not in _OUTCOMES:  # a JSON object or list is unhashable
            raise InvalidInput("outcome", outcome, "'happened' (→ SUCCEEDED) or 'did_not_happen' (→ FAILED)")
        text = _note(note, required=True)
        async with self._store.transaction() as tx:
            run = await self._reachable_run(tx, caller, run_id)
            if run.status is not RunStatus.UNKNOWN:
                raise Conflict("run", run_id, f"status {run.status}: only an UNKNOWN run is resolved by hand")
            resolved = await tx.runs.resolve_unknown(run_id, _OUTCOMES[outcome], RESOLVED_MANUALLY,
                                                     owner_id=owner_by_id(caller, write=True))
            if resolved is None:  # it moved on between the read and the compare-and-set
                raise Conflict("run", run_id, "no longer UNKNOWN: someone resolved it first")
            await tx.audit.append(_audit(caller, run, "MANUAL_RESOLVE", {
                "outcome": outcome, "status": str(resolved.status), "note": text}))
            await tx.outbox.append(self._events.run_transitioned(resolved, summary=f"resolved by hand: {outcome}"))
        return resolved

    async def retry_run(self, caller: Caller, run_id: str) -> InsertedRun:
        """A new run from a DEAD or FAILED run's snapshot (see the module docstring: at most once per run).

        :raises PermissionDenied: no ``run:write``, or not the action's own scopes (double-scope rule)
        :raises NotFound: no run ``run_id`` of the caller's
        :raises Conflict: the run is not DEAD or FAILED
        """
        async with self._store.transaction() as tx:
            run = await self._reachable_run(tx, caller, run_id)
            return await self._retry_in(tx, caller, run, also=(RUN_WRITE,))

    # --- bulk ----------------------------------------------------------------------------

    async def bulk_automations(self, caller: Caller, op: str, *, ids: Sequence[str] | None = None,
                               filter: Mapping[str, Any] | None = None, dry_run: bool = False,
                               note: str | None = None) -> BulkResult:
        """``enable``, ``disable`` or ``delete`` the automations of ``ids`` or matched by ``filter``
        (``q``, ``enabled``, ``action_type``, ``labels``, ``session_id``, ``agent_id``, ``status``,
        ``owner_id``), each through its normal use case. ``dry_run`` answers what would be touched:
        the same checks (reachable, and for enable the action's scopes), nothing written.

        :raises InvalidInput: an unknown op, both or neither of ids and filter, more than ``BULK_MAX`` ids,
            an unknown filter field
        :raises PermissionDenied: no ``automation:write``; a filter naming another owner without ``admin:write``
        """
        if op not in _AUTOMATION_OPS:
            raise InvalidInput("op", op, "one of " + ", ".join(_AUTOMATION_OPS))
        require(caller, f"automation.bulk.{op}", ["automation:write"])
        note = _note(note, required=False)
        targets, truncated = await self._automation_targets(caller, ids, filter)
        if dry_run:
            known = await self._reachable_automations(caller, targets)
            items = [await self._preview_automation(caller, op, i, known.get(i)) for i in targets]
        else:
            items = [await self._apply_automation(caller, op, automation_id) for automation_id in targets]
        result = _bulk_result(op, dry_run, items, truncated)
        if not dry_run:
            await self._record_bulk(caller, f"bulk.automations.{op}", result, note)
        return result

    async def bulk_cancel_runs(self, caller: Caller, *, ids: Sequence[str] | None = None,
                               filter: Mapping[str, Any] | None = None, dry_run: bool = False,
                               note: str | None = None) -> BulkResult:
        """Cancel the PENDING / RETRY_WAIT runs of ``ids`` or matched by ``filter`` (``statuses``,
        ``automation_id``, ``action_type``, ``origin``, ``created_after``, ``created_before``,
        ``owner_id``; only waiting runs are ever matched), each as :meth:`cancel_run` (its own
        compare-and-set: a run that started since the filter was read is refused, ``conflict``).

        A filter is one statement over the open runs (:meth:`RunService.waiting_ids`); its dry run
        answers from that statement alone (every run it found is the caller's and waiting), without a
        transaction per run. A dry run of ``ids`` still reads each id (it may be anyone's, or gone).

        :raises InvalidInput: both or neither of ids and filter, too many ids, an unknown filter field
        """
        require(caller, "run.bulk.cancel", [RUN_WRITE])
        note = _note(note, required=False)
        by_filter = _one_of(ids, filter) == "filter"
        targets, truncated = await self._run_targets(caller, ids, filter)
        if dry_run and by_filter:  # the filter read only the caller's waiting runs: each would be canceled
            items = [BulkItem(id=run_id, status="would_apply") for run_id in targets]
        else:
            items = [await self._cancel_item(caller, run_id, dry_run, note) for run_id in targets]
        result = _bulk_result("cancel", dry_run, items, truncated)
        if not dry_run:
            await self._record_bulk(caller, "bulk.runs.cancel", result, note)
        return result

    # --- dead letters --------------------------------------------------------------------

    async def dead_letters(self, caller: Caller, *, source: str | None = None,
                           limit: int = 100) -> list[DeadLetterRecord]:
        """Every owner's dead letters, oldest first. :raises PermissionDenied: no ``admin:read``"""
        require(caller, "dead_letters.read", [ADMIN_READ])
        async with self._store.transaction() as tx:
            return await tx.dead_letters.query(source=source, limit=limit)

    async def dead_letter(self, caller: Caller, letter_id: str) -> DeadLetterRecord:
        """:raises NotFound: no such dead letter  :raises PermissionDenied: no ``admin:read``"""
        require(caller, "dead_letters.read", [ADMIN_READ])
        async with self._store.transaction() as tx:
            return await tx.dead_letters.get(letter_id)

    async def discard_dead_letter(self, caller: Caller, letter_id: str) -> DeadLetterRecord:
        """Delete a dead letter (recorded as a security event ``dead_letter.discarded``).

        :raises NotFound: no such dead letter  :raises PermissionDenied: no ``admin:write``
        """
        require(caller, "dead_letters.discard", [ADMIN_WRITE])
        async with self._store.transaction() as tx:
            letter = await tx.dead_letters.get(letter_id)
            await tx.dead_letters.delete(letter_id)
            await tx.security_events.append(_letter_event(caller, "dead_letter.discarded", letter))
        return letter

    async def requeue_dead_letter(self, caller: Caller, letter_id: str) -> Requeued:
        """Send a dead letter round again, by its source, and drop the letter (in one transaction):

        - ``run``: the DEAD run is retried (:meth:`retry_run`'s rule, as the caller: the double-scope
          rule applies);
        - ``outbox``: the outbox row is marked unpublished, so the relay publishes it once more.

        :raises Unsupported: another source, or an outbox row that was purged since
        :raises NotFound: no such dead letter, or its run is gone
        :raises PermissionDenied: no ``admin:write`` (or not the action's scopes)
        """
        require(caller, "dead_letters.requeue", [ADMIN_WRITE])
        async with self._store.transaction() as tx:
            letter = await tx.dead_letters.get(letter_id)
            requeued = await self._requeue_in(tx, caller, letter)
            await tx.dead_letters.delete(letter_id)
            await tx.security_events.append(_letter_event(caller, "dead_letter.requeued", letter))
        return requeued

    # --- helpers -------------------------------------------------------------------------

    async def _reachable_run(self, tx: Transaction, caller: Caller, run_id: str) -> Run:
        """The run if the caller may change it, else :class:`NotFound` as for a missing id."""
        run = await tx.runs.get(run_id, owner_id=owner_by_id(caller, write=True))
        if caller.agent_id is not None:
            if run.automation_id is None:
                raise NotFound("run", run_id)
            try:
                automation = await tx.automations.get(run.automation_id, owner_id=caller.owner_id)
            except NotFound:
                raise NotFound("run", run_id) from None
            if not sees(caller, automation.agent_id):
                raise NotFound("run", run_id)
        return run

    async def _cancel_in(self, tx: Transaction, caller: Caller, run: Run, note: str | None) -> None:
        if run.status not in _CANCELABLE or not await tx.runs.cancel(run.id, CANCELED_MANUALLY):
            raise Conflict("run", run.id, f"status {run.status}: only a PENDING or RETRY_WAIT run can be canceled")
        await tx.audit.append(_audit(caller, run, "MANUAL_CANCEL", {"from": str(run.status), "note": note}))
        await tx.outbox.append_many(self._events.runs_canceled([run.id], run.automation_id, CANCELED_MANUALLY))

    async def _retry_in(self, tx: Transaction, caller: Caller, run: Run, *, also: Sequence[str] = ()) -> InsertedRun:
        """Retry ``run`` as the caller: ``also`` and the action's scopes in one check (one 403 names all)."""
        action_scopes = self._registry.get(run.action_type).required_scopes_for(run.action_config)
        require(caller, "run.retry", [*also, *action_scopes])
        if run.status not in _RETRYABLE:
            raise Conflict("run", run.id, f"status {run.status}: only a DEAD or FAILED run is retried "
                           "(an UNKNOWN one is resolved first: POST /v1/runs/{id}/resolve)")
        context = {k: v for k, v in run.context.items() if k != OWNER_KEY}
        inserted = await tx.runs.insert(NewRun(
            automation_id=run.automation_id, dedupe_key=f"retry:{run.id}", owner_id=run.owner_id,
            action_type=run.action_type, action_config=run.action_config, policy=run.policy,
            context={**context, OWNER_KEY: caller_snapshot(caller)}, origin=Origin.MANUAL,
            scheduled_for=await tx.now()))
        if inserted.created:
            await tx.outbox.append_many(self._events.runs_ready([inserted.run.id]))
            await tx.audit.append(_audit(caller, run, "MANUAL_RETRY", {"new_run_id": inserted.run.id}))
        return inserted

    async def _requeue_in(self, tx: Transaction, caller: Caller, letter: DeadLetterRecord) -> Requeued:
        if letter.source == "run" and letter.ref_id:
            run = await tx.runs.get(letter.ref_id)
            inserted = await self._retry_in(tx, caller, run)
            return Requeued(letter_id=letter.id, source=letter.source, run=inserted.run, created=inserted.created)
        if letter.source == "outbox" and letter.ref_id and letter.ref_id.isdigit():
            if not await tx.outbox.requeue(int(letter.ref_id)):
                raise Unsupported("source", "outbox", f"an outbox row still stored: row {letter.ref_id} was purged "
                                  "(or waits for the relay already), nothing to requeue: discard the letter")
            return Requeued(letter_id=letter.id, source=letter.source, outbox_id=int(letter.ref_id))
        raise Unsupported("source", letter.source, "a dead letter of source 'run' (retried as a new run) or "
                          "'outbox' (published again); this one can only be read or discarded")

    async def _automation_targets(self, caller: Caller, ids: Sequence[str] | None,
                                  filter: Mapping[str, Any] | None) -> tuple[list[str], bool]:
        if _one_of(ids, filter) == "ids":
            return _checked_ids(ids), False
        assert filter is not None
        query = _automation_query(filter)
        listing_owner(caller, query.get("owner_id"), write=True)
        found = await self._automations.query(caller, **query, limit=BULK_MAX + 1)
        return [a.id for a in found[:BULK_MAX]], len(found) > BULK_MAX

    async def _run_targets(self, caller: Caller, ids: Sequence[str] | None,
                           filter: Mapping[str, Any] | None) -> tuple[list[str], bool]:
        if _one_of(ids, filter) == "ids":
            return _checked_ids(ids), False
        assert filter is not None
        query = _run_query(filter)
        listing_owner(caller, query.get("owner_id"), write=True)
        found = await self._runs.waiting_ids(caller, **query, limit=BULK_MAX + 1)
        return found[:BULK_MAX], len(found) > BULK_MAX

    async def _reachable_automations(self, caller: Caller, ids: Sequence[str]) -> dict[str, Automation]:
        """The stored automations of ``ids`` the caller may change, read in one statement (a dry run of
        a thousand ids is one query, not a thousand): owner and agent filtered as a read by id is."""
        owner = owner_by_id(caller, write=True)
        async with self._store.transaction() as tx:
            found = await tx.automations.get_many(list(ids))
        return {i: a for i, a in found.items() if (owner is None or a.owner_id == owner) and sees(caller, a.agent_id)}

    async def _preview_automation(self, caller: Caller, op: str, automation_id: str,
                                  known: Automation | None) -> BulkItem:
        """What :meth:`_apply_automation` would answer, by the same checks, writing nothing."""
        async def check() -> None:
            automation = known or await self._automations.get(caller, automation_id)  # transient: not stored
            if automation.owner_id != caller.owner_id:
                require(caller, f"automation.{op}", [ADMIN_WRITE])
            if op == "enable":
                require(caller, "automation.enable", self._action_scopes(automation))
        return await _item(automation_id, "would_apply", check)

    async def _apply_automation(self, caller: Caller, op: str, automation_id: str) -> BulkItem:
        async def apply() -> None:
            if op == "delete":
                await self._automations.delete(caller, automation_id)
            else:
                await self._automations.set_enabled(caller, automation_id, op == "enable")
        return await _item(automation_id, "applied", apply)

    async def _cancel_item(self, caller: Caller, run_id: str, dry_run: bool, note: str | None) -> BulkItem:
        async def cancel() -> None:
            async with self._store.transaction() as tx:
                run = await self._reachable_run(tx, caller, run_id)
                if dry_run:
                    if run.status not in _CANCELABLE:
                        raise Conflict("run", run_id, f"status {run.status}: only PENDING or RETRY_WAIT")
                    return
                await self._cancel_in(tx, caller, run, note)
        return await _item(run_id, "would_apply" if dry_run else "applied", cancel)

    def _action_scopes(self, automation: Automation) -> frozenset[str]:
        return self._registry.get(automation.action_type).required_scopes_for(automation.action_config)

    async def _record_bulk(self, caller: Caller, kind: str, result: BulkResult, note: str | None) -> None:
        async with self._store.transaction() as tx:
            await tx.security_events.append(NewSecurityEvent(
                kind=kind, principal_id=caller.who, key_id=caller.key_id, actor_id=caller.who,
                detail={"count": result.count, "ids": result.ids, "note": note,
                        "refused": sum(1 for i in result.items if i.status != "applied")}))


async def _item(object_id: str, ok: BulkStatus, step: Callable[[], Any]) -> BulkItem:
    """Run ``step`` for one object of a bulk call; its refusal becomes the item's status."""
    try:
        await step()
    except NotFound as exc:
        return BulkItem(id=object_id, status="not_found", error=str(exc))
    except PermissionDenied as exc:
        return BulkItem(id=object_id, status="forbidden", error=str(exc))
    except Conflict as exc:
        return BulkItem(id=object_id, status="conflict", error=str(exc))
    except (InvalidInput, Unsupported) as exc:
        return BulkItem(id=object_id, status="invalid", error=str(exc))
    return BulkItem(id=object_id, status=ok)


def _bulk_result(op: str, dry_run: bool, items: list[BulkItem], truncated: bool) -> BulkResult:
    done = [i.id for i in items if i.status in ("applied", "would_apply")]
    return BulkResult(op=op, dry_run=dry_run, count=len(done), items=items, truncated=truncated, ids=done)


def _one_of(ids: Sequence[str] | None, filter: Mapping[str, Any] | None) -> str:
    if (ids is None) == (filter is None):
        raise InvalidInput("ids", ids, "exactly one of 'ids' (a list) or 'filter' (an object)")
    return "ids" if ids is not None else "filter"


def _checked_ids(ids: Sequence[str] | None) -> list[str]:
    if isinstance(ids, str) or not isinstance(ids, Sequence) or not all(isinstance(i, str) and i for i in ids):
        raise InvalidInput("ids", ids, "a list of ids")
    if len(ids) > BULK_MAX:
        raise InvalidInput("ids", f"<{len(ids)} ids>", f"at most {BULK_MAX} ids per call")
    return list(dict.fromkeys(ids))


def _automation_query(filter: Mapping[str, Any]) -> dict[str, Any]:
    """The bulk filter as :meth:`AutomationService.query` keywords. :raises InvalidInput: a bad field"""
    if not isinstance(filter, Mapping):
        raise InvalidInput("filter", filter, "an object")
    unknown = sorted(set(filter) - _AUTOMATION_FILTER)
    if unknown:
        raise InvalidInput(f"filter.{unknown[0]}", filter[unknown[0]],
                           "one of " + ", ".join(sorted(_AUTOMATION_FILTER)))
    query: dict[str, Any] = {k: v for k, v in filter.items() if k not in ("q", "status", "labels")}
    for key in ("session_id", "agent_id", "action_type", "owner_id"):
        if key in query and not isinstance(query[key], str):
            raise InvalidInput(f"filter.{key}", query[key], "a string")
    if "enabled" in query and not isinstance(query["enabled"], bool):
        raise InvalidInput("filter.enabled", query["enabled"], "true or false")
    if "q" in filter:
        if not isinstance(filter["q"], str):
            raise InvalidInput("filter.q", filter["q"], "a string (part of the name)")
        query["name_contains"] = filter["q"]
    if "status" in filter:
        query["status"] = _enum(AutomationStatus, filter["status"], "filter.status")
    if "labels" in filter:
        labels = filter["labels"]
        if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
            raise InvalidInput("filter.labels", labels, "an object of label names to string values")
        query["labels"] = dict(labels)
    return query


def _run_query(filter: Mapping[str, Any]) -> dict[str, Any]:
    """The bulk-cancel filter as :meth:`RunService.query` keywords (only waiting statuses)."""
    if not isinstance(filter, Mapping):
        raise InvalidInput("filter", filter, "an object")
    unknown = sorted(set(filter) - _RUN_FILTER)
    if unknown:
        raise InvalidInput(f"filter.{unknown[0]}", filter[unknown[0]], "one of " + ", ".join(sorted(_RUN_FILTER)))
    raw = filter.get("statuses", ["PENDING", "RETRY_WAIT"])
    if isinstance(raw, str) or not isinstance(raw, Sequence):
        raise InvalidInput("filter.statuses", raw, "a list of PENDING and/or RETRY_WAIT")
    statuses = [_enum(RunStatus, s, f"filter.statuses[{i}]") for i, s in enumerate(raw)]
    waiting = [s for s in statuses if s in _CANCELABLE]
    if not waiting:
        raise InvalidInput("filter.statuses", raw, "PENDING and/or RETRY_WAIT (only waiting runs are canceled)")
    query: dict[str, Any] = {"statuses": waiting}
    for key in ("automation_id", "action_type", "owner_id"):
        if key in filter:
            if not isinstance(filter[key], str):
                raise InvalidInput(f"filter.{key}", filter[key], "a string")
            query[key] = filter[key]
    if "origin" in filter:
        query["origin"] = _enum(Origin, filter["origin"], "filter.origin")
    for key in ("created_after", "created_before"):
        if key in filter:
            query[key] = _instant(filter[key], f"filter.{key}")
    return query


def _enum(kind: Any, value: Any, name: str) -> Any:
    for candidate in (value, str(value).upper(), str(value).lower()):
        try:
            return kind(candidate)
        except ValueError:
            continue
    raise InvalidInput(name, value, "one of " + ", ".join(str(m.value) for m in kind))


def _instant(value: Any, name: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InvalidInput(name, value, "an ISO-8601 instant with an offset")
    return parsed


def _note(note: Any, *, required: bool) -> str | None:
    if note is None and not required:
        return None
    if not isinstance(note, str) or not note.strip() or len(note) > _MAX_NOTE:
        raise InvalidInput("note", note, f"a non-empty text of at most {_MAX_NOTE} characters saying why")
    return note.strip()


def _audit(caller: Caller, run: Run, phase: str, details: dict[str, Any]) -> NewAuditEntry:
    return NewAuditEntry(event_id=f"{run.id}:{phase.lower()}:{uuid.uuid4().hex}", phase=phase, actor=caller.who,
                         run_id=run.id, automation_id=run.automation_id,
                         details={**details, "by": caller.who, "key_id": caller.key_id})


def _letter_event(caller: Caller, kind: str, letter: DeadLetterRecord) -> NewSecurityEvent:
    return NewSecurityEvent(kind=kind, principal_id=caller.who, key_id=caller.key_id, actor_id=caller.who,
                            detail={"letter_id": letter.id, "source": letter.source, "ref_id": letter.ref_id,
                                    "reason": letter.reason})
