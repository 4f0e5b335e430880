"""The storage port: a :class:`Store` hands out :class:`Transaction` units of work whose
repositories read and write the records of :mod:`actwheel.storage.records`.

The database is the correctness layer (docs/design.md invariants 1–7); every guarantee stated
below is enforced by a constraint or a conditional statement, never by a check in Python
followed by a write. Times that decide correctness (leases, due, retries) come from the
database clock on PostgreSQL and from the store's injected :class:`~actwheel.clock.Clock`
on SQLite.

Errors: every method may raise :class:`~actwheel.errors.StorageUnavailable` (database
unreachable, timed out, or a transient serialisation failure: retry the whole
transaction) and :class:`~actwheel.errors.InvalidInput` (bad input, nothing written);
other ``:raises:`` are listed per method. Driver exceptions never cross this port.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Literal

from actwheel.storage.records import (
    ApiKey,
    AttentionCounts,
    AuditEntry,
    Automation,
    AutomationChanges,
    AutomationHistoryEntry,
    AutomationStatus,
    Confirmation,
    CursorAdvance,
    DeadLetterRecord,
    Deleted,
    DueSchedule,
    InsertedRun,
    InstanceRecord,
    NewApiKey,
    NewAuditEntry,
    NewAutomation,
    NewAutomationHistory,
    NewConfirmation,
    NewDeadLetter,
    NewOntologyObject,
    NewOutboxMessage,
    NewPrincipal,
    NewRun,
    NewSecurityEvent,
    NewUiSession,
    ObjectRecord,
    ObjectTypeRecord,
    Origin,
    OutboxMessage,
    PartitionLease,
    Principal,
    PrincipalKind,
    PrincipalStatus,
    PurgedOutbox,
    PurgedRuns,
    RelationRecord,
    Run,
    RunOutcome,
    RunStatus,
    RunWindowStats,
    SecretRecord,
    SecurityEvent,
    UiSession,
)

__all__ = [
    "ApiKeyRepository",
    "AuditRepository",
    "AutomationHistoryRepository",
    "AutomationRepository",
    "ConfirmationRepository",
    "DeadLetterRepository",
    "Dialect",
    "IdempotencyRepository",
    "InstanceRepository",
    "OntologyRepository",
    "OutboxRepository",
    "PartitionLeaseRepository",
    "PrincipalRepository",
    "RetentionRepository",
    "RunRepository",
    "SecurityEventRepository",
    "Store",
    "StoredSecretRepository",
    "Transaction",
    "UiSessionRepository",
]

Dialect = Literal["sqlite", "postgres"]


class AutomationRepository(ABC):
    """Automations and their trigger cursors."""

    @abstractmethod
    async def create(self, new: NewAutomation) -> Automation:
        """Insert an automation at version 1 with ``partition = hash(id) mod N``.

        :raises Conflict: ``new.id`` is already taken
        :raises InvalidInput: a JSON field is not serialisable or over 256 KiB, a datetime is naive
        """


    @abstractmethod
    async def create_many(self, news: Sequence[NewAutomation]) -> list[Automation]:
        """:meth:`create` for every item, in one statement per table; the automations in ``news``' order.

        :raises Conflict: an id already exists (nothing of the batch is written: the statement fails)
        :raises InvalidInput: an item :meth:`create` would refuse
        """
    @abstractmethod
    async def get(self, automation_id: str, *, owner_id: str | None = None) -> Automation:
        """The automation ``automation_id``; with ``owner_id``, only if that owner's (filtered in
        SQL, so another owner's automation is indistinguishable from a missing one).

        :raises NotFound: no automation ``automation_id`` (of ``owner_id``, when given)
        """

    @abstractmethod
    async def get_many(self, automation_ids: Sequence[str]) -> dict[str, Automation]:
        """The automations of ``automation_ids`` by id, in one statement; missing ids are absent
        (never an error). Duplicates are allowed; an empty sequence returns ``{}``.

        :raises InvalidInput: ``automation_ids`` is one string, or holds a non-string or empty id
        """

    @abstractmethod
    async def query(
        self,
        *,
        owner_id: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        status: AutomationStatus | None = None,
        enabled: bool | None = None,
        due_before: datetime | None = None,
        partitions: Sequence[int] | None = None,
        after_id: str | None = None,
        limit: int = 100,
        name_contains: str | None = None,
        action_type: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[Automation]:
        """Automations matching every given filter, ordered by id (page with ``after_id``).

        ``name_contains``: case-insensitive substring of the name; ``labels``: each key has that
        (string) value.

        :raises InvalidInput: a label key or value that is not a non-empty string
        """

    @abstractmethod
    async def due(
        self, before: datetime, *, partitions: Sequence[int] | None = None, limit: int = 1000
    ) -> list[Automation]:
        """Enabled ACTIVE automations with ``next_run_at <= before``, earliest first."""

    @abstractmethod
    async def event_automations(self, *, after_id: str = "", limit: int = 5000) -> list[Automation]:
        """Enabled ACTIVE automations with an ``event`` trigger, ordered by id (page with ``after_id``).

        Through a partial index of the event automations (migration 0006): the planner reloads them
        every half minute, and that must not read every automation.

        :raises InvalidInput: ``after_id`` is not a string or ``limit`` is not positive
        """

    @abstractmethod
    async def due_schedule(
        self, before: datetime, *, partitions: Sequence[int] | None = None, after_id: str = "", limit: int = 5000
    ) -> list[DueSchedule]:
        """Enabled ACTIVE automations with ``next_run_at <= before`` (in ``partitions``; None = all), only
        their id, cursor, trigger spec and partition, ordered by id and after ``after_id`` (page on)."""

    @abstractmethod
    async def update(
        self, automation_id: str, expected_version: int, changes: AutomationChanges
    ) -> Automation:
        """Apply ``changes`` if the version is still ``expected_version``; version goes up by one.

        :raises NotFound: no automation ``automation_id``
        :raises Conflict: the current version is not ``expected_version``
        """

    @abstractmethod
    async def rewind_cursor(self, automation_id: str, to: datetime) -> Automation:
        """Move the cursor back to ``to`` when it is past it (or NULL: a COMPLETED one becomes ACTIVE again),
        leaving the version alone: an update that withdrew the runs planned ahead of their instants
        (fire-ahead) plans them again, in the same transaction as its own version bump. A cursor at or
        before ``to`` stays.

        :raises NotFound: no automation ``automation_id``
        """

    @abstractmethod
    async def set_enabled(
        self, automation_id: str, enabled: bool, *, expected_version: int | None = None
    ) -> tuple[Automation, list[str]]:
        """Enable or disable; version goes up by one. Disabling cancels the automation's
        PENDING and RETRY_WAIT runs in this same transaction (invariant 6).

        :returns: the automation after the change and the ids of the runs canceled
        :raises NotFound: no automation ``automation_id``
        :raises Conflict: ``expected_version`` is given and does not hold
        """

    @abstractmethod
    async def delete(self, automation_id: str) -> Deleted:
        """Delete one automation, canceling its PENDING/RETRY_WAIT runs (history is kept).

        :raises NotFound: no automation ``automation_id``
        """

    @abstractmethod
    async def delete_by_session(self, session_id: str, *, owner_id: str | None = None) -> Deleted:
        """Delete every automation labelled with ``session_id`` (cascade as :meth:`delete`); with
        ``owner_id``, only that owner's (in SQL: another owner's session is left alone).

        :raises InvalidInput: ``session_id`` or ``owner_id`` is not a non-empty string
        """

    @abstractmethod
    async def delete_by_agent(self, agent_id: str, *, owner_id: str | None = None) -> Deleted:
        """Delete every automation labelled with ``agent_id`` (cascade as :meth:`delete`); with
        ``owner_id``, only that owner's (in SQL).

        :raises InvalidInput: ``agent_id`` or ``owner_id`` is not a non-empty string
        """

    @abstractmethod
    async def delete_by_owner(self, owner_id: str) -> Deleted:
        """Delete every automation of ``owner_id`` (cascade as :meth:`delete`)."""

    @abstractmethod
    async def advance_cursor(
        self,
        automation_id: str,
        version: int,
        expected_next_run_at: datetime | None,
        new_next_run_at: datetime | None,
    ) -> bool:
        """Compare-and-set the cursor on ``(id, version, next_run_at)`` (invariant 2).

        True for exactly one of any number of concurrent callers with the same expectation.
        ``new_next_run_at=None`` marks the automation COMPLETED. The version is unchanged.
        """

    @abstractmethod
    async def advance_cursors(self, advances: Sequence[CursorAdvance]) -> set[str]:
        """Many :meth:`advance_cursor` in one statement; returns the automation ids that won."""


class RunRepository(ABC):
    """Runs: idempotent insertion, leases with fencing epochs, retries (invariants 1, 3, 5, 7)."""

    @abstractmethod
    async def insert(self, new: NewRun) -> InsertedRun:
        """Insert a run, or return the existing one for its key with ``created=False``.

        The key is ``(automation_id, dedupe_key)``, or ``(owner_id, dedupe_key)`` when
        ``automation_id`` is None. Never two rows for one key, whatever the concurrency.

        :raises InvalidInput: bad status/origin, naive datetime, oversized or non-JSON config
        """

    @abstractmethod
    async def insert_many(self, news: Sequence[NewRun]) -> list[InsertedRun]:
        """:meth:`insert` for many runs in one statement; results in the order of ``news``."""

    @abstractmethod
    async def get(self, run_id: str, *, owner_id: str | None = None) -> Run:
        """The run ``run_id``; with ``owner_id``, only if that owner's (filtered in SQL, so another
        owner's run is indistinguishable from a missing one).

        :raises NotFound: no run ``run_id`` (of ``owner_id``, when given)
        """

    @abstractmethod
    async def get_many(self, run_ids: Sequence[str]) -> dict[str, Run]:
        """The runs of ``run_ids`` that exist, by id, in one statement (duplicates read once, missing
        ones left out): what the live stream reads for a ``run.ready`` batch.

        :raises InvalidInput: ``run_ids`` is one string, or holds an empty id
        """

    @abstractmethod
    async def query(
        self,
        *,
        automation_id: str | None = None,
        statuses: Sequence[RunStatus] | None = None,
        owner_id: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        limit: int = 100,
        action_type: str | None = None,
        origin: Origin | None = None,
        older_than: tuple[datetime, str] | None = None,
    ) -> list[Run]:
        """Runs matching every given filter, newest first (``created_after`` inclusive), by
        ``(created_at, id)``; ``older_than``: strictly after the run with that ``(created_at, id)`` in
        this order (the cursor of the next page).

        Through an index in order whatever the filters (migration 0008): ``runs_automation_time``
        with ``automation_id``, else ``runs_owner_created`` with ``owner_id``, else ``runs_created``;
        the other filters are checked on the rows read, so a rare status may read many rows of the
        range — bound it with ``created_after``.
        """

    @abstractmethod
    async def window_stats(
        self, since: datetime, *, now: datetime, owner_id: str | None = None
    ) -> RunWindowStats:
        """Counts and lateness of the runs created since ``since`` (and the rates over the 5 and 60
        minutes before ``now``), of ``owner_id`` or every owner: bounded by ``runs_created`` /
        ``runs_owner_created`` to the runs created since ``min(since, now - 60 min)``, never every run,
        in one pass. The counts are exact; the lateness percentiles rank every scheduled run, or above
        about 2 × :data:`~actwheel.storage.records.LATENESS_SAMPLE` runs in the window (estimated from
        its last hour, one index range first) a deterministic sample (``Percentiles.ranked``).

        :raises InvalidInput: a naive instant
        """

    @abstractmethod
    async def waiting_ids(
        self,
        statuses: Sequence[RunStatus],
        *,
        owner_id: str | None = None,
        automation_id: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        action_type: str | None = None,
        origin: Origin | None = None,
        limit: int = 100,
    ) -> list[str]:
        """The ids of the waiting runs (``statuses``: PENDING and/or RETRY_WAIT) matching every given
        filter, newest first by ``(created_at, id)``, at most ``limit``: one statement over the open
        runs (``runs_open``, ``finished_at IS NULL``), whatever the history's size.

        :raises InvalidInput: an empty ``statuses`` or one that is not PENDING or RETRY_WAIT
        """

    @abstractmethod
    async def attention_counts(self, *, failed_since: datetime, owner_id: str | None = None) -> AttentionCounts:
        """Every UNKNOWN and DEAD run, whatever its age, and the FAILED runs created since
        ``failed_since``, of ``owner_id`` or every owner: read from ``runs_attention`` (migration 0012,
        kept by triggers on runs), never from runs — its reads are bounded by the runs needing attention.

        :raises InvalidInput: a naive instant
        """

    @abstractmethod
    async def resolve_unknown(
        self, run_id: str, status: RunStatus, reason: str, *, owner_id: str | None = None
    ) -> Run | None:
        """A manual verdict on an UNKNOWN run: UNKNOWN → ``status`` (SUCCEEDED or FAILED) with ``reason``,
        by compare-and-set on the status (with ``owner_id``, only that owner's run).

        :returns: the run after the change; None when it is not UNKNOWN (any more) or not there
        :raises InvalidInput: ``status`` is not SUCCEEDED or FAILED, ``reason`` is empty
        """

    @abstractmethod
    async def claim(self, run_id: str, owner: str, lease_s: float) -> Run | None:
        """PENDING → RUNNING if due (``not_before`` passed): sets the lease, bumps epoch and attempt.

        :returns: the claimed run for exactly one of any concurrent claimers, None for the others
        """

    @abstractmethod
    async def claim_many(self, run_ids: Sequence[str], owner: str, lease_s: float) -> list[Run]:
        """:meth:`claim` for many runs in one statement; returns those this caller won.

        A run another transaction has locked right now is skipped, not waited for.
        """

    @abstractmethod
    async def claim_next(self, owner: str, lease_s: float, limit: int) -> list[Run]:
        """Claim up to ``limit`` due PENDING runs, oldest first (the polling path)."""

    @abstractmethod
    async def renew(self, run_id: str, owner: str, epoch: int, lease_s: float) -> bool:
        """Extend the lease to now + ``lease_s``; False unless ``owner`` and ``epoch`` still hold."""

    @abstractmethod
    async def renew_many(self, leases: Sequence[tuple[str, int]], owner: str, lease_s: float) -> set[str]:
        """:meth:`renew` for every ``(run id, epoch)`` in one statement; returns the run ids renewed
        (a run missing from the answer is no longer ``owner``'s at that epoch)."""

    @abstractmethod
    async def count_backlog(self, limit: int) -> int:
        """PENDING runs due now (not planned ahead of a later instant) plus leased (RUNNING, COMPENSATING)
        ones, each part counted up to ``limit`` (so at most ``2 * limit``): a bound check whose cost does not
        grow with the backlog."""

    @abstractmethod
    async def finish(self, outcome: RunOutcome) -> bool:
        """Apply ``outcome`` if its owner and epoch still hold the lease; False for a fenced-out zombie.

        :raises InvalidInput: a status a lease holder cannot set (RUNNING), RETRY_WAIT without not_before
        """

    @abstractmethod
    async def finish_many(self, outcomes: Sequence[RunOutcome]) -> set[str]:
        """:meth:`finish` for many runs in one statement; returns the run ids that were applied."""

    @abstractmethod
    async def expired_leases(self, limit: int = 100) -> list[Run]:
        """RUNNING/COMPENSATING runs whose lease expired (database clock), oldest expiry first."""

    @abstractmethod
    async def recover_expired(
        self,
        run_id: str,
        epoch: int,
        status: RunStatus,
        *,
        reason: str | None = None,
        not_before: datetime | None = None,
    ) -> Run | None:
        """Move a run whose lease (at ``epoch``) expired to ``status`` (PENDING, RETRY_WAIT,
        UNKNOWN, FAILED, DEAD), dropping the lease and bumping the epoch so the old holder is
        fenced out. None when the lease is not expired or the epoch moved on (someone else did it).
        """

    @abstractmethod
    async def stale_pending(self, older_than_s: float, limit: int = 100) -> list[Run]:
        """PENDING runs due for at least ``older_than_s`` seconds and still not claimed."""

    @abstractmethod
    async def promote_due_retries(self, limit: int = 100) -> list[Run]:
        """RETRY_WAIT runs whose ``not_before`` has passed become PENDING; returns them."""

    @abstractmethod
    async def cancel(self, run_id: str, reason: str) -> bool:
        """PENDING/RETRY_WAIT → CANCELED(reason); False when the run is in any other status."""

    @abstractmethod
    async def cancel_waiting(self, automation_id: str, reason: str) -> list[str]:
        """Every PENDING and RETRY_WAIT run of ``automation_id`` → CANCELED(``reason``), in one
        statement: the cascade :meth:`AutomationRepository.set_enabled` and ``delete`` run for a
        stored automation, offered here for automations the store does not hold (non-durable).

        :returns: the ids of the runs canceled, sorted (none: an empty list, also for an unknown id)
        :raises InvalidInput: ``automation_id`` or ``reason`` is not a non-empty string
        """

    @abstractmethod
    async def withdraw_ahead(self, automation_id: str, reason: str) -> list[Run]:
        """The runs of ``automation_id`` planned ahead of their instant (fire-ahead: scheduled, PENDING,
        never claimed, ``not_before`` still in the future by the database's clock) → CANCELED(``reason``),
        their dedupe key moved aside to ``withdrawn:<run id>`` so that the instant can be planned again
        (``schedule:<instant>``) from the edited automation. One statement; a run a router has claimed
        meanwhile is RUNNING and not touched.

        :returns: the runs withdrawn, as they are now (none: an empty list, also for an unknown id)
        :raises InvalidInput: ``automation_id`` or ``reason`` is not a non-empty string
        """

    @abstractmethod
    async def going_before(self, run_ids: Sequence[str]) -> dict[str, int]:
        """For each of ``run_ids``: how many other runs of its automation scheduled before it are still
        going (PENDING, RUNNING, RETRY_WAIT, COMPENSATING), counted up to 2 — the overlap check a run
        planned ahead of its instant takes again when it is claimed. Ids not found are absent."""

    @abstractmethod
    async def active_automation_ids(self, automation_ids: Sequence[str]) -> set[str]:
        """Those of ``automation_ids`` that have a run still going (PENDING, RUNNING, RETRY_WAIT,
        COMPENSATING): the overlap check, batched."""

    @abstractmethod
    async def latest_of(self, automation_ids: Sequence[str], *, owner_id: str | None = None) -> dict[str, Run]:
        """The newest run (by ``created_at``; runs created in one transaction tie, in no promised order) of
        each of ``automation_ids``, by automation id, in one statement: one probe of ``runs_automation_time``
        per id. An automation without a run is absent; with ``owner_id``, so is one whose newest run is
        another owner's (filtered in SQL).

        :raises InvalidInput: ``automation_ids`` is one string, or holds a non-string or empty id
        """


class OutboxRepository(ABC):
    """Messages written in the same transaction as the change they announce (invariant 4)."""

    @abstractmethod
    async def append(self, message: NewOutboxMessage) -> None:
        """Queue one message; the relay is woken when the transaction commits."""

    @abstractmethod
    async def append_many(self, messages: Sequence[NewOutboxMessage]) -> None:
        """Queue many messages in one statement, in order."""

    @abstractmethod
    async def take_batch(self, limit: int = 500, *, exclusive: bool = False) -> list[OutboxMessage]:
        """Unpublished messages in id order (at-least-once: a crash before marking repeats them).

        ``exclusive``: lock the rows for this transaction; a concurrent exclusive take skips them
        (where :attr:`Store.row_locks`). Publish and mark them in the same transaction.
        """

    @abstractmethod
    async def mark_published(self, ids: Sequence[int]) -> int:
        """Mark messages published; returns how many were still unpublished."""

    @abstractmethod
    async def purge_published(self, before: datetime) -> int:
        """Delete messages published before ``before``; returns how many."""

    @abstractmethod
    async def backlog(self) -> int:
        """How many rows wait for the relay (unpublished), for the ``actwheel_outbox_backlog`` gauge."""

    @abstractmethod
    async def oldest_unpublished(self) -> datetime | None:
        """When the oldest unpublished row was written (lowest id), None when there is none."""

    @abstractmethod
    async def requeue(self, message_id: int) -> bool:
        """Mark a published row unpublished again, so the relay sends it once more; False when the
        row is gone (purged) or unpublished already."""


class AuditRepository(ABC):
    """The append-only audit trail, idempotent by event id."""

    @abstractmethod
    async def append(self, entry: NewAuditEntry) -> bool:
        """Append one entry; False when its event id is already recorded."""

    @abstractmethod
    async def append_many(self, entries: Sequence[NewAuditEntry]) -> int:
        """Append entries in order, ignoring event ids already recorded; returns how many were new."""

    @abstractmethod
    async def trail(self, run_id: str) -> list[AuditEntry]:
        """A run's entries in the order they were appended, a packed pipeline row as its phases
        (:mod:`actwheel.storage.trail`)."""

    @abstractmethod
    async def for_automation(self, automation_id: str, limit: int = 100) -> list[AuditEntry]:
        """An automation's entries, most recent last (the last ``limit``)."""


class OntologyRepository(ABC):
    """Object types, objects (soft-deletable, versioned) and relations.

    Schema validation of properties is the caller's job (``actwheel.actions``).
    """

    @abstractmethod
    async def put_type(
        self,
        name: str,
        properties: dict[str, Any],
        required: Sequence[str] = (),
        *,
        expected_version: int | None = None,
    ) -> ObjectTypeRecord:
        """Create (version 1) or redefine (version + 1) an object type.

        :raises Conflict: ``expected_version`` is given and does not hold (0 = must not exist)
        """

    @abstractmethod
    async def get_type(self, name: str) -> ObjectTypeRecord:
        """:raises NotFound: no object type ``name``"""

    @abstractmethod
    async def list_types(self) -> list[ObjectTypeRecord]:
        """Every object type, by name."""

    @abstractmethod
    async def delete_type(self, name: str) -> None:
        """:raises NotFound: no such type  :raises Conflict: objects of this type still exist"""

    @abstractmethod
    async def create_object(
        self,
        object_type: str,
        properties: dict[str, Any],
        *,
        object_id: str | None = None,
        created_by: str | None = None,
    ) -> ObjectRecord:
        """:raises NotFound: no such object type  :raises Conflict: ``object_id`` is taken"""

    @abstractmethod
    async def create_objects(self, news: Sequence[NewOntologyObject]) -> list[ObjectRecord]:
        """:meth:`create_object` for many objects in one statement; results in the order of ``news``.

        All or nothing: when one object is refused, none of the batch is written and the
        transaction stays usable (as after a refused :meth:`create_object`).

        :raises InvalidInput: a bad field, named by index (``objects[3].properties``)
        :raises NotFound: an object type does not exist (the first such, in order)
        :raises Conflict: an id is taken, or given twice in ``news``
        """

    @abstractmethod
    async def get_object(self, object_id: str, *, include_deleted: bool = False) -> ObjectRecord:
        """:raises NotFound: no such object (or soft-deleted and ``include_deleted`` is false)"""

    @abstractmethod
    async def list_objects(
        self, object_type: str, *, include_deleted: bool = False, limit: int = 100
    ) -> list[ObjectRecord]:
        """Objects of one type, oldest first."""

    @abstractmethod
    async def update_object(
        self, object_id: str, properties: dict[str, Any], *, expected_version: int | None = None
    ) -> ObjectRecord:
        """Replace the properties of a live object; version goes up by one.

        :raises NotFound: no live object  :raises Conflict: ``expected_version`` does not hold
        """

    @abstractmethod
    async def delete_object(
        self, object_id: str, *, soft: bool = True, expected_version: int | None = None
    ) -> ObjectRecord:
        """Soft-delete (mark, version + 1) or hard-delete; returns the object as it was before.

        :raises NotFound: no live object
        :raises Conflict: version mismatch, or a hard delete of an object that has relations
        """

    @abstractmethod
    async def restore_object(self, obj: ObjectRecord) -> ObjectRecord:
        """Make the object look like ``obj`` again (re-created if hard-deleted); version + 1."""

    @abstractmethod
    async def create_relation(
        self,
        relation_type: str,
        source: str,
        target: str,
        properties: dict[str, Any] | None = None,
        *,
        relation_id: str | None = None,
        created_by: str | None = None,
    ) -> RelationRecord:
        """:raises NotFound: source or target object does not exist  :raises Conflict: id taken"""

    @abstractmethod
    async def get_relation(self, relation_id: str) -> RelationRecord:
        """:raises NotFound: no such relation"""

    @abstractmethod
    async def relations_of(self, object_id: str) -> list[RelationRecord]:
        """Relations where the object is source or target, oldest first."""

    @abstractmethod
    async def delete_relation(self, relation_id: str) -> RelationRecord:
        """Delete and return the relation.  :raises NotFound: no such relation"""


class PrincipalRepository(ABC):
    """Users, their agents and services (docs/design.md, Security). A banned owner's runs are
    SKIPPED(owner_inactive) by the engine; the ceiling (``scopes``) is enforced by the auth
    service, stored here as given. Every change bumps ``version``.
    """

    @abstractmethod
    async def create(self, new: NewPrincipal) -> Principal:
        """Insert an ACTIVE principal at version 1.

        An agent needs a ``parent_id`` naming a user; a user or a service has none (the
        ``principals_parent_shape`` CHECK, and the insert's own condition on the parent's kind).

        :raises Conflict: ``new.id`` exists
        :raises NotFound: ``new.parent_id`` names no principal
        :raises InvalidInput: a bad field; an agent without a parent, a user or service with one,
            or a parent that is not a user
        """

    @abstractmethod
    async def create_if_absent(self, new: NewPrincipal) -> tuple[Principal, bool]:
        """:meth:`create` unless ``new.id`` exists (``INSERT … ON CONFLICT (id) DO NOTHING``, then a read).

        Safe to race: of any number of concurrent callers exactly one creates the row (PostgreSQL
        makes the others wait for its commit, then they read it).

        :returns: the principal (as stored: an existing one is returned unchanged, whatever
            ``new`` says) and whether this call created it
        :raises NotFound: ``new.parent_id`` names no principal
        :raises InvalidInput: as :meth:`create`
        """

    @abstractmethod
    async def get(self, principal_id: str) -> Principal:
        """:raises NotFound: no such principal"""

    @abstractmethod
    async def get_many(self, principal_ids: Sequence[str]) -> dict[str, Principal]:
        """The principals of ``principal_ids`` by id, in one statement (the router reads the
        owners of a claimed batch at once); missing ids are absent, never an error.

        :raises InvalidInput: ``principal_ids`` is one string, or holds a non-string or empty id
        """

    @abstractmethod
    async def set_status(
        self, principal_id: str, status: PrincipalStatus, *, expected_version: int | None = None
    ) -> Principal:
        """Set the status alone (:meth:`ban` records why and by whom); ACTIVE clears the ban fields.

        :raises NotFound: no such principal  :raises Conflict: ``expected_version`` does not hold
        """

    @abstractmethod
    async def ban(self, principal_id: str, *, reason: str, by: str) -> Principal:
        """BANNED, with ``ban_reason``, ``banned_by`` and ``banned_at`` (now) set; version + 1.
        Banning a banned principal records the new reason.

        :raises NotFound: no such principal
        :raises InvalidInput: ``reason`` or ``by`` is not a non-empty string
        """

    @abstractmethod
    async def unban(self, principal_id: str, *, by: str) -> Principal:
        """ACTIVE, with the three ban fields cleared; version + 1. Who lifted the ban is the
        caller's security event (:class:`SecurityEventRepository`): the row keeps no trace of a
        ban that is over.

        :raises NotFound: no such principal
        :raises InvalidInput: ``by`` is not a non-empty string
        """

    @abstractmethod
    async def set_scopes(self, principal_id: str, scopes: Sequence[str]) -> Principal:
        """Replace the ceiling; version + 1. The scopes are stored as given (the auth service
        validates them and keeps keys within it).

        :raises NotFound: no such principal
        :raises InvalidInput: ``scopes`` is one string or holds a non-string or empty scope
        """

    @abstractmethod
    async def query(
        self,
        *,
        kind: PrincipalKind | None = None,
        status: PrincipalStatus | None = None,
        parent_id: str | None = None,
        after_id: str | None = None,
        limit: int = 100,
    ) -> list[Principal]:
        """Principals matching every given filter, by id (page with ``after_id``)."""

    @abstractmethod
    async def count(self, *, kind: PrincipalKind | None = None) -> int:
        """How many principals (of ``kind``) exist."""


class ApiKeyRepository(ABC):
    """API keys: stored by hash only. A key is live while not revoked and not past
    ``expires_at`` by the transaction's clock (:meth:`Transaction.now`)."""

    @abstractmethod
    async def create(self, new: NewApiKey) -> ApiKey:
        """Insert a key. ``agent_id``, when given, must be an agent whose parent is the owner
        (the insert's own condition, so no key of one user can act as another user's agent).

        :raises NotFound: the owner, or the agent, does not exist
        :raises Conflict: id or hash taken
        :raises InvalidInput: a bad field, or ``agent_id`` is not an agent of ``owner_id``
        """

    @abstractmethod
    async def get(self, key_id: str, *, owner_id: str | None = None, agent_id: str | None = None) -> ApiKey:
        """The key ``key_id`` (live or not); with ``owner_id``, only if that owner's; with ``agent_id``,
        only if bound to that agent (both in SQL).

        :raises NotFound: no such key (of ``owner_id`` and ``agent_id``, when given)
        """

    @abstractmethod
    async def by_hash(self, key_hash: str) -> ApiKey | None:
        """The key with this hash (live or not: the caller tells the two apart), or None."""

    @abstractmethod
    async def for_owner(self, owner_id: str, *, agent_id: str | None = None,
                        include_dead: bool = False) -> list[ApiKey]:
        """An owner's live keys (with ``include_dead``, revoked and expired ones too), oldest first;
        with ``agent_id``, only the keys bound to that agent."""

    @abstractmethod
    async def count_live(self, owner_id: str) -> int:
        """How many live keys ``owner_id`` holds (a cap on keys per owner reads it)."""

    @abstractmethod
    async def revoke(self, key_id: str, *, owner_id: str | None = None, agent_id: str | None = None) -> ApiKey:
        """Revoke (idempotent: ``revoked_at`` keeps the first time); with ``owner_id``, only that owner's;
        with ``agent_id``, only a key bound to that agent.

        :raises NotFound: no such key (of ``owner_id`` and ``agent_id``, when given)
        """

    @abstractmethod
    async def mark_replaced(self, key_id: str, replaced_by: str, grace_until: datetime) -> ApiKey:
        """Rotation: set ``replaced_by`` and cut ``expires_at`` to ``grace_until`` unless it
        already ends sooner (the old key lives on at most until then).

        :raises NotFound: no such key
        :raises InvalidInput: ``replaced_by`` is not a non-empty string, ``grace_until`` is naive
        """

    @abstractmethod
    async def touch(self, key_id: str, at: datetime) -> None:
        """Record a use: ``last_used_at`` becomes ``at`` unless it is later already (concurrent
        uses never move it back). An unknown key is ignored (usage is a hint, not a record).

        :raises InvalidInput: ``at`` is naive
        """


class SecurityEventRepository(ABC):
    """What happened to identities and keys, append-only. Never a key, a hash or a secret."""

    @abstractmethod
    async def append(self, new: NewSecurityEvent) -> SecurityEvent:
        """Record an event at the transaction's now, with a new id.

        :raises InvalidInput: ``kind`` is not a non-empty string of at most 100 characters,
            ``detail`` is not a JSON object, or a detail field is named like a secret
            (``key``, ``hash``, ``secret``, ``token``, ``password``...) or a value looks like an API key
        """

    @abstractmethod
    async def query(
        self, *, kind: str | None = None, principal_id: str | None = None, limit: int = 100
    ) -> list[SecurityEvent]:
        """Events matching every given filter, newest first."""


class StoredSecretRepository(ABC):
    """Encrypted secrets, by (owner, name). Only ciphertext goes in or out."""

    @abstractmethod
    async def put(self, owner_id: str, name: str, ciphertext: bytes) -> SecretRecord:
        """:raises Conflict: the owner already has a secret ``name`` (use :meth:`rotate`)"""

    @abstractmethod
    async def get(self, owner_id: str, name: str) -> SecretRecord:
        """:raises NotFound: no such secret"""

    @abstractmethod
    async def rotate(
        self, owner_id: str, name: str, ciphertext: bytes, *, expected_version: int | None = None
    ) -> SecretRecord:
        """Replace the ciphertext; version + 1.

        :raises NotFound: no such secret  :raises Conflict: ``expected_version`` does not hold
        """

    @abstractmethod
    async def delete(self, owner_id: str, name: str) -> None:
        """:raises NotFound: no such secret"""

    @abstractmethod
    async def names(self, owner_id: str) -> list[str]:
        """The names of an owner's secrets, sorted."""

    @abstractmethod
    async def exists_any(self) -> bool:
        """Whether any secret of any owner is stored (so a host can refuse to start without a key)."""


class IdempotencyRepository(ABC):
    """A ledger of outcomes by idempotency key (table ``idempotency_keys``), for executors that
    must answer a repeated request with the first outcome.

    Written in the caller's transaction: record the outcome with :meth:`put` in the same
    transaction as the change it describes, so both commit or neither does. Keys are opaque
    strings chosen by the caller (prefix them by kind, e.g. ``ontology.create_object:<hash>``).
    """

    @abstractmethod
    async def get(self, key: str) -> dict[str, Any] | None:
        """The outcome recorded under ``key``, or None."""

    @abstractmethod
    async def put(self, key: str, outcome: dict[str, Any]) -> bool:
        """Record ``outcome`` under ``key`` unless the key is recorded already (insert-if-absent).

        :returns: True when this call recorded it; False when ``key`` already existed (the
            stored outcome is unchanged — read it with :meth:`get`). When another open
            transaction is recording the same key, this waits for it: False if it commits,
            True if it rolls back (PostgreSQL; SQLite has one writer at a time).
        :raises InvalidInput: ``key`` is not a non-empty string of at most 1024 characters,
            ``outcome`` is not a JSON object or is over 4 MiB of JSON
        """

    @abstractmethod
    async def purge(self, before: datetime) -> int:
        """Delete the keys recorded before ``before``; returns how many."""


class ConfirmationRepository(ABC):
    """The MCP face's run-now confirmations (table ``mcp_confirmations``) and its server keys
    (``mcp_server_keys``). Instants are the caller's (the service's clock), never the database's.
    """

    @abstractmethod
    async def create(self, new: NewConfirmation) -> Confirmation:
        """Store a confirmation.

        :raises Conflict: its id or token hash exists already (``UNIQUE``)
        :raises InvalidInput: a naive instant, an empty id, hash, owner or automation
        """

    @abstractmethod
    async def by_hash(self, token_hash: str) -> Confirmation | None:
        """The confirmation whose token hashes to ``token_hash``, used or not, expired or not."""

    @abstractmethod
    async def mark_used(self, confirmation_id: str, *, at: datetime, run_id: str) -> Confirmation:
        """Record the first redemption (``used_at``, ``run_id``); a later call changes nothing.

        :raises NotFound: no confirmation ``confirmation_id``
        """

    @abstractmethod
    async def purge(self, before: datetime) -> int:
        """Delete the confirmations that expired before ``before``; returns how many."""

    @abstractmethod
    async def server_key(self, name: str, candidate: bytes) -> bytes:
        """The server key ``name``: the stored one, or ``candidate`` stored now if there is none
        (insert-if-absent: concurrent first calls on several instances agree on one key).

        :raises InvalidInput: ``candidate`` shorter than 32 bytes
        """


class UiSessionRepository(ABC):
    """The dashboard's sign-in sessions (table ``ui_sessions``): rows keyed by ``sha256`` of the
    session id. Instants are the caller's (the service's clock), never the database's."""

    @abstractmethod
    async def create(self, new: NewUiSession) -> UiSession:
        """Store a session.

        :raises Conflict: its id or session hash exists already (``UNIQUE``)
        :raises InvalidInput: a naive instant, an empty id, hash, key, owner or principal
        """

    @abstractmethod
    async def by_hash(self, session_hash: str) -> UiSession | None:
        """The session whose id hashes to ``session_hash``, revoked or expired or not."""

    @abstractmethod
    async def revoke(self, session_hash: str, *, at: datetime) -> bool:
        """Mark the session revoked (the first revocation is kept); ``False``: there is none."""

    @abstractmethod
    async def purge(self, before: datetime) -> int:
        """Delete the sessions that expired before ``before``; returns how many."""


class DeadLetterRepository(ABC):
    """Things that failed for good (a compensation that failed, an undeliverable message)."""

    @abstractmethod
    async def add(self, new: NewDeadLetter) -> DeadLetterRecord:
        """Record a dead letter."""

    @abstractmethod
    async def get(self, letter_id: str) -> DeadLetterRecord:
        """:raises NotFound: no such dead letter"""

    @abstractmethod
    async def query(self, *, source: str | None = None, limit: int = 100) -> list[DeadLetterRecord]:
        """Dead letters, oldest first."""

    @abstractmethod
    async def counts(self) -> dict[str, int]:
        """How many dead letters there are, by source."""

    @abstractmethod
    async def delete(self, letter_id: str) -> None:
        """:raises NotFound: no such dead letter"""


class PartitionLeaseRepository(ABC):
    """Who ticks which partition of the automations. Speed only (invariant 9): losing a lease
    makes work slower, never wrong, because every fire still goes through the cursor CAS."""

    @abstractmethod
    async def acquire(self, owner: str, partitions: Sequence[int], ttl_s: float) -> list[int]:
        """Take each partition that is free, expired (database clock) or already ours; returns those held."""

    @abstractmethod
    async def renew(self, owner: str, partitions: Sequence[int], ttl_s: float) -> list[int]:
        """Extend the leases ``owner`` still holds; returns the partitions renewed."""

    @abstractmethod
    async def release(self, owner: str, partitions: Sequence[int]) -> int:
        """Give up leases; returns how many were released."""

    @abstractmethod
    async def all(self) -> list[PartitionLease]:
        """Every lease row (expired ones too), by partition."""


class AutomationHistoryRepository(ABC):
    """Who changed an automation, when, and from what to what (table ``automation_history``),
    written in the transaction of the change; kept after the automation is deleted."""

    @abstractmethod
    async def append(self, new: NewAutomationHistory) -> AutomationHistoryEntry:
        """Record a change at the transaction's now, with a new id.

        :raises InvalidInput: an empty id, owner or actor, an unknown ``change``, a before/after that is
            not a JSON object
        """

    @abstractmethod
    async def append_many(self, news: Sequence[NewAutomationHistory]) -> None:
        """Record many changes at the transaction's now, each with a new id, in one statement (a batch
        of creates); nothing is returned. Checked as :meth:`append` checks one, naming ``[i]``.

        :raises InvalidInput: as :meth:`append`, for the first bad entry (nothing is written)
        """

    @abstractmethod
    async def for_automation(
        self, automation_id: str, *, owner_id: str | None = None, after_seq: int | None = None, limit: int = 100
    ) -> list[AutomationHistoryEntry]:
        """An automation's changes, oldest first (page with ``after_seq``); with ``owner_id``, only
        that owner's (in SQL)."""


class InstanceRepository(ABC):
    """The engines' heartbeats (table ``instances``): how instances know of each other."""

    @abstractmethod
    async def heartbeat(
        self, instance_id: str, *, roles: Sequence[str], actor_states: Mapping[str, str], started_at: datetime
    ) -> InstanceRecord:
        """Insert or replace the row of ``instance_id``, seen now (the transaction's clock).

        :raises InvalidInput: an empty id, a naive ``started_at``
        """

    @abstractmethod
    async def all(self) -> list[InstanceRecord]:
        """Every instance row, by id (the caller tells live from gone by ``seen_at``)."""

    @abstractmethod
    async def purge(self, before: datetime) -> int:
        """Delete the instances last seen before ``before``; returns how many."""


class RetentionRepository(ABC):
    """Bounded history (issue 14, migration 0010): what the retention sweeper removes, one bounded
    batch per call, and the lease that lets one sweeper at a time do it.

    Every delete re-checks its condition on the row it removes (a run that finished after the scan,
    an outbox row published after it, stays), so two sweepers at once each remove a row at most
    once and never anything else: the lease is a speed mechanism (invariant 9). No open run
    (``finished_at`` NULL, CHECK ``runs_finished_shape``) is ever removed. Deleting a run frees its
    dedupe key: an ad hoc request's ``request:<owner>:<idempotency key>`` is honoured while its run
    is kept, and a scheduled instant cannot fire again because the cursor has moved past it
    (invariant 2), not because its run is still there.

    :raises InvalidInput: a naive instant, a ``limit`` outside 1..100000, an empty lease name or owner
    """

    @abstractmethod
    async def purge_runs(
        self, before: datetime, *, limit: int, after: tuple[datetime, str] | None = None
    ) -> PurgedRuns:
        """Read the next ``limit`` runs created before ``before`` in ``(created_at, id)`` order after
        ``after`` (index ``runs_created``), and delete those that finished before ``before``, with
        their audit rows. Page on with the returned ``after`` until it is None."""

    @abstractmethod
    async def purge_outbox(self, before: datetime, *, limit: int, after: int = 0) -> PurgedOutbox:
        """Read the next ``limit`` outbox rows after id ``after`` and delete those published before
        ``before`` (never an unpublished one); ``after`` is None once a row created at or after
        ``before`` was reached (ids grow with insertion), or the table's end."""

    @abstractmethod
    async def purge_dead_letters(self, before: datetime, *, limit: int) -> int:
        """Delete at most ``limit`` dead letters created before ``before``, oldest first; how many."""

    @abstractmethod
    async def purge_idempotency_keys(self, before: datetime, *, limit: int) -> int:
        """Delete at most ``limit`` idempotency keys created before ``before``, oldest first; how many.
        A deleted key is free: the next ``put`` of it records a new outcome."""

    @abstractmethod
    async def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        """Take the job lease ``name`` for ``ttl_s`` seconds of the database clock when it is free or
        expired, or renew it when ``owner`` holds it; False when someone else holds it."""

    @abstractmethod
    async def release_lease(self, name: str, owner: str) -> bool:
        """Give the lease up; False when ``owner`` did not hold it."""


class Transaction(ABC):
    """One unit of work: everything done through it commits together or not at all."""

    automations: AutomationRepository
    runs: RunRepository
    outbox: OutboxRepository
    audit: AuditRepository
    ontology: OntologyRepository
    principals: PrincipalRepository
    api_keys: ApiKeyRepository
    security_events: SecurityEventRepository
    secrets: StoredSecretRepository
    dead_letters: DeadLetterRepository
    partitions: PartitionLeaseRepository
    idempotency: IdempotencyRepository
    retention: RetentionRepository
    confirmations: ConfirmationRepository
    ui_sessions: UiSessionRepository
    automation_history: AutomationHistoryRepository
    instances: InstanceRepository

    @abstractmethod
    async def now(self) -> datetime:
        """The clock that decides correctness: ``now()`` on PostgreSQL, the store's Clock on SQLite."""


class Store(ABC):
    """A database holding actwheel's truth. Lifecycle: :meth:`start` → use → :meth:`stop`."""

    #: ``"sqlite"`` or ``"postgres"``
    dialect: Dialect
    #: True when a transaction's row locks let several relays split the outbox between them
    #: (``take_batch(exclusive=True)`` skips rows another open transaction took): PostgreSQL. False
    #: for one writer (SQLite), where a transaction must never be held across a bus publish.
    row_locks: bool = False
    #: How many transactions can write at once: 1 on SQLite (one writer), the connection pool's size on
    #: PostgreSQL. An actor that queues bulk work at once bounds it below this, so that others keep a way
    #: in (the planner's big plans: :class:`~actwheel.actors.planner.Planner`).
    writers: int = 1

    @abstractmethod
    async def start(self) -> None:
        """Connect and apply pending migrations. Idempotent.

        :raises StorageUnavailable: the database cannot be reached
        """

    @abstractmethod
    async def stop(self) -> None:
        """Close every connection (bounded). Idempotent; a stopped store cannot be used again."""

    @abstractmethod
    async def migrate(self) -> list[str]:
        """Apply pending migrations (safe when several processes do it at once).

        :returns: the names of the migrations this call applied (empty when up to date)
        """

    @abstractmethod
    def transaction(self, *, urgent: bool = False) -> AbstractAsyncContextManager[Transaction]:
        """``async with store.transaction() as tx:`` commits on normal exit, rolls back on exception.

        ``urgent``: a small transaction that others wait on (a quiet automation's plan or claim, the
        outbox relay's take and mark): where transactions queue for one writer (SQLite), it goes ahead
        of the ordinary ones. Speed only: it changes who waits, never what is written.

        :raises StorageUnavailable: no connection within the acquire timeout
        """

    @abstractmethod
    async def wait_for_outbox(self, timeout: float) -> bool:  # noqa: ASYNC109 (the port's name)
        """Wait until a transaction that appended to the outbox commits, at most ``timeout`` seconds.

        True when woken by such a commit, False on timeout (callers poll either way).
        """

    async def reclaim_space(self, max_pages: int = 2000) -> int:
        """Give up to ``max_pages`` free pages back to the file system, outside any transaction
        (SQLite: ``PRAGMA incremental_vacuum``); how many free pages remain. PostgreSQL: 0, its
        (auto)vacuum makes the space of deleted rows reusable, the file keeps its size."""
        return 0
