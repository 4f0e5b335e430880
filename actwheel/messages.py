"""The message contracts: frozen, keyword-only records with past-tense names.

Each record has a ``TYPE`` (the envelope ``type`` and, for events, the
routing key) and converts to and from the envelope's ``data`` object. One
message may carry many items (due automations, ready runs): every hop batches.
``docs/asyncapi.yaml`` documents the same contracts for other languages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from actwheel.errors import InvalidMessage

__all__ = [
    "EVENT_BATCH",
    "QUIET_DUE_ITEMS",
    "QUIET_READY_RUNS",
    "ActionRequested",
    "ActionsCompleted",
    "AutomationChanged",
    "AutomationCommandRequested",
    "AutomationsDue",
    "CompletedAction",
    "DueItem",
    "Message",
    "RunTransition",
    "RunsReady",
    "RunsTransitioned",
    "StepProgressed",
    "message_from_data",
    "parse_instant",
]


#: An ``automation.due`` of at most this many instants (a quiet automation's, not a burst's) is routed
#: ``automation.due.quiet``, and a ``run.ready`` of at most QUIET_READY_RUNS runs ``run.ready.quiet``: each
#: to a queue of its own, so that a burst's big announcements, held by the planner's backlog bound or
#: waiting for the router's slots, do not keep a quiet automation's from being delivered
#: (docs/design.md, "The quiet lane"). The type, the body and the handling are the same on both keys.
QUIET_DUE_ITEMS = 2
QUIET_READY_RUNS = 4


def parse_instant(value: Any, field_name: str) -> datetime:
    """An aware datetime from ISO text, or :class:`InvalidMessage` naming the field."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidMessage(field_name, value, "an ISO-8601 instant with an offset") from None
    else:
        raise InvalidMessage(field_name, value, "an ISO-8601 instant with an offset")
    if parsed.tzinfo is None:
        raise InvalidMessage(field_name, value, "an ISO-8601 instant with an offset")
    return parsed


def _str(data: Mapping[str, Any], name: str, *, optional: bool = False, where: str = "data") -> Any:
    value = data.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidMessage(f"{where}.{name}", value, "a non-empty string")
    return value


def _list(data: Mapping[str, Any], name: str) -> list[Any]:
    value = data.get(name)
    if not isinstance(value, list):
        raise InvalidMessage(f"data.{name}", value, "a list")
    return value


def _dict(data: Mapping[str, Any], name: str, *, where: str = "data") -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise InvalidMessage(f"{where}.{name}", value, "an object")
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    TYPE: ClassVar[str] = ""

    def to_data(self) -> dict[str, Any]:
        return _record_data(self)


def _record_data(record: Any) -> dict[str, Any]:
    """A dataclass record as JSON-ready data (no deep copy: ``dataclasses.asdict`` was 8 % of a busy engine)."""
    return {name: _jsonable(getattr(record, name)) for name in _field_names(type(record))}


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if type(value) in _FIELD_NAMES or is_dataclass(value):
        return _record_data(value)
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class DueItem:
    automation_id: str
    scheduled_for: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class AutomationsDue(Message):
    """The ticker saw these automations come due (routing key ``automation.due``)."""

    TYPE: ClassVar[str] = "automation.due"
    QUIET_KEY: ClassVar[str] = "automation.due.quiet"
    items: tuple[DueItem, ...]

    @property
    def routing_key(self) -> str:
        """``automation.due``, or :attr:`QUIET_KEY` for at most :data:`QUIET_DUE_ITEMS` instants."""
        return self.QUIET_KEY if len(self.items) <= QUIET_DUE_ITEMS else self.TYPE

    def to_data(self) -> dict[str, Any]:
        """As the generic walk writes it, without the walk: the ticker sends every due instant through here."""
        return {"items": [{"automation_id": i.automation_id, "scheduled_for": i.scheduled_for.isoformat()}
                          for i in self.items]}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> AutomationsDue:
        if "automation_id" in data:  # the single-item form {automation_id, scheduled_for}
            return cls(items=(_due_item(data, "data"),))
        items = _list(data, "items")
        return cls(items=tuple(_due_item(item, f"data.items[{i}]") for i, item in enumerate(items)))


