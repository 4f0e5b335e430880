"""The records the storage port reads and writes: frozen, keyword-only dataclasses and enums.

Every ``datetime`` here is timezone-aware UTC. JSON-valued fields (``trigger``,
``action_config``, ``policy``, ``labels``, ``context``, ...) are plain dicts as
``orjson`` would decode them. Records that carry secrets (:class:`ApiKey`,
:class:`SecretRecord`) keep them out of their ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "LATENESS_SAMPLE",
    "TERMINAL_RUN_STATUSES",
    "ApiKey",
    "AttentionCounts",
    "AuditEntry",
    "Automation",
    "AutomationChanges",
    "AutomationHistoryEntry",
    "AutomationStatus",
    "Confirmation",
    "CursorAdvance",
    "DeadLetterRecord",
    "Deleted",
    "DueSchedule",
    "InsertedRun",
    "InstanceRecord",
    "NewApiKey",
    "NewAuditEntry",
    "NewAutomation",
    "NewAutomationHistory",
    "NewConfirmation",
    "NewDeadLetter",
    "NewOntologyObject",
    "NewOutboxMessage",
    "NewPrincipal",
    "NewRun",
    "NewSecurityEvent",
    "NewUiSession",
    "ObjectRecord",
    "ObjectTypeRecord",
    "Origin",
    "OutboxMessage",
    "PartitionLease",
    "Percentiles",
    "Principal",
    "PrincipalKind",
    "PrincipalStatus",
    "PurgedOutbox",
    "PurgedRuns",
    "RelationRecord",
    "Run",
    "RunOutcome",
    "RunStatus",
    "RunWindowStats",
    "SecretRecord",
    "SecurityEvent",
    "UiSession",
]


class RunStatus(StrEnum):
    """Where a run is in its life. PENDING → RUNNING → a result; see docs/design.md."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    RETRY_WAIT = "RETRY_WAIT"
    UNKNOWN = "UNKNOWN"
    SKIPPED = "SKIPPED"
    CANCELED = "CANCELED"
    COMPENSATING = "COMPENSATING"
    ROLLED_BACK = "ROLLED_BACK"
    DEAD = "DEAD"


#: Statuses after which a run never changes again.
TERMINAL_RUN_STATUSES: frozenset[RunStatus] = frozenset(
    {
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.UNKNOWN,
        RunStatus.SKIPPED,
        RunStatus.CANCELED,
        RunStatus.ROLLED_BACK,
        RunStatus.DEAD,
    }
)

#: Statuses of a run that is "still going" for the overlap policy.
ACTIVE_RUN_STATUSES: frozenset[RunStatus] = frozenset(
    {RunStatus.PENDING, RunStatus.RUNNING, RunStatus.RETRY_WAIT, RunStatus.COMPENSATING}
)

#: Lateness percentiles rank every scheduled run of a stats window while the window holds fewer than
#: twice this many runs; above, a deterministic sample of 1 in 2^k runs (by a hash of the run id on
#: PostgreSQL, the rowid on SQLite) of one to two times this size, 2^k picked from the window's size
#: as its last hour estimates it (RunRepository.window_stats). Ranking a day of a busy cluster
#: (10⁵–10⁶ values, sent to Python and sorted) would cost more than the pass that counts it.
LATENESS_SAMPLE = 8192


