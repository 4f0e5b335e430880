"""The live stream of one instance: run transitions, step progress and automation changes, fanned out.

One per-instance bus queue (drop-head when full: old news is worthless, the pages re-fetch) feeds
:class:`StreamHub`, which hands each message to every connected client whose caller owns its objects.
Each client has a bounded buffer; a client that falls behind loses its buffer and gets one ``resync``
event instead — the page re-fetches what it shows, nothing is replayed from the database. The hub
caps its clients, subscribes on the first one, and :meth:`StreamHub.close` ends every stream at once
(an open tab must not delay an engine's shutdown).

Ownership: a transition names its run and automation, a step its run, a change its automation. The
hub reads who owns them in one short transaction per message and keeps the answer in a bounded cache
(an id's owner never changes); an object it cannot find (an automation deleted before it was ever
seen) is delivered to nobody. An agent-bound caller hears only of its agent's automations.

New runs: ``run.ready`` names only run ids, so the hub reads those runs (and the automations it has not
seen) in one short transaction per message and sends each still PENDING as a ``run`` event with status
``PENDING`` — a page shows a new run before its first transition. A run that has already moved on by
then is left out: its own transition says more (a late ``run.ready``, re-announced by the recovery
sweeper or delivered after a backlog, must not turn a finished run back to PENDING on a page).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from actwheel.errors import Busy, InvalidMessage, NotAvailable, NotFound
from actwheel.logs import get_logger
from actwheel.messages import (
    AutomationChanged,
    RunsReady,
    RunsTransitioned,
    RunTransition,
    StepProgressed,
    message_from_data,
)
from actwheel.service.caller import Caller
from actwheel.storage.base import Store
from actwheel.storage.records import Automation, Run, RunStatus

__all__ = ["CLIENT_BUFFER", "KEEPALIVE_S", "MAX_CLIENTS", "StreamClient", "StreamEvent", "StreamHub"]

_log = get_logger("actwheel.stream")

#: Connected streams per instance.
MAX_CLIENTS = 100
#: Events buffered per client before it is told to resync.
CLIENT_BUFFER = 256
#: Seconds of silence after which a stream sends a keep-alive comment.
KEEPALIVE_S = 15.0
_OWNERS_MAX = 50_000


class _Cancellable(Protocol):
    async def cancel(self, *, grace: float | None = None) -> None: ...


#: Subscribes ``deliver(type, data)`` to the instance's stream queue; returns the live subscription.
Subscribe = Callable[[Callable[[str, Mapping[str, Any]], Awaitable[None]]], Awaitable[_Cancellable]]


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One server-sent event: ``kind`` is ``run``, ``step``, ``automation`` or ``resync``."""

    id: int
    kind: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Owner:
    owner_id: str
    agent_id: str | None


class StreamClient:
    """One connected stream: iterate it for events; it ends when the hub closes or :meth:`leave` is called."""

    def __init__(self, hub: StreamHub, caller: Caller, buffer: int) -> None:
        self.caller = caller
        self._hub = hub
        self._queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue(maxsize=buffer)
        self.resyncs = 0

    def offer(self, event: StreamEvent) -> None:
        """Buffer ``event``; a full buffer is dropped and replaced by one ``resync``."""
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            while not self._queue.empty():
                self._queue.get_nowait()
            self.resyncs += 1
            self._queue.put_nowait(StreamEvent(event.id, "resync", {"reason": "client fell behind"}))

    def end(self) -> None:
        while self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(None)

    async def next(self, timeout: float) -> StreamEvent | None:  # noqa: ASYNC109 (a keep-alive tick, not a deadline)
        """The next event; raises :class:`TimeoutError` after ``timeout`` s without one; ``None``: the end."""
        return await asyncio.wait_for(self._queue.get(), timeout)

    def leave(self) -> None:
        self._hub.leave(self)


