"""The ops dashboard's repositories (issue 13, migration 0008): automation change history and the
engines' heartbeats."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from actwheel.errors import FieldError, InvalidInput
from actwheel.storage import _codec as codec
from actwheel.storage._runner import Row, SqlRunner
from actwheel.storage.base import AutomationHistoryRepository, InstanceRepository
from actwheel.storage.records import AutomationHistoryEntry, InstanceRecord, NewAutomationHistory

__all__ = ["HISTORY_CHANGES", "SqlAutomationHistory", "SqlInstances"]

#: The changes a history row may record (the table's CHECK says the same).
HISTORY_CHANGES = frozenset({"created", "updated", "enabled", "disabled", "deleted"})


def _json_or_none(value: Any) -> Any:
    return None if value is None else codec.loads(value)


def _history_of(row: Row) -> AutomationHistoryEntry:
    return AutomationHistoryEntry(
        seq=int(row["seq"]), id=row["id"], automation_id=row["automation_id"], owner_id=row["owner_id"],
        change=row["change"], actor_id=row["actor_id"], key_id=row["key_id"], at=codec.req_dt(row["at"]),
        before=_json_or_none(row["before"]), after=_json_or_none(row["after"]))


def _snapshot(field: str, value: Any) -> codec.JsonText | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInput(field, type(value).__name__, "a JSON object or None")
    return codec.json_field(field, dict(value))


def _history_params(new: NewAutomationHistory) -> dict[str, Any]:
    if new.change not in HISTORY_CHANGES:
        raise InvalidInput("change", new.change, "one of " + ", ".join(sorted(HISTORY_CHANGES)))
    return {
        "id": codec.new_id(),
        "automation_id": codec.text_field("automation_id", new.automation_id),
        "owner_id": codec.text_field("owner_id", new.owner_id),
        "change": new.change,
        "actor_id": codec.text_field("actor_id", new.actor_id),
        "key_id": None if new.key_id is None else codec.text_field("key_id", new.key_id),
        "before": _snapshot("before", new.before),
        "after": _snapshot("after", new.after),
    }


class SqlAutomationHistory(AutomationHistoryRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def append(self, new: NewAutomationHistory) -> AutomationHistoryEntry:
        row = await self._sql.fetchrow("insert_automation_history", _history_params(new))
        assert row is not None
        return _history_of(row)

    async def append_many(self, news: Sequence[NewAutomationHistory]) -> None:
        rows = []
        for i, new in enumerate(news):
            try:
                rows.append(_history_params(new))
            except InvalidInput as exc:
                raise InvalidInput.collect([FieldError(f"history[{i}].{e.field}", e.value, e.expected)
                                          for e in exc.errors]) from None
        if rows:
            at = await self._sql.now()
            await self._sql.copy_rows("copy_automation_history", [{**r, "at": at} for r in rows], guarded=False)

    async def for_automation(
        self, automation_id: str, *, owner_id: str | None = None, after_seq: int | None = None, limit: int = 100
    ) -> list[AutomationHistoryEntry]:
        params = {"automation_id": codec.text_field("automation_id", automation_id), "owner_id": owner_id,
                  "after_seq": codec.version("after_seq", after_seq, optional=True), "limit": codec.limit(limit)}
        return [_history_of(r) for r in await self._sql.fetch("automation_history", params)]


def _instance_of(row: Row) -> InstanceRecord:
    return InstanceRecord(
        id=row["id"], roles=tuple(codec.loads(row["roles"])), actor_states=dict(codec.loads(row["actor_states"])),
        started_at=codec.req_dt(row["started_at"]), seen_at=codec.req_dt(row["seen_at"]))


class SqlInstances(InstanceRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def heartbeat(
        self, instance_id: str, *, roles: Sequence[str], actor_states: Mapping[str, str], started_at: datetime
    ) -> InstanceRecord:
        when = codec.aware("started_at", started_at)
        if when is None:
            raise InvalidInput("started_at", None, "an aware instant")
        params = {"id": codec.text_field("instance_id", instance_id),
                  "roles": codec.json_field("roles", [str(r) for r in roles]),
                  "actor_states": codec.json_field("actor_states", {str(k): str(v) for k, v in actor_states.items()}),
                  "started_at": when}
        row = await self._sql.fetchrow("upsert_instance", params)
        assert row is not None
        return _instance_of(row)

    async def all(self) -> list[InstanceRecord]:
        return [_instance_of(r) for r in await self._sql.fetch("all_instances")]

    async def purge(self, before: datetime) -> int:
        return len(await self._sql.fetch("purge_instances", {"before": codec.aware("before", before)}))
