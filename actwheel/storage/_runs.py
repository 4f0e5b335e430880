"""The run repository: idempotent inserts (a bulk fast path, an ``ON CONFLICT`` slow path),
leases with fencing, outcomes, recovery and cancels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from orjson import dumps, loads

from actwheel.errors import Conflict, IntegrityViolation, InvalidInput, NotFound
from actwheel.storage import _codec as codec
from actwheel.storage._codec import MAX_JSON_BYTES as MAX_JSON
from actwheel.storage._codec import MAX_TEXT as _MAX_TEXT
from actwheel.storage._codec import JsonText
from actwheel.storage._rows import (
    ORIGINS,
    STATUSES,
    make_inserted,
    make_run,
    run_of,
)
from actwheel.storage._runner import Row, SqlRunner
from actwheel.storage.base import RunRepository
from actwheel.storage.records import (
    LATENESS_SAMPLE,
    AttentionCounts,
    InsertedRun,
    NewRun,
    Origin,
    Percentiles,
    Run,
    RunOutcome,
    RunStatus,
    RunWindowStats,
)

__all__ = ["SqlRuns", "cancel_waiting_runs", "lateness_sample_mask", "nearest_rank"]


_INSERTABLE = frozenset({RunStatus.PENDING, RunStatus.RETRY_WAIT, RunStatus.SKIPPED, RunStatus.CANCELED})

_FINISHABLE = frozenset(RunStatus) - {RunStatus.RUNNING}

_RECOVERABLE = frozenset(
    {RunStatus.PENDING, RunStatus.RETRY_WAIT, RunStatus.UNKNOWN, RunStatus.FAILED, RunStatus.DEAD}
)

#: The waiting statuses: what a cancel (and a bulk cancel's filter) may touch.
_WAITING = frozenset({RunStatus.PENDING, RunStatus.RETRY_WAIT})

#: Statuses a run may be inserted with that are already final (finished_at is set at insert).
_DONE_ON_INSERT = frozenset({RunStatus.SKIPPED.value, RunStatus.CANCELED.value})

#: member (or its string) → stored string, for the statuses the fast path of a new run takes
_PLAIN_STATUS: dict[Any, str] = {s: s.value for s in (RunStatus.PENDING, RunStatus.SKIPPED, RunStatus.CANCELED)}

_ORIGIN_VALUE: dict[Any, str] = {o: o.value for o in Origin}


def _status_at(kind: str, i: int, value: Any, allowed: frozenset[RunStatus], expected: str) -> RunStatus:
    status = STATUSES.get(value) if isinstance(value, str) else None
    if status is None:
        return codec.enum_value(f"{kind}[{i}].status", RunStatus, value)  # raises, naming the members
    if status not in allowed:
        raise InvalidInput(f"{kind}[{i}].status", value, expected)
    return status


def _origin_at(i: int, value: Any) -> str:
    origin = ORIGINS.get(value) if isinstance(value, str) else None
    return (origin or codec.enum_value(f"runs[{i}].origin", Origin, value)).value


def _new_run_row(i: int, new: NewRun) -> dict[str, Any]:
    row = _plain_new_run_row(new)
    return _checked_new_run_row(i, new) if row is None else row


def _plain_new_run_row(new: NewRun) -> dict[str, Any] | None:
    """The row of the common run (PENDING or SKIPPED, no ``not_before``, plain values), checked
    inline; None for anything else, which :func:`_checked_new_run_row` checks and names."""
    status = _PLAIN_STATUS.get(new.status) if isinstance(new.status, str) else None
    origin = _ORIGIN_VALUE.get(new.origin) if isinstance(new.origin, str) else None
    run_id, automation_id, key, action_type, owner_id = (
        new.id, new.automation_id, new.dedupe_key, new.action_type, new.owner_id)
    scheduled_for = new.scheduled_for
    if (
        status is None or origin is None or new.not_before is not None
        or (scheduled_for is not None and (type(scheduled_for) is not datetime or scheduled_for.tzinfo is not UTC))
        or type(key) is not str or not 0 < len(key) <= _MAX_TEXT
        or type(action_type) is not str or not 0 < len(action_type) <= _MAX_TEXT
        or type(owner_id) is not str or not 0 < len(owner_id) <= _MAX_TEXT
        or (automation_id is not None and (type(automation_id) is not str or not 0 < len(automation_id) <= _MAX_TEXT))
        or (run_id is not None and (type(run_id) is not str or not 0 < len(run_id) <= _MAX_TEXT))
    ):
        return None
    try:
        config, policy, context = dumps(new.action_config), dumps(new.policy), dumps(new.context)
    except TypeError:
        return None
    if len(config) > MAX_JSON or len(policy) > MAX_JSON or len(context) > MAX_JSON:
        return None
    return {
        "id": codec.new_id() if run_id is None else run_id,
        "automation_id": automation_id,
        "dedupe_key": key,
        "scheduled_for": scheduled_for,
        "origin": origin,
        "status": status,
        "reason": new.reason,
        "not_before": None,
        "action_type": action_type,
        # Plain text here (COPY and SQLite take it as it is); the batched-JSON slow path marks
        # it as JSON first (:func:`_as_json_documents`).
        "action_config": config.decode(),
        "policy": policy.decode(),
        "owner_id": owner_id,
        "context": context.decode(),
    }


def _as_json_documents(rows: Sequence[dict[str, Any]]) -> None:
    """Mark the JSON texts of new-run rows as JSON documents (in place), so that a batched
    statement embeds them as JSON, not as strings holding JSON."""
    for row in rows:
        for key in ("action_config", "policy", "context"):
            if type(row[key]) is str:
                row[key] = JsonText(row[key])


def _checked_new_run_row(i: int, new: NewRun) -> dict[str, Any]:
    status = _status_at("runs", i, new.status, _INSERTABLE, "PENDING, RETRY_WAIT, SKIPPED or CANCELED for a new run")
    not_before = codec.aware_at("runs", i, "not_before", new.not_before)
    if status is RunStatus.RETRY_WAIT and not_before is None:
        raise InvalidInput(f"runs[{i}].not_before", None, "an instant for a RETRY_WAIT run")
    automation_id = new.automation_id
    return {
        "id": codec.new_id() if new.id is None else codec.text_at("runs", i, "id", new.id),
        "automation_id": None if automation_id is None else codec.text_at("runs", i, "automation_id", automation_id),
        "dedupe_key": codec.text_at("runs", i, "dedupe_key", new.dedupe_key),
        "scheduled_for": codec.aware_at("runs", i, "scheduled_for", new.scheduled_for),
        "origin": _origin_at(i, new.origin),
        "status": status.value,
        "reason": new.reason,
        "not_before": not_before,
        "action_type": codec.text_at("runs", i, "action_type", new.action_type),
        "action_config": codec.json_at("runs", i, "action_config", new.action_config),
        "policy": codec.json_at("runs", i, "policy", new.policy),
        "owner_id": codec.text_at("runs", i, "owner_id", new.owner_id),
        "context": codec.json_at("runs", i, "context", new.context),
    }


def _inserted_run(sent: Mapping[str, Any], returned: Row, new: NewRun | None = None) -> Run:
    """The run just inserted, from what was sent (already checked) and the times the database set.

    With ``new`` (the caller's record), its JSON values are reused instead of decoding what was sent.
    """
    if new is not None:
        config, policy, context = new.action_config, new.policy, new.context
    else:
        loads = codec.loads
        config, policy, context = loads(sent["action_config"]), loads(sent["policy"]), loads(sent["context"])
    return make_run(
        sent["id"], sent["automation_id"], sent["dedupe_key"], sent["scheduled_for"],
        ORIGINS[sent["origin"]], STATUSES[sent["status"]], sent["reason"],
        0, sent["not_before"], None, None, 0,  # attempt, not_before, lease owner / expiry / epoch
        sent["action_type"], config, policy, sent["owner_id"], context,
        None, None,  # result, error
        codec.req_dt(returned["created_at"]), codec.req_dt(returned["updated_at"]),
        None, codec.to_dt(returned["finished_at"]),  # started_at, finished_at
    )


def _fresh_run(row: Mapping[str, Any], new: NewRun) -> Run:
    """:func:`_inserted_run` for a row of the bulk insert: its times are the transaction's ``now``
    (datetimes already), its JSON values the caller's."""
    return make_run(
        row["id"], row["automation_id"], row["dedupe_key"], row["scheduled_for"],
        ORIGINS[row["origin"]], STATUSES[row["status"]], row["reason"],
        0, row["not_before"], None, None, 0,
        row["action_type"], new.action_config, new.policy, row["owner_id"], new.context,
        None, None, row["created_at"], row["updated_at"], None, row["finished_at"],
    )


def _values(value: Any) -> list[float]:
    """A lateness array of the window query: PostgreSQL answers an array (None when empty), SQLite
    JSON text."""
    if value is None:
        return []
    return [float(v) for v in (loads(value) if isinstance(value, str | bytes) else value)]


def nearest_rank(values: Sequence[float], count: int, *, sampled: bool) -> Percentiles:
    """p50 / p95 / p99 of ``values`` by nearest rank (PostgreSQL's ``percentile_disc``: the smallest
    value whose rank reaches p·n); ``count``: every value of the window, ``values`` the ranked ones."""
    ranked = sorted(values)
    if not ranked:
        return Percentiles(count=count, ranked=0 if sampled else None)
    p50, p95, p99 = (ranked[max(0, math.ceil(q * len(ranked)) - 1)] for q in (0.5, 0.95, 0.99))
    return Percentiles(count=count, p50=p50, p95=p95, p99=p99, ranked=len(ranked) if sampled else None)


def lateness_sample_mask(runs_in_window: int) -> int:
    """The sample of the lateness percentiles, as a bit mask on a per-run hash (a run is ranked when
    ``hash & mask == 0``): 0 (every run) while the window holds fewer than twice
    :data:`LATENESS_SAMPLE` runs, else 1 in 2^k runs, 2^k the largest power of two at most
    ``runs_in_window / LATENESS_SAMPLE``: one to two ``LATENESS_SAMPLE`` of the window's runs."""
    ratio = runs_in_window // LATENESS_SAMPLE
    return 0 if ratio < 2 else (1 << (ratio.bit_length() - 1)) - 1


def _lateness(rows: Sequence[Row], kind: str, *, sampled: bool) -> Percentiles:
    """The ``fire`` or ``start`` percentiles of the window query's rows (one per status and reason)."""
    values = [v for row in rows for v in _values(row[kind])]
    return nearest_rank(values, sum(int(row[f"{kind}_n"] or 0) for row in rows), sampled=sampled)


def _run_key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """The dedupe key of a run: (automation, key) or, for ad hoc runs, ("", owner, key)."""
    if row["automation_id"] is None:
        return ("", row["owner_id"], row["dedupe_key"])
    return (row["automation_id"], "", row["dedupe_key"])


def _outcome_row(i: int, o: RunOutcome) -> dict[str, Any]:
    status = _status_at("outcomes", i, o.status, _FINISHABLE, "a status other than RUNNING")
    not_before = codec.aware_at("outcomes", i, "not_before", o.not_before)
    if status is RunStatus.RETRY_WAIT and not_before is None:
        raise InvalidInput(f"outcomes[{i}].not_before", None, "an instant for RETRY_WAIT")
    epoch = o.epoch
    return {
        "run_id": codec.text_at("outcomes", i, "run_id", o.run_id),
        "owner": codec.text_at("outcomes", i, "owner", o.owner),
        "epoch": epoch if type(epoch) is int and epoch >= 0 else codec.version(f"outcomes[{i}].epoch", epoch),
        "status": status.value,
        "reason": o.reason,
        "result": None if o.result is None else codec.json_at("outcomes", i, "result", o.result),
        "error": None if o.error is None else codec.json_at("outcomes", i, "error", o.error),
        "not_before": not_before,
    }


async def cancel_waiting_runs(sql: SqlRunner, automation_ids: list[str], reason: str) -> list[str]:
    """PENDING / RETRY_WAIT runs of ``automation_ids`` → CANCELED(reason), ids sorted: the one
    statement behind :meth:`SqlRuns.cancel_waiting` and the disable / delete cascades of
    :class:`SqlAutomations`, so the rule of what a cancel touches lives once."""
    if not automation_ids:
        return []
    params = {"automation_ids": automation_ids, "reason": reason}
    return sorted(r["id"] for r in await sql.fetch("cancel_waiting_runs_of", params))


class SqlRuns(RunRepository):
    def __init__(self, sql: SqlRunner) -> None:
        self._sql = sql

    async def insert(self, new: NewRun) -> InsertedRun:
        return (await self.insert_many([new]))[0]

    async def insert_many(self, news: Sequence[NewRun]) -> list[InsertedRun]:
        rows = [_new_run_row(i, n) for i, n in enumerate(news)]
        if not rows:
            return []
        # Sorted by key so that concurrent batches take unique-index locks in one order.
        ordered = sorted(rows, key=_run_key)
        if await self._insert_fresh(ordered):
            return [make_inserted(_fresh_run(r, n), True) for r, n in zip(rows, news, strict=True)]
        return await self._insert_or_find(rows, ordered)

    async def _insert_fresh(self, ordered: list[dict[str, Any]]) -> bool:
        """The fast path: a bulk insert that holds only if every key is new (the common case).
        False (and nothing written) when a key or an id already exists."""
        now = await self._sql.now()
        plain = True
        for row in ordered:
            row["created_at"] = row["updated_at"] = now
            if row["status"] in _DONE_ON_INSERT:
                row["finished_at"] = now
                plain = False
            else:
                row["finished_at"] = None
                plain = plain and row["status"] == "PENDING" and row["reason"] is None and row["not_before"] is None
        try:
            await self._sql.copy_rows("copy_pending_runs" if plain else "copy_runs", ordered)
        except IntegrityViolation as exc:
            if exc.kind != "unique":
                raise
            return False
        return True

    async def _insert_or_find(self, rows: list[dict[str, Any]], ordered: list[dict[str, Any]]) -> list[InsertedRun]:
        """The slow path: insert what is new (``ON CONFLICT DO NOTHING``), read back what exists."""
        by_id = {r["id"]: r for r in rows}
        _as_json_documents(ordered)
        inserted = await self._sql.fetch_rows("insert_runs", ordered)
        created = {r["id"]: _inserted_run(by_id[r["id"]], r) for r in inserted}
        by_key = {_run_key({"automation_id": r.automation_id, "owner_id": r.owner_id, "dedupe_key": r.dedupe_key}): r
                  for r in created.values()}
        missing = [r for r in rows if _run_key(r) not in by_key]
        by_key.update(await self._existing(missing))
        return [self._inserted(r, by_key, created) for r in rows]

    @staticmethod
    def _inserted(
        row: Mapping[str, Any], by_key: Mapping[tuple[str, str, str], Run], created: Mapping[str, Run]
    ) -> InsertedRun:
        run = by_key.get(_run_key(row))
        if run is None:  # skipped by ON CONFLICT yet no row for its key: the id itself was taken
            raise Conflict("run", row["id"], "id already exists")
        return InsertedRun(run=run, created=row["id"] in created)

    async def _existing(self, rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], Run]:
        scheduled = [{"automation_id": r["automation_id"], "dedupe_key": r["dedupe_key"]}
                     for r in rows if r["automation_id"] is not None]
        adhoc = [{"owner_id": r["owner_id"], "dedupe_key": r["dedupe_key"]} for r in rows if r["automation_id"] is None]
        found: list[Row] = []
        if scheduled:
            found += await self._sql.fetch_rows("runs_by_keys", scheduled)
        if adhoc:
            found += await self._sql.fetch_rows("adhoc_runs_by_keys", adhoc)
        return {_run_key(r): run_of(r) for r in found}

    async def get(self, run_id: str, *, owner_id: str | None = None) -> Run:
        row = await self._sql.fetchrow("get_run", {"id": run_id, "owner_id": owner_id})
        if row is None:
            raise NotFound("run", run_id)
        return run_of(row)

    async def get_many(self, run_ids: Sequence[str]) -> dict[str, Run]:
        ids = list(dict.fromkeys(codec.ids("run_ids", run_ids)))
        if not ids:
            return {}
        return {r["id"]: run_of(r) for r in await self._sql.fetch("get_runs", {"ids": ids})}

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
        cursor_at, cursor_id = (None, None) if older_than is None else older_than
        params = {
            "automation_id": automation_id,
            "statuses": None if statuses is None else [
                codec.enum_value(f"statuses[{i}]", RunStatus, s).value for i, s in enumerate(statuses)
            ],
            "owner_id": owner_id,
            "created_after": codec.aware("created_after", created_after),
            "created_before": codec.aware("created_before", created_before),
            "action_type": None if action_type is None else codec.text_field("action_type", action_type),
            "origin": None if origin is None else codec.enum_value("origin", Origin, origin).value,
            "cursor_at": codec.aware("older_than", cursor_at),
            "cursor_id": None if cursor_id is None else codec.text_field("older_than", cursor_id),
            "limit": codec.limit(limit),
        }
        if (params["cursor_at"] is None) != (params["cursor_id"] is None):
            raise InvalidInput("older_than", older_than, "a (created_at, id) pair")
        name = ("query_runs_of_automation" if automation_id is not None
                else "query_runs_of_owner" if owner_id is not None else "query_runs")
        return [run_of(r) for r in await self._sql.fetch(name, params)]

    async def window_stats(
        self, since: datetime, *, now: datetime, owner_id: str | None = None
    ) -> RunWindowStats:
        start, at = codec.aware("since", since), codec.aware("now", now)
        if start is None or at is None:
            raise InvalidInput("since" if start is None else "now", None, "an aware instant")
        owner: dict[str, Any] = {} if owner_id is None else {"owner_id": codec.text_field("owner_id", owner_id)}
        prefix = "" if owner_id is None else "owner_"
        mask = lateness_sample_mask(await self._window_size(prefix, owner, start, at))
        params = {**owner, "since": start, "since_5m": at - timedelta(minutes=5),
                  "since_60m": at - timedelta(minutes=60), "sample_mask": mask}
        rows = await self._sql.fetch(prefix + "run_window_counts", params)
        by_status: dict[str, dict[str, int]] = {}
        for row in rows:
            if int(row["n"] or 0):
                by_status.setdefault(row["status"], {})[row["reason"] or ""] = int(row["n"])
        return RunWindowStats(
            since=start, by_status=by_status,
            last_5m=sum(int(r["last_5m"] or 0) for r in rows), last_60m=sum(int(r["last_60m"] or 0) for r in rows),
            fire_lateness=_lateness(rows, "fire", sampled=mask > 0),
            start_lateness=_lateness(rows, "start", sampled=mask > 0))

    async def _window_size(self, prefix: str, owner: dict[str, Any], since: datetime, now: datetime) -> int:
        """The runs created since ``since``, estimated from those of its last hour (exact for a window
        of an hour or less): one index range, before the pass that the sample it picks is for."""
        recent = max(since, now - timedelta(hours=1))
        row = await self._sql.fetchrow(prefix + "run_window_size", {**owner, "recent": recent})
        counted = 0 if row is None else int(row["n"] or 0)
        span, window = (now - recent).total_seconds(), (now - since).total_seconds()
        return counted if recent == since or span <= 0 else round(counted * window / span)

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
        wanted = [codec.enum_value(f"statuses[{i}]", RunStatus, s) for i, s in enumerate(statuses)]
        if not wanted or not set(wanted) <= _WAITING:
            raise InvalidInput("statuses", [str(s) for s in statuses], "PENDING and/or RETRY_WAIT")
        params = {
            "statuses": sorted(s.value for s in set(wanted)),
            "owner_id": None if owner_id is None else codec.text_field("owner_id", owner_id),
            "automation_id": None if automation_id is None else codec.text_field("automation_id", automation_id),
            "created_after": codec.aware("created_after", created_after),
            "created_before": codec.aware("created_before", created_before),
            "action_type": None if action_type is None else codec.text_field("action_type", action_type),
            "origin": None if origin is None else codec.enum_value("origin", Origin, origin).value,
            "limit": codec.limit(limit),
        }
        return [r["id"] for r in await self._sql.fetch("waiting_run_ids", params)]

    async def attention_counts(self, *, failed_since: datetime, owner_id: str | None = None) -> AttentionCounts:
        since = codec.aware("failed_since", failed_since)
        if since is None:
            raise InvalidInput("failed_since", None, "an aware instant")
        params: dict[str, Any] = {"failed_since": since}
        if owner_id is not None:
            params["owner_id"] = codec.text_field("owner_id", owner_id)
        row = await self._sql.fetchrow("owner_attention_counts" if owner_id is not None else "attention_counts",
                                       params)
        assert row is not None
        return AttentionCounts(unknown=int(row["unknown"] or 0), dead=int(row["dead"] or 0),
                               failed=int(row["failed"] or 0), failed_since=since)

    async def resolve_unknown(
        self, run_id: str, status: RunStatus, reason: str, *, owner_id: str | None = None
    ) -> Run | None:
        target = codec.enum_value("status", RunStatus, status)
        if target not in (RunStatus.SUCCEEDED, RunStatus.FAILED):
            raise InvalidInput("status", status, "SUCCEEDED or FAILED (the verdict on an UNKNOWN run)")
        params = {"id": codec.text_field("run_id", run_id), "status": target.value,
                  "reason": codec.text_field("reason", reason), "owner_id": owner_id}
        row = await self._sql.fetchrow("resolve_unknown_run", params)
        return None if row is None else run_of(row)

    async def claim(self, run_id: str, owner: str, lease_s: float) -> Run | None:
        params = {"id": run_id, "owner": codec.text_field("owner", owner),
                  "lease_s": codec.positive("lease_s", lease_s)}
        row = await self._sql.fetchrow("claim_run", params)
        return None if row is None else run_of(row)

    async def claim_many(self, run_ids: Sequence[str], owner: str, lease_s: float) -> list[Run]:
        ids = codec.ids("run_ids", run_ids)
        if not ids:
            return []
        params = {"ids": ids, "owner": codec.text_field("owner", owner), "lease_s": codec.positive("lease_s", lease_s)}
        return [run_of(r) for r in await self._sql.fetch("claim_runs", params)]

    async def claim_next(self, owner: str, lease_s: float, limit: int) -> list[Run]:
        params = {
            "owner": codec.text_field("owner", owner),
            "lease_s": codec.positive("lease_s", lease_s),
            "limit": codec.limit(limit),
        }
        return [run_of(r) for r in await self._sql.fetch("claim_next_runs", params)]

    async def renew(self, run_id: str, owner: str, epoch: int, lease_s: float) -> bool:
        params = {
            "id": run_id,
            "owner": owner,
            "epoch": codec.version("epoch", epoch),
            "lease_s": codec.positive("lease_s", lease_s),
        }
        return await self._sql.fetchrow("renew_lease", params) is not None

    async def renew_many(self, leases: Sequence[tuple[str, int]], owner: str, lease_s: float) -> set[str]:
        checked = sorted((codec.text_field("run_id", r), codec.version("epoch", e)) for r, e in leases)
        rows = [{"run_id": run_id, "epoch": epoch} for run_id, epoch in checked]
        if not rows:
            return set()
        params = {"owner": codec.text_field("owner", owner), "lease_s": codec.positive("lease_s", lease_s)}
        return {r["id"] for r in await self._sql.fetch_rows("renew_leases", rows, params)}

    async def count_backlog(self, limit: int) -> int:
        row = await self._sql.fetchrow("count_backlog", {"limit": codec.limit(limit)})
        return int(row["n"]) if row is not None else 0

    async def finish(self, outcome: RunOutcome) -> bool:
        return outcome.run_id in await self.finish_many([outcome])

    async def finish_many(self, outcomes: Sequence[RunOutcome]) -> set[str]:
        rows = sorted((_outcome_row(i, o) for i, o in enumerate(outcomes)), key=lambda r: r["run_id"])
        if not rows:
            return set()
        return {r["id"] for r in await self._sql.fetch_rows("finish_runs", rows)}

    async def expired_leases(self, limit: int = 100) -> list[Run]:
        return [run_of(r) for r in await self._sql.fetch("expired_leases", {"limit": codec.limit(limit)})]

    async def recover_expired(
        self,
        run_id: str,
        epoch: int,
        status: RunStatus,
        *,
        reason: str | None = None,
        not_before: datetime | None = None,
    ) -> Run | None:
        target = codec.enum_value("status", RunStatus, status)
        if target not in _RECOVERABLE:
            raise InvalidInput("status", status, "PENDING, RETRY_WAIT, UNKNOWN, FAILED or DEAD")
        when = codec.aware("not_before", not_before)
        if target is RunStatus.RETRY_WAIT and when is None:
            raise InvalidInput("not_before", None, "an instant for RETRY_WAIT")
        params = {"id": run_id, "epoch": codec.version("epoch", epoch), "status": target.value,
                  "reason": reason, "not_before": when}
        row = await self._sql.fetchrow("recover_expired", params)
        return None if row is None else run_of(row)

    async def stale_pending(self, older_than_s: float, limit: int = 100) -> list[Run]:
        if isinstance(older_than_s, bool) or not isinstance(older_than_s, int | float) or older_than_s < 0:
            raise InvalidInput("older_than_s", older_than_s, "a non-negative number of seconds")
        params = {"older_than_s": float(older_than_s), "limit": codec.limit(limit)}
        return [run_of(r) for r in await self._sql.fetch("stale_pending", params)]

    async def promote_due_retries(self, limit: int = 100) -> list[Run]:
        return [run_of(r) for r in await self._sql.fetch("promote_due_retries", {"limit": codec.limit(limit)})]

    async def cancel(self, run_id: str, reason: str) -> bool:
        params = {"id": run_id, "reason": codec.text_field("reason", reason)}
        return await self._sql.fetchrow("cancel_run", params) is not None

    async def cancel_waiting(self, automation_id: str, reason: str) -> list[str]:
        automation_id = codec.text_field("automation_id", automation_id)
        return await cancel_waiting_runs(self._sql, [automation_id], codec.text_field("reason", reason))

    async def withdraw_ahead(self, automation_id: str, reason: str) -> list[Run]:
        params = {"automation_id": codec.text_field("automation_id", automation_id),
                  "reason": codec.text_field("reason", reason)}
        return sorted((run_of(r) for r in await self._sql.fetch("withdraw_ahead_runs", params)),
                      key=lambda r: (r.scheduled_for or r.created_at, r.id))

    async def going_before(self, run_ids: Sequence[str]) -> dict[str, int]:
        ids = codec.ids("run_ids", run_ids)
        if not ids:
            return {}
        return {r["id"]: int(r["going"]) for r in await self._sql.fetch("runs_going_before", {"ids": ids})}

    async def active_automation_ids(self, automation_ids: Sequence[str]) -> set[str]:
        ids = codec.ids("automation_ids", automation_ids)
        if not ids:
            return set()
        return {r["automation_id"] for r in await self._sql.fetch("active_automation_ids", {"ids": ids})}

    async def latest_of(self, automation_ids: Sequence[str], *, owner_id: str | None = None) -> dict[str, Run]:
        ids = list(dict.fromkeys(codec.ids("automation_ids", automation_ids)))
        if not ids:
            return {}
        params = {"ids": ids, "owner_id": None if owner_id is None else codec.text_field("owner_id", owner_id)}
        return {r["automation_id"]: run_of(r) for r in await self._sql.fetch("latest_runs_of", params)}