class StreamHub:
    def __init__(self, *, store: Store, subscribe: Subscribe | None, max_clients: int = MAX_CLIENTS,
                 buffer: int = CLIENT_BUFFER, keepalive_s: float = KEEPALIVE_S) -> None:
        self._store = store
        self._subscribe = subscribe
        self.max_clients = max_clients
        self.keepalive_s = keepalive_s
        self._buffer = buffer
        self._clients: set[StreamClient] = set()
        self._subscription: _Cancellable | None = None
        self._subscribing = asyncio.Lock()
        self._ids = itertools.count(1)
        self._owners: OrderedDict[str, _Owner] = OrderedDict()
        self.closed = False

    @property
    def clients(self) -> int:
        return len(self._clients)

    async def join(self, caller: Caller) -> StreamClient:
        """A new client of ``caller``'s events.

        :raises Busy: the instance's cap is reached, or the hub is closed (the engine is stopping)
        :raises NotAvailable: the engine has no bus to listen to
        """
        if self.closed:
            raise Busy("stream", "the engine is stopping; reconnect to another instance or retry shortly")
        if self._subscribe is None:
            raise NotAvailable("stream", "no bus to listen to")
        if len(self._clients) >= self.max_clients:
            raise Busy("stream", f"this instance serves its maximum of {self.max_clients} live streams; "
                       "retry shortly")
        await self._ensure_subscribed()
        client = StreamClient(self, caller, self._buffer)
        self._clients.add(client)
        return client

    def leave(self, client: StreamClient) -> None:
        self._clients.discard(client)

    async def events(self, client: StreamClient) -> AsyncIterator[StreamEvent | None]:
        """``client``'s events, ``None`` for each keep-alive tick, until the hub closes."""
        try:
            while True:
                try:
                    event = await client.next(self.keepalive_s)
                except TimeoutError:
                    yield None
                    continue
                if event is None:
                    return
                yield event
        finally:
            self.leave(client)

    async def close(self) -> None:
        """End every stream now and stop listening. Idempotent."""
        self.closed = True
        for client in list(self._clients):
            client.end()
        self._clients.clear()
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            await subscription.cancel(grace=0)

    async def _ensure_subscribed(self) -> None:
        async with self._subscribing:
            if self._subscription is None and self._subscribe is not None:
                self._subscription = await self._subscribe(self.deliver)

    async def deliver(self, type_: str, data: Mapping[str, Any]) -> None:
        """One bus message: fan it out to the clients that own its objects."""
        if not self._clients:
            return
        try:
            message = message_from_data(type_, data)
        except InvalidMessage:  # not ours to judge: the auditor dead-letters what it cannot read
            return
        if isinstance(message, RunsTransitioned):
            for transition in message.runs:
                owner = await self._run_owner(transition.run_id, transition.automation_id)
                await self._fan_out("run", _transition_item(transition), owner)
        elif isinstance(message, RunsReady):
            await self._announce_ready(message.run_ids)
        elif isinstance(message, StepProgressed):
            await self._fan_out("step", _step_item(message), await self._run_owner(message.run_id, None))
        elif isinstance(message, AutomationChanged):
            owner = await self._automation_owner(message.automation_id)
            await self._fan_out("automation", _change_item(message), owner)

    async def _announce_ready(self, run_ids: tuple[str, ...]) -> None:
        """``run.ready``: each of these runs still PENDING, as a ``run`` event to its owner's clients."""
        for run, owner in await self._pending_runs(run_ids):
            await self._fan_out("run", _pending_item(run), owner)

    async def _pending_runs(self, run_ids: tuple[str, ...]) -> list[tuple[Run, _Owner]]:
        """The runs of ``run_ids`` still PENDING, in message order, each with its owner: the runs and the
        automations not in the cache, read in one short transaction."""
        async with self._store.transaction() as tx:
            found = await tx.runs.get_many(run_ids)
            pending = [run for run in map(found.get, dict.fromkeys(run_ids))
                       if run is not None and run.status is RunStatus.PENDING]
            unseen = sorted({run.automation_id for run in pending
                             if run.automation_id is not None and self._cached(run.automation_id) is None})
            automations = await tx.automations.get_many(unseen) if unseen else {}
        return [(run, self._owner_of_run(run, automations)) for run in pending]

    def _owner_of_run(self, run: Run, automations: Mapping[str, Automation]) -> _Owner:
        """``run``'s automation's owner and agent (from ``automations`` or the cache), else the run's owner
        with no agent; remembered under the run's id too, for its step events."""
        owner = _Owner(run.owner_id, None)  # a run of no stored automation (ad hoc, transient): no agent sees it
        if run.automation_id is not None:
            automation = automations.get(run.automation_id)
            if automation is not None:
                owner = self._remember(automation.id, _Owner(automation.owner_id, automation.agent_id))
            else:
                owner = self._cached(run.automation_id) or owner
        return self._remember(run.id, owner)

    async def _fan_out(self, kind: str, item: dict[str, Any], owner: _Owner | None) -> None:
        if owner is None:
            return
        event = StreamEvent(next(self._ids), kind, item)
        for client in list(self._clients):
            caller = client.caller
            if caller.owner_id == owner.owner_id and (caller.agent_id is None or caller.agent_id == owner.agent_id):
                client.offer(event)

    async def _automation_owner(self, automation_id: str) -> _Owner | None:
        cached = self._cached(automation_id)
        if cached is not None:
            return cached
        async with self._store.transaction() as tx:
            found = await tx.automations.get_many([automation_id])
        automation = found.get(automation_id)
        return None if automation is None else self._remember(automation_id, _Owner(automation.owner_id,
                                                                                     automation.agent_id))

    async def _run_owner(self, run_id: str, automation_id: str | None) -> _Owner | None:
        if automation_id is not None:
            owner = await self._automation_owner(automation_id)
            if owner is not None:
                return owner
        cached = self._cached(run_id)
        if cached is not None:
            return cached
        async with self._store.transaction() as tx:
            try:
                run = await tx.runs.get(run_id)
            except NotFound:
                return None
            automations: Mapping[str, Automation] = {}
            if automation_id is None and run.automation_id is not None and self._cached(run.automation_id) is None:
                # a step names no automation: the run's, read in the same transaction, tells its agent
                automations = await tx.automations.get_many([run.automation_id])
        return self._owner_of_run(run, automations)

    def _cached(self, object_id: str) -> _Owner | None:
        owner = self._owners.get(object_id)
        if owner is not None:
            self._owners.move_to_end(object_id)
        return owner

    def _remember(self, object_id: str, owner: _Owner) -> _Owner:
        self._owners[object_id] = owner
        if len(self._owners) > _OWNERS_MAX:
            self._owners.popitem(last=False)
        return owner