def _due_item(item: Any, where: str) -> DueItem:
    if not isinstance(item, dict):
        raise InvalidMessage(where, item, "an object {automation_id, scheduled_for}")
    automation_id = item.get("automation_id")
    if not isinstance(automation_id, str) or not automation_id:
        raise InvalidMessage(f"{where}.automation_id", automation_id, "a non-empty string")
    return DueItem(
        automation_id=automation_id,
        scheduled_for=parse_instant(item.get("scheduled_for"), f"{where}.scheduled_for"),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunsReady(Message):
    """These runs were committed PENDING and may be claimed (routing key ``run.ready``).

    ``not_before``: runs planned ahead of their instant (fire-ahead) may not be claimed before it; the
    router waits for it. Absent (``None``) for runs that may start now; the key is then left out.
    """

    TYPE: ClassVar[str] = "run.ready"
    QUIET_KEY: ClassVar[str] = "run.ready.quiet"
    run_ids: tuple[str, ...]
    not_before: datetime | None = None

    @property
    def routing_key(self) -> str:
        """``run.ready``, or :attr:`QUIET_KEY` for at most :data:`QUIET_READY_RUNS` runs."""
        return self.QUIET_KEY if len(self.run_ids) <= QUIET_READY_RUNS else self.TYPE

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"run_ids": list(self.run_ids)}
        if self.not_before is not None:
            data["not_before"] = self.not_before.isoformat()
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunsReady:
        raw = data.get("not_before")
        not_before = None if raw is None else parse_instant(raw, "data.not_before")
        if "run_id" in data:
            return cls(run_ids=(_str(data, "run_id"),), not_before=not_before)
        ids = _list(data, "run_ids")
        for i, run_id in enumerate(ids):
            if not isinstance(run_id, str) or not run_id:
                raise InvalidMessage(f"data.run_ids[{i}]", run_id, "a non-empty string")
        return cls(run_ids=tuple(ids), not_before=not_before)