class AutomationStatus(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"


class Origin(StrEnum):
    """Why a run exists."""

    SCHEDULE = "schedule"
    MANUAL = "manual"
    EVENT = "event"
    REQUEST = "request"
    RETRY = "retry"


class PrincipalStatus(StrEnum):
    ACTIVE = "ACTIVE"
    BANNED = "BANNED"


class PrincipalKind(StrEnum):
    """Who a principal is: a person, an agent acting for one user, or a service on the bus."""

    USER = "user"
    AGENT = "agent"
    SERVICE = "service"


# --- automations --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class DueSchedule:
    """What the ticker needs of a due automation: its cursor, its trigger spec and its partition."""

    id: str
    next_run_at: datetime
    trigger: dict[str, Any]
    partition: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Automation:
    """Trigger + action + policy, owned by a user.

    ``version`` counts edits (update, set_enabled); advancing the cursor leaves it alone.
    ``partition`` is ``hash(id) mod N``, fixed at create.
    """

    id: str
    owner_id: str
    name: str
    trigger: dict[str, Any]
    action_type: str
    action_config: dict[str, Any]
    policy: dict[str, Any]
    labels: dict[str, Any]
    enabled: bool
    status: AutomationStatus
    durable: bool
    next_run_at: datetime | None
    end_at: datetime | None
    version: int
    partition: int
    created_at: datetime
    updated_at: datetime
    #: who created it and with which key, for the audit only: authority is always the owner's
    created_by: str | None = None
    created_by_key: str | None = None

    @property
    def session_id(self) -> str | None:
        value = self.labels.get("session_id")
        return None if value is None else str(value)

    @property
    def agent_id(self) -> str | None:
        value = self.labels.get("agent_id")
        return None if value is None else str(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class NewAutomation:
    """What :meth:`AutomationRepository.create` needs; the store adds version, partition, times."""

    owner_id: str
    name: str
    trigger: dict[str, Any]
    action_type: str
    action_config: dict[str, Any] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, Any] = field(default_factory=dict)
    enabled: bool = True
    status: AutomationStatus = AutomationStatus.ACTIVE
    durable: bool = True
    next_run_at: datetime | None = None
    end_at: datetime | None = None
    id: str | None = None
    #: audit only (see :class:`Automation`): the principal and the key id that asked for it
    created_by: str | None = None
    created_by_key: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AutomationChanges:
    """Fields to change in :meth:`AutomationRepository.update`; ``None`` means "leave as is".

    ``clear_next_run_at`` / ``clear_end_at`` set those to NULL (``None`` cannot say it).
    """

    name: str | None = None
    trigger: dict[str, Any] | None = None
    action_type: str | None = None
    action_config: dict[str, Any] | None = None
    policy: dict[str, Any] | None = None
    labels: dict[str, Any] | None = None
    status: AutomationStatus | None = None
    next_run_at: datetime | None = None
    clear_next_run_at: bool = False
    end_at: datetime | None = None
    clear_end_at: bool = False
    owner_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CursorAdvance:
    """One compare-and-set of a trigger cursor: move ``expected`` → ``new`` if nothing changed.

    ``new_next_run_at=None`` means the trigger is exhausted: the automation becomes COMPLETED.
    """

    automation_id: str
    version: int
    expected_next_run_at: datetime | None
    new_next_run_at: datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Deleted:
    """What a (cascading) delete removed: automations, and the PENDING runs it canceled."""

    automation_ids: tuple[str, ...]
    canceled_run_ids: tuple[str, ...]


# --- runs ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    """One execution, with snapshots of the action and policy taken when it was created."""

    id: str
    automation_id: str | None
    dedupe_key: str
    scheduled_for: datetime | None
    origin: Origin
    status: RunStatus
    reason: str | None
    attempt: int
    not_before: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    lease_epoch: int
    action_type: str
    action_config: dict[str, Any]
    policy: dict[str, Any]
    owner_id: str
    context: dict[str, Any]
    result: Any
    error: Any
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class NewRun:
    """A run to insert. ``automation_id=None`` for ad hoc requests (unique per owner + key).

    ``status`` may be PENDING (default), RETRY_WAIT (with ``not_before``) or SKIPPED /
    CANCELED (recorded with a ``reason``, e.g. ``overlap``, ``owner_inactive``).
    """

    automation_id: str | None
    dedupe_key: str
    owner_id: str
    action_type: str
    action_config: dict[str, Any] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    origin: Origin = Origin.SCHEDULE
    scheduled_for: datetime | None = None
    status: RunStatus = RunStatus.PENDING
    reason: str | None = None
    not_before: datetime | None = None
    id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class InsertedRun:
    """The run for a key, and whether this call created it (False: it already existed)."""

    run: Run
    created: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOutcome:
    """The lease holder's verdict on a run, applied by ``finish`` only if owner and epoch hold.

    ``status=COMPENSATING`` keeps the lease (the run is still going); ``RETRY_WAIT`` needs
    ``not_before``; every other status ends the run and drops the lease.
    """

    run_id: str
    owner: str
    epoch: int
    status: RunStatus
    reason: str | None = None
    result: Any = None
    error: Any = None
    not_before: datetime | None = None


# --- outbox and audit ---------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class NewOutboxMessage:
    exchange: str
    routing_key: str
    body: bytes
    headers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class OutboxMessage:
    """A message waiting for (or done with) the relay; ``id`` grows with insertion order."""

    id: int
    exchange: str
    routing_key: str
    body: bytes = field(repr=False)
    headers: dict[str, Any]
    created_at: datetime
    published_at: datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class NewAuditEntry:
    """One audit event; ``event_id`` makes appending idempotent."""

    event_id: str
    phase: str
    actor: str
    run_id: str | None = None
    automation_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    occurred_at: datetime | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditEntry:
    seq: int
    event_id: str
    phase: str
    actor: str
    run_id: str | None
    automation_id: str | None
    details: dict[str, Any]
    occurred_at: datetime


# --- ontology -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ObjectTypeRecord:
    """A named object type; ``properties``/``required`` are JSON Schema fragments (not checked here)."""

    name: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ObjectRecord:
    id: str
    object_type: str
    properties: dict[str, Any]
    version: int
    deleted: bool
    created_by: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class NewOntologyObject:
    """An object to create (:meth:`OntologyRepository.create_objects`); ``id`` None = a new random id."""

    object_type: str
    properties: dict[str, Any]
    id: str | None = None
    created_by: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RelationRecord:
    id: str
    relation_type: str
    source: str
    target: str
    properties: dict[str, Any]
    created_by: str | None
    created_at: datetime


# --- security -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    """A user, an agent (``parent_id``: the user it acts for) or a service.

    ``scopes`` is the ceiling: no key of this principal may hold more. ``on_behalf_of`` lists
    the owners a service may act for (``("*",)`` = any). A ban records why, by whom and when.
    """

    id: str
    display_name: str
    status: PrincipalStatus
    version: int
    created_at: datetime
    updated_at: datetime
    kind: PrincipalKind = PrincipalKind.USER
    parent_id: str | None = None
    scopes: tuple[str, ...] = ()
    on_behalf_of: tuple[str, ...] = ()
    ban_reason: str | None = None
    banned_by: str | None = None
    banned_at: datetime | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class NewPrincipal:
    """What :meth:`PrincipalRepository.create` needs; an agent needs ``parent_id``, nothing else has one."""

    id: str
    kind: PrincipalKind
    scopes: tuple[str, ...]
    parent_id: str | None = None
    display_name: str = ""
    on_behalf_of: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class NewApiKey:
    """``key_hash`` is a hash of the secret (hashing is the caller's job); never the secret.

    ``agent_id``: the owner's agent this key acts as (None: the owner itself).
    """

    owner_id: str
    key_hash: str = field(repr=False)
    scopes: tuple[str, ...] = ()
    name: str = ""
    id: str | None = None
    agent_id: str | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiKey:
    """A stored key. Live while not revoked and not past ``expires_at``; ``replaced_by`` names
    the key that rotated it out (it stays live until its grace period ends)."""

    id: str
    owner_id: str
    key_hash: str = field(repr=False)
    scopes: tuple[str, ...]
    name: str
    revoked: bool
    created_at: datetime
    revoked_at: datetime | None
    agent_id: str | None = None
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    replaced_by: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class NewSecurityEvent:
    """Something that happened to an identity (created, banned, key revoked, refused...).

    Ids and a JSON ``detail`` only: never a key, a hash or a secret (the store refuses
    detail fields named like one).
    """

    kind: str
    principal_id: str | None = None
    key_id: str | None = None
    actor_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class SecurityEvent:
    id: str
    occurred_at: datetime
    kind: str
    principal_id: str | None
    key_id: str | None
    actor_id: str | None
    detail: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class SecretRecord:
    """A stored secret: ciphertext only (encryption is the caller's job), never in a repr."""

    id: str
    owner_id: str
    name: str
    ciphertext: bytes = field(repr=False)
    version: int
    created_at: datetime
    rotated_at: datetime | None


# --- dashboard sessions ---------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class NewUiSession:
    """A dashboard sign-in: only ``sha256`` of the session id (the cookie) is stored, with the key it
    was exchanged for, its principal and owner; valid until ``expires_at`` (the service's clock)."""

    id: str
    session_hash: str = field(repr=False)
    key_id: str
    owner_id: str
    principal_id: str
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class UiSession:
    """A stored dashboard session; ``revoked_at`` is set by sign-out and kept."""

    id: str
    session_hash: str = field(repr=False)
    key_id: str
    owner_id: str
    principal_id: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None


# --- MCP confirmations ---------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class NewConfirmation:
    """A run-now confirmation the MCP server issued: only ``sha256`` of its token is stored.

    Bound to the owner, the key (``""`` for a caller without one), the automation and the version
    it was issued for; usable until ``expires_at`` (the service's clock, passed in).
    """

    id: str
    token_hash: str = field(repr=False)
    owner_id: str
    key_id: str
    automation_id: str
    automation_version: int
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Confirmation:
    """A stored confirmation; ``used_at``/``run_id`` are set by its first redemption and kept."""

    id: str
    token_hash: str = field(repr=False)
    owner_id: str
    key_id: str
    automation_id: str
    automation_version: int
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None
    run_id: str | None


# --- operations ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class NewDeadLetter:
    source: str
    reason: str
    payload: dict[str, Any] = field(default_factory=dict)
    ref_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DeadLetterRecord:
    """Something that failed for good: what (``source``, ``ref_id``), why, and its payload."""

    id: str
    source: str
    ref_id: str | None
    reason: str
    payload: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionLease:
    """Who ticks a partition of the automations until when (speed only; invariant 9)."""

    partition: int
    owner: str
    expires_at: datetime
    epoch: int


# --- the ops dashboard (issue 13) -----------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Percentiles:
    """Nearest-rank percentiles (PostgreSQL's ``percentile_disc``) of ``count`` values, in seconds;
    ``None`` when there were no values. ``ranked``: how many of them were ranked — all (``None``:
    the same as ``count``), or a deterministic sample of about :data:`LATENESS_SAMPLE` of them when a
    window holds more runs than that (see :meth:`RunRepository.window_stats`)."""

    count: int
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    ranked: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AttentionCounts:
    """The runs that need a person (migration 0012's ``runs_attention``): ``unknown`` and ``dead``, every
    one there is whatever its age (until the retention sweeper deletes it); ``failed``, those created
    since ``failed_since``."""

    unknown: int
    dead: int
    failed: int
    failed_since: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class RunWindowStats:
    """Runs created since ``since`` (``by_status``: ``{status: {reason or "": n}}``) and the run rates
    of the last 5 and 60 minutes, counted over runs created since ``least(since, since_60m)``.

    Lateness is of scheduled runs (``origin = schedule``) created since ``since``: fire lateness is
    ``created_at - scheduled_for``, start lateness ``started_at - scheduled_for``.
    """

    since: datetime
    by_status: dict[str, dict[str, int]]
    last_5m: int
    last_60m: int
    fire_lateness: Percentiles
    start_lateness: Percentiles


@dataclass(frozen=True, kw_only=True, slots=True)
class NewAutomationHistory:
    """One change of an automation, recorded in the transaction of the change.

    ``change``: ``created``, ``updated``, ``enabled``, ``disabled`` or ``deleted``; ``before`` /
    ``after``: the changed fields as they were and became (action configs hold secret references,
    never values); ``actor_id`` / ``key_id``: who asked, with which key.
    """

    automation_id: str
    owner_id: str
    change: str
    actor_id: str
    key_id: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AutomationHistoryEntry:
    """A recorded change; ``seq`` grows with insertion order (page with it)."""

    seq: int
    id: str
    automation_id: str
    owner_id: str
    change: str
    actor_id: str
    key_id: str | None
    at: datetime
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True, kw_only=True, slots=True)
class InstanceRecord:
    """An engine's last heartbeat: its roles, each actor's state, when it started and was last seen."""

    id: str
    roles: tuple[str, ...]
    actor_states: dict[str, str]
    started_at: datetime
    seen_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class PurgedRuns:
    """One retention batch over ``runs`` (:meth:`~actwheel.storage.base.RetentionRepository.purge_runs`).

    ``scanned`` runs were read from the creation-time range (at most the batch), ``runs`` of them had
    finished before the cutoff and were deleted with their ``audit`` rows. ``after`` is the cursor of
    the next batch, None once the range before the cutoff is exhausted.
    """

    scanned: int
    runs: int
    audit: int
    after: tuple[datetime, str] | None


@dataclass(frozen=True, kw_only=True, slots=True)
class PurgedOutbox:
    """One retention batch over the outbox: ``scanned`` rows read in id order, ``rows`` of them
    (published before the cutoff) deleted; ``after`` is the next batch's cursor, None at the cutoff."""

    scanned: int
    rows: int
    after: int | None