def _transition_item(transition: RunTransition) -> dict[str, Any]:
    """A ``run`` event's data for a transition."""
    return {"run_id": transition.run_id, "automation_id": transition.automation_id, "status": transition.status,
            "reason": transition.reason, "attempt": transition.attempt,
            "scheduled_for": transition.scheduled_for.isoformat() if transition.scheduled_for else None,
            "action_type": transition.action_type, "summary": transition.summary}


def _pending_item(run: Run) -> dict[str, Any]:
    """A ``run`` event's data for a new (or again) PENDING run: the keys of a transition's."""
    return {"run_id": run.id, "automation_id": run.automation_id, "status": RunStatus.PENDING.value,
            "reason": run.reason, "attempt": run.attempt,
            "scheduled_for": run.scheduled_for.isoformat() if run.scheduled_for else None,
            "action_type": run.action_type, "summary": None}


def _step_item(message: StepProgressed) -> dict[str, Any]:
    """A ``step`` event's data."""
    return {"run_id": message.run_id, "step": message.step, "state": message.state}


def _change_item(message: AutomationChanged) -> dict[str, Any]:
    """An ``automation`` event's data."""
    return {"automation_id": message.automation_id, "change": message.change, "version": message.version,
            "next_run_at": message.next_run_at.isoformat() if message.next_run_at else None}