#: Entries per batched lifecycle message (``runs.transitioned``, ``actions.completed``).
EVENT_BATCH = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class RunTransition:
    """One run's move to ``status``: an entry of :class:`RunsTransitioned`."""

    run_id: str
    automation_id: str | None
    status: str
    reason: str | None = None
    attempt: int = 0
    scheduled_for: datetime | None = None
    action_type: str | None = None
    summary: str | None = None
    error: str | None = None
    #: A SKIPPED range (a parked overlap): the last of the ``instants`` consecutive instants it records.
    skipped_through: datetime | None = None
    instants: int = 1

    def to_data(self) -> dict[str, Any]:
        """As the generic walk writes it, without the walk: every finished run goes through here."""
        scheduled, through = self.scheduled_for, self.skipped_through
        return {"run_id": self.run_id, "automation_id": self.automation_id, "status": self.status,
                "reason": self.reason, "attempt": self.attempt,
                "scheduled_for": None if scheduled is None else scheduled.isoformat(),
                "action_type": self.action_type, "summary": self.summary, "error": self.error,
                "skipped_through": None if through is None else through.isoformat(), "instants": self.instants}

    @classmethod
    def from_data(cls, data: Any, where: str) -> RunTransition:
        if not isinstance(data, dict):
            raise InvalidMessage(where, data, "an object {run_id, status, ...}")
        scheduled = data.get("scheduled_for")
        attempt = data.get("attempt", 0)
        if not isinstance(attempt, int) or isinstance(attempt, bool):
            raise InvalidMessage(f"{where}.attempt", attempt, "an integer")
        instants, through = data.get("instants", 1), data.get("skipped_through")
        if not isinstance(instants, int) or isinstance(instants, bool) or instants < 1:
            raise InvalidMessage(f"{where}.instants", instants, "an integer ≥ 1")
        return cls(
            run_id=_str(data, "run_id", where=where),
            automation_id=_str(data, "automation_id", optional=True, where=where),
            status=_str(data, "status", where=where),
            reason=_str(data, "reason", optional=True, where=where),
            attempt=attempt,
            scheduled_for=None if scheduled is None else parse_instant(scheduled, f"{where}.scheduled_for"),
            action_type=_str(data, "action_type", optional=True, where=where),
            summary=data.get("summary") if isinstance(data.get("summary"), str) else None,
            error=data.get("error") if isinstance(data.get("error"), str) else None,
            skipped_through=None if through is None else parse_instant(through, f"{where}.skipped_through"),
            instants=instants,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunsTransitioned(Message):
    """Runs moved to ``status`` (routing key ``run.<status lower-case>``).

    One message per committed batch of the same status (at most :data:`EVENT_BATCH`
    entries): a burst of 1,000 finishes is a handful of messages, not 1,000.
    """

    TYPE: ClassVar[str] = "runs.transitioned"
    status: str
    runs: tuple[RunTransition, ...]

    @property
    def routing_key(self) -> str:
        return f"run.{self.status.lower()}"

    def to_data(self) -> dict[str, Any]:
        return {"status": self.status, "runs": [run.to_data() for run in self.runs]}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunsTransitioned:
        status = _str(data, "status")
        runs = tuple(RunTransition.from_data(item, f"data.runs[{i}]") for i, item in enumerate(_list(data, "runs")))
        for i, run in enumerate(runs):
            if run.status != status:
                raise InvalidMessage(f"data.runs[{i}].status", run.status, f"the message's status {status!r}")
        return cls(status=status, runs=runs)


@dataclass(frozen=True, kw_only=True, slots=True)
class AutomationChanged(Message):
    """An automation was created, updated, enabled, disabled, completed or deleted.

    Routing key ``automation.<change>``; tickers apply it to their wheel at once.
    """

    TYPE: ClassVar[str] = "automation.changed"
    automation_id: str
    change: str
    next_run_at: datetime | None = None
    version: int = 0
    #: the trigger's ``type`` after the change (``None``: deleted, completed, or a publisher that predates it)
    trigger_type: str | None = None

    @property
    def routing_key(self) -> str:
        return f"automation.{self.change}"

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> AutomationChanged:
        nxt = data.get("next_run_at")
        version = data.get("version", 0)
        if not isinstance(version, int) or isinstance(version, bool):
            raise InvalidMessage("data.version", version, "an integer")
        trigger_type = data.get("trigger_type")
        if trigger_type is not None and not isinstance(trigger_type, str):
            raise InvalidMessage("data.trigger_type", trigger_type, "a string or null")
        return cls(
            automation_id=_str(data, "automation_id"),
            change=_str(data, "change"),
            next_run_at=None if nxt is None else parse_instant(nxt, "data.next_run_at"),
            version=version,
            trigger_type=trigger_type,
        )

    @property
    def may_listen(self) -> bool:
        """Whether the automation may listen to events after this change: not when it was deleted or
        completed, nor when its trigger is known to be another type (an older publisher's message, which
        does not say, may)."""
        if self.change in ("deleted", "completed"):
            return False
        return self.trigger_type is None or self.trigger_type == "event"


COMMANDS = ("create", "update", "enable", "disable", "delete", "delete_by_session",
            "delete_by_agent", "run_now")


@dataclass(frozen=True, kw_only=True, slots=True)
class AutomationCommandRequested(Message):
    """A publisher asks the planner to change automations (routing key ``command.<command>``).

    ``data`` carries the command's arguments: ``automation`` for create, ``automation_id``
    (+ ``changes``, ``expected_version``) for update/enable/disable/delete/run_now,
    ``session_id`` / ``agent_id`` for the bulk deletes.
    """

    TYPE: ClassVar[str] = "automation.command"
    command: str
    owner_id: str
    args: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> AutomationCommandRequested:
        command = data.get("command")
        if command not in COMMANDS:
            raise InvalidMessage("data.command", command, "one of " + ", ".join(COMMANDS))
        return cls(command=command, owner_id=_str(data, "owner_id"), args=_dict(data, "args"))


@dataclass(frozen=True, kw_only=True, slots=True)
class ActionRequested(Message):
    """An ad hoc action request (routing key ``action.request``).

    Accepts the names ``executor_type`` / ``parameters`` for ``type`` / ``config``.
    """

    TYPE: ClassVar[str] = "action.request"
    type: str
    config: dict[str, Any]
    owner_id: str
    idempotency_key: str | None = None
    dry_run: bool = False
    context: dict[str, Any] = field(default_factory=dict)
    scopes: tuple[str, ...] = ()

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ActionRequested:
        data = dict(data)
        data.setdefault("type", data.pop("executor_type", None))
        data.setdefault("config", data.pop("parameters", {}))
        dry_run = data.get("dry_run", False)
        if not isinstance(dry_run, bool):
            raise InvalidMessage("data.dry_run", dry_run, "true or false")
        scopes = data.get("scopes", [])
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise InvalidMessage("data.scopes", scopes, "a list of strings")
        return cls(
            type=_str(data, "type"),
            config=_dict(data, "config"),
            owner_id=_str(data, "owner_id"),
            idempotency_key=_str(data, "idempotency_key", optional=True),
            dry_run=dry_run,
            context=_dict(data, "context"),
            scopes=tuple(scopes),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class CompletedAction:
    """One successful action: an entry of :class:`ActionsCompleted` (its result, secrets masked)."""

    run_id: str
    automation_id: str | None
    action_type: str
    result: dict[str, Any] = field(default_factory=dict)

    def to_data(self) -> dict[str, Any]:
        """As the generic walk writes it; only the result (any JSON an action returned) is walked."""
        return {"run_id": self.run_id, "automation_id": self.automation_id, "action_type": self.action_type,
                "result": _jsonable(self.result)}

    @classmethod
    def from_data(cls, data: Any, where: str) -> CompletedAction:
        if not isinstance(data, dict):
            raise InvalidMessage(where, data, "an object {run_id, action_type, result}")
        return cls(run_id=_str(data, "run_id", where=where),
                   automation_id=_str(data, "automation_id", optional=True, where=where),
                   action_type=_str(data, "action_type", where=where), result=_dict(data, "result", where=where))


@dataclass(frozen=True, kw_only=True, slots=True)
class ActionsCompleted(Message):
    """Actions finished successfully (routing key ``action.completed``), one message per committed batch."""

    TYPE: ClassVar[str] = "actions.completed"
    ROUTING_KEY: ClassVar[str] = "action.completed"
    actions: tuple[CompletedAction, ...]

    def to_data(self) -> dict[str, Any]:
        return {"actions": [action.to_data() for action in self.actions]}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ActionsCompleted:
        return cls(actions=tuple(CompletedAction.from_data(item, f"data.actions[{i}]")
                                 for i, item in enumerate(_list(data, "actions"))))


@dataclass(frozen=True, kw_only=True, slots=True)
class StepProgressed(Message):
    """A composite step changed state (routing key ``run.step``), for live task lists."""

    TYPE: ClassVar[str] = "run.step"
    run_id: str
    step: str
    state: str
    detail: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> StepProgressed:
        return cls(run_id=_str(data, "run_id"), step=_str(data, "step"), state=_str(data, "state"),
                   detail=_dict(data, "detail"))


_M = TypeVar("_M", bound=Message)

#: Every message type the engine consumes, by envelope ``type``.
MESSAGE_TYPES: Mapping[str, Callable[[Mapping[str, Any]], Message]] = {
    AutomationsDue.TYPE: AutomationsDue.from_data,
    RunsReady.TYPE: RunsReady.from_data,
    RunsTransitioned.TYPE: RunsTransitioned.from_data,
    AutomationChanged.TYPE: AutomationChanged.from_data,
    AutomationCommandRequested.TYPE: AutomationCommandRequested.from_data,
    ActionRequested.TYPE: ActionRequested.from_data,
    StepProgressed.TYPE: StepProgressed.from_data,
    ActionsCompleted.TYPE: ActionsCompleted.from_data,
}


def message_from_data(type_: str, data: Mapping[str, Any]) -> Message:
    """Decode an envelope's ``data`` by its ``type``.

    :raises InvalidMessage: unknown type, or a field that does not fit
    """
    factory = MESSAGE_TYPES.get(type_)
    if factory is None:
        raise InvalidMessage("type", type_, "one of " + ", ".join(sorted(MESSAGE_TYPES)))
    if not isinstance(data, Mapping):
        raise InvalidMessage("data", data, "an object")
    return factory(data)
