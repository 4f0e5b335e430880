"""The automation repository: specifications and their moving state (migration 0003),
trigger cursors, and the cancel cascade when an automation is disabled or deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from actwheel.errors import Conflict, IntegrityViolation, InvalidInput, NotFound
from actwheel.run_context import CANCELED_DELETED, CANCELED_DISABLED
from actwheel.storage import _codec as codec
from actwheel.storage._codec import JsonText
from actwheel.storage._rows import (
    automation_of,
    automation_of_spec_and_state,
)
from actwheel.storage._runner import SqlRunner
from actwheel.storage._runs import cancel_waiting_runs
from actwheel.storage.base import AutomationRepository
from actwheel.storage.records import (
    Automation,
    AutomationChanges,
    AutomationStatus,
    CursorAdvance,
    Deleted,
    DueSchedule,
    NewAutomation,
)

__all__ = ["SqlAutomations"]


def _label(labels: Mapping[str, Any], key: str) -> str | None:
    value = labels.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"labels.{key}", value, "a string")
    return value


def _labels(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput("labels", value, "an object of labels")
    return dict(value)


def _optional_text(field: str, value: Any) -> str | None:
    return None if value is None else codec.text_field(field, value)


def _labels_json(field: str, value: Any) -> JsonText:
    return codec.json_field(field, _labels(value))


def _status_value(field: str, value: Any) -> str:
    return codec.enum_value(field, AutomationStatus, value).value


#: How each field of an automation's specification is checked, in this order: every one for a
#: new automation, only those given for a change (None = unchanged). One rule per field for both,
#: so a value that ``create`` refuses ``update`` refuses too.
_SPEC_CHECKS: tuple[tuple[str, Callable[[str, Any], Any]], ...] = (
    ("owner_id", codec.text_field),
    ("name", codec.text_field),
    ("labels", _labels_json),
    ("trigger", codec.json_field),
    ("action_type", codec.text_field),
    ("action_config", codec.json_field),
    ("policy", codec.json_field),
    ("status", _status_value),
)


def _spec_params(spec: NewAutomation | AutomationChanges, *, partial: bool) -> dict[str, Any]:
    """The checked specification columns of a new automation, or of changes (``partial``: a
    field left None stays None). ``session_id`` / ``agent_id`` are the labels with columns of their own."""
    params: dict[str, Any] = {}
    for name, check in _SPEC_CHECKS:
        value = getattr(spec, name)
        params[name] = None if partial and value is None else check(name, value)
    labels = None if params["labels"] is None else _labels(spec.labels)
    params["session_id"] = None if labels is None else _label(labels, "session_id")
    params["agent_id"] = None if labels is None else _label(labels, "agent_id")
    params["next_run_at"] = codec.aware("next_run_at", spec.next_run_at)
    params["end_at"] = codec.aware("end_at", spec.end_at)
    return params


_SPEC_COLUMNS = ("id", "owner_id", "name", "labels", "session_id", "agent_id", "trigger", "action_type",
                 "action_config", "policy", "durable", "end_at", "created_by", "created_by_key")


def _spec_row(params: dict[str, Any]) -> dict[str, Any]:
    return {k: params[k] for k in _SPEC_COLUMNS}


class SqlAutomations(AutomationRepository):
    def __init__(self, sql: SqlRunner, partitions: int) -> None:
        self._sql = sql
        self._partitions = partitions

    async def create(self, new: NewAutomation) -> Automation:
        params = self._create_params(new)
        try:
            row = await self._sql.guarded_row("insert_automation", params)
        except IntegrityViolation as exc:
            if exc.kind == "unique":
                raise Conflict("automation", params["id"], "id already exists") from None
            raise
        state = await self._sql.fetchrow("insert_automation_state", params)
        assert row is not None
        assert state is not None
        return automation_of_spec_and_state(row, state)

    async def create_many(self, news: Sequence[NewAutomation]) -> list[Automation]:
        if not news:
            return []
        rows = [self._create_params(n) for n in news]
        try:
            specs = await self._sql.fetch_rows("insert_automations", [_spec_row(r) for r in rows])
        except IntegrityViolation as exc:
            if exc.kind == "unique":
                raise Conflict("automation", None, "an id of the batch already exists") from None
            raise
        states = await self._sql.fetch_rows("insert_automation_states", [
            {k: r[k] for k in ("id", "partition", "enabled", "status", "next_run_at")} for r in rows])
        spec_by_id = {row["id"]: row for row in specs}
        state_by_id = {row["automation_id"]: row for row in states}
        return [automation_of_spec_and_state(spec_by_id[r["id"]], state_by_id[r["id"]]) for r in rows]

    def _create_params(self, new: NewAutomation) -> dict[str, Any]:
        automation_id = codec.new_id() if new.id is None else codec.text_field("id", new.id)
        params = _spec_params(new, partial=False)
        params.update(id=automation_id, enabled=bool(new.enabled), durable=bool(new.durable),
                      partition=codec.partition_of(automation_id, self._partitions),
                      created_by=_optional_text("created_by", new.created_by),
                      created_by_key=_optional_text("created_by_key", new.created_by_key))
        return params

    async def get(self, automation_id: str, *, owner_id: str | None = None) -> Automation:
        row = await self._sql.fetchrow("get_automation", {"id": automation_id, "owner_id": owner_id})
        if row is None:
            raise NotFound("automation", automation_id)
        return automation_of(row)

    async def get_many(self, automation_ids: Sequence[str]) -> dict[str, Automation]:
        ids = list(dict.fromkeys(codec.ids("automation_ids", automation_ids)))
        if not ids:
            return {}
        return {r["id"]: automation_of(r) for r in await self._sql.fetch("get_automations", {"ids": ids})}

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
        params = {
            "name_contains": None if name_contains is None else codec.text_field("name_contains", name_contains),
            "action_type": None if action_type is None else codec.text_field("action_type", action_type),
            "labels": None if not labels else _label_filter(labels),
            "owner_id": owner_id,
            "session_id": session_id,
            "agent_id": agent_id,
            "status": None if status is None else codec.enum_value("status", AutomationStatus, status).value,
            "enabled": enabled,
            "due_before": codec.aware("due_before", due_before),
            "partitions": codec.partitions(partitions),
            "after_id": after_id,
            "limit": codec.limit(limit),
        }
        return [automation_of(r) for r in await self._sql.fetch("query_automations", params)]

    async def due(
        self, before: datetime, *, partitions: Sequence[int] | None = None, limit: int = 1000
    ) -> list[Automation]:
        params: dict[str, Any] = {"before": codec.aware("before", before), "limit": codec.limit(limit)}
        if partitions is None:
            rows = await self._sql.fetch("due_automations", params)
        else:
            params["partitions"] = codec.partitions(partitions)
            rows = await self._sql.fetch("due_automations_in_partitions", params)
        return [automation_of(r) for r in rows]

    async def event_automations(self, *, after_id: str = "", limit: int = 5000) -> list[Automation]:
        if not isinstance(after_id, str):
            raise InvalidInput("after_id", after_id, "a string ('' for the first page)")
        params = {"after_id": after_id, "limit": codec.limit(limit)}
        return [automation_of(r) for r in await self._sql.fetch("event_automations", params)]

    async def due_schedule(
        self, before: datetime, *, partitions: Sequence[int] | None = None, after_id: str = "", limit: int = 5000
    ) -> list[DueSchedule]:
        if not isinstance(after_id, str):
            raise InvalidInput("after_id", after_id, "a string ('' for the first page)")
        params = {"before": codec.aware("before", before), "partitions": codec.partitions(partitions),
                  "after_id": after_id, "limit": codec.limit(limit)}
        return [DueSchedule(id=r["id"], next_run_at=codec.req_dt(r["next_run_at"]), trigger=codec.loads(r["trigger"]),
                            partition=r["partition"]) for r in await self._sql.fetch("due_schedule", params)]

    async def update(
        self, automation_id: str, expected_version: int, changes: AutomationChanges
    ) -> Automation:
        params = {"id": automation_id, "expected_version": codec.version("expected_version", expected_version)}
        params.update(_change_params(changes))
        await self._lock(automation_id)
        # The version is compared and bumped on the state row first: whoever loses writes nothing.
        state = await self._sql.fetchrow("update_automation_state", params)
        if state is None:
            current = await self.get(automation_id)
            raise Conflict("automation", automation_id, f"version is {current.version}, not {expected_version}")
        row = await self._sql.fetchrow("update_automation", params)
        assert row is not None  # the state row exists, so its automation does (ON DELETE CASCADE)
        return automation_of_spec_and_state(row, state)

    async def rewind_cursor(self, automation_id: str, to: datetime) -> Automation:
        at = codec.aware("to", to)
        if at is None:
            raise InvalidInput("to", None, "an instant with a time zone")
        await self._sql.fetchrow("rewind_cursor", {"id": codec.text_field("automation_id", automation_id), "at": at})
        return await self.get(automation_id)

    async def set_enabled(
        self, automation_id: str, enabled: bool, *, expected_version: int | None = None
    ) -> tuple[Automation, list[str]]:
        params = {
            "id": automation_id,
            "enabled": bool(enabled),
            "expected_version": codec.version("expected_version", expected_version, optional=True),
        }
        await self._lock(automation_id)
        state = await self._sql.fetchrow("set_automation_enabled", params)
        if state is None:
            current = await self.get(automation_id)
            raise Conflict("automation", automation_id, f"version is {current.version}, not {expected_version}")
        row = await self._sql.fetchrow("touch_automation", {"id": automation_id})
        assert row is not None
        canceled = [] if enabled else await cancel_waiting_runs(self._sql, [automation_id], CANCELED_DISABLED)
        return automation_of_spec_and_state(row, state), canceled

    async def _lock(self, automation_id: str) -> None:
        """Lock the specification row before the state row, the order a delete takes them in."""
        if await self._sql.fetchrow("lock_automation", {"id": automation_id}) is None:
            raise NotFound("automation", automation_id)

    async def delete(self, automation_id: str) -> Deleted:
        deleted = await self._delete("delete_automation", {"id": automation_id})
        if not deleted.automation_ids:
            raise NotFound("automation", automation_id)
        return deleted

    async def delete_by_session(self, session_id: str, *, owner_id: str | None = None) -> Deleted:
        params = {"key": codec.text_field("session_id", session_id), "owner_id": _optional_text("owner_id", owner_id)}
        return await self._delete("delete_automations_by_session", params)

    async def delete_by_agent(self, agent_id: str, *, owner_id: str | None = None) -> Deleted:
        params = {"key": codec.text_field("agent_id", agent_id), "owner_id": _optional_text("owner_id", owner_id)}
        return await self._delete("delete_automations_by_agent", params)

    async def delete_by_owner(self, owner_id: str) -> Deleted:
        return await self._delete("delete_automations_by_owner", {"key": codec.text_field("owner_id", owner_id)})

    async def _delete(self, query: str, params: Mapping[str, Any]) -> Deleted:
        ids = [r["id"] for r in await self._sql.fetch(query, params)]
        canceled = await cancel_waiting_runs(self._sql, ids, CANCELED_DELETED)
        return Deleted(automation_ids=tuple(ids), canceled_run_ids=tuple(canceled))

    async def advance_cursor(
        self,
        automation_id: str,
        version: int,
        expected_next_run_at: datetime | None,
        new_next_run_at: datetime | None,
    ) -> bool:
        params = {
            "id": automation_id,
            "version": codec.version("version", version),
            "expected_next_run_at": codec.aware("expected_next_run_at", expected_next_run_at),
            "new_next_run_at": codec.aware("new_next_run_at", new_next_run_at),
        }
        return await self._sql.fetchrow("advance_cursor", params) is not None

    async def advance_cursors(self, advances: Sequence[CursorAdvance]) -> set[str]:
        rows = [_advance_row(i, a) for i, a in enumerate(advances)]
        if not rows:
            return set()
        # A stable lock order keeps concurrent batches from deadlocking each other.
        rows.sort(key=lambda r: r["automation_id"])
        won = await self._sql.fetch_rows("advance_cursors", rows)
        if won:
            self._sql.saw_now(won[0])  # the runs inserted next are stamped with it: no round trip for it
        return {r["id"] for r in won}


def _label_filter(labels: Mapping[str, str]) -> JsonText:
    """The label filter as a JSON object of strings (``labels @> …`` / ``json_each`` in SQL)."""
    if not isinstance(labels, Mapping):
        raise InvalidInput("labels", labels, "an object of label names to string values")
    for key, value in labels.items():
        codec.text_field("labels", key)
        codec.text_field(f"labels.{key}", value)
    return codec.json_field("labels", dict(labels))


def _advance_row(i: int, a: CursorAdvance) -> dict[str, Any]:
    version = a.version
    return {
        "automation_id": codec.text_at("advances", i, "automation_id", a.automation_id),
        "version": (version if type(version) is int and version >= 0
                    else codec.version(f"advances[{i}].version", version)),
        "expected_next_run_at": codec.aware_at("advances", i, "expected_next_run_at", a.expected_next_run_at),
        "new_next_run_at": codec.aware_at("advances", i, "new_next_run_at", a.new_next_run_at),
    }


def _change_params(ch: AutomationChanges) -> dict[str, Any]:
    params = _spec_params(ch, partial=True)
    params.update(clear_next_run_at=bool(ch.clear_next_run_at), clear_end_at=bool(ch.clear_end_at))
    return params
