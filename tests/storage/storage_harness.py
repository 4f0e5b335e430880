"""Helpers for the storage contract tests: the backend under test, sample records, time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actwheel.clock import VirtualClock
from actwheel.storage import Store, Transaction, open_store
from actwheel.storage.records import Automation, NewAutomation, NewRun, Origin, Run

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


@dataclass
class Backend:
    """One database under test: its kind, URL and (SQLite) clock."""

    kind: str
    url: str
    clock: VirtualClock
    _opened: list[Store] = field(default_factory=list)

    def open(self, **kwargs: Any) -> Store:
        """Another store on the same database (its own connections)."""
        if self.kind == "sqlite":
            return open_store(self.url, clock=self.clock, **kwargs)
        return open_store(self.url, **kwargs)

    @asynccontextmanager
    async def opened(self, **kwargs: Any) -> AsyncIterator[Store]:
        store = self.open(**kwargs)
        await store.start()
        try:
            yield store
        finally:
            await store.stop()

    async def pass_time(self, store: Store, seconds: float) -> None:
        """Let ``seconds`` pass on the clock that decides leases: advance the virtual clock
        (SQLite), or wait until the database clock has moved that far (PostgreSQL)."""
        if self.kind == "sqlite":
            self.clock.advance(seconds)
            return
        start = await db_now(store)
        # Nothing signals "the database clock moved": poll it (bounded by ``seconds``).
        while await db_now(store) < start + timedelta(seconds=seconds):  # noqa: ASYNC110
            await asyncio.sleep(seconds / 4)


async def aborted(store: Store, work: Callable[[Transaction], Awaitable[object]]) -> None:
    """Do ``work`` in a transaction, then fail it: nothing it did may remain."""

    async def work_then_fail(tx: Transaction) -> None:
        await work(tx)
        raise _Abort

    with pytest.raises(_Abort):
        await in_transaction(store, work_then_fail)


class _Abort(Exception):
    pass


async def in_transaction(store: Store, work: Callable[[Transaction], Awaitable[object]]) -> None:
    async with store.transaction() as tx:
        await work(tx)


async def db_now(store: Store) -> datetime:
    async with store.transaction() as tx:
        return await tx.now()


def new_automation(**overrides: Any) -> NewAutomation:
    fields: dict[str, Any] = {
        "owner_id": "alice",
        "name": "nightly report",
        "trigger": {"type": "cron", "expression": "0 30 18 ? * MON-FRI", "timezone": "Asia/Shanghai"},
        "action_type": "webhook",
        "action_config": {"url": "https://example.test/hook", "method": "POST"},
        "policy": {"retry": {"max_attempts": 3}, "overlap": "skip"},
        "labels": {"session_id": "s-1", "agent_id": "a-1", "team": "ops"},
        "next_run_at": T0,
    }
    fields.update(overrides)
    return NewAutomation(**fields)


def new_run(automation: Automation | None, key: str = "schedule:2030-01-01T09:00:00+00:00", **overrides: Any) -> NewRun:
    fields: dict[str, Any] = {
        "automation_id": None if automation is None else automation.id,
        "dedupe_key": key,
        "owner_id": "alice" if automation is None else automation.owner_id,
        "action_type": "webhook" if automation is None else automation.action_type,
        "action_config": {} if automation is None else automation.action_config,
        "policy": {} if automation is None else automation.policy,
        "context": {"scheduled_for": key},
        "origin": Origin.SCHEDULE if automation is not None else Origin.REQUEST,
        "scheduled_for": T0,
    }
    fields.update(overrides)
    return NewRun(**fields)


async def make_automation(store: Store, **overrides: Any) -> Automation:
    async with store.transaction() as tx:
        return await tx.automations.create(new_automation(**overrides))


async def make_run(store: Store, automation: Automation | None, key: str = "k1", **overrides: Any) -> Run:
    async with store.transaction() as tx:
        return (await tx.runs.insert(new_run(automation, key, **overrides))).run
