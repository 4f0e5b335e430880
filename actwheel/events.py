"""Build outbox rows from message records: one envelope codec, one place.

Every state change appends its event here, in the transaction that makes the
change (DESIGN invariant 4). The envelope id is the event id consumers dedupe by.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import groupby
from typing import Any

import orjson

from actwheel.bus.envelope import Envelope, encode
from actwheel.bus.topology import Topology
from actwheel.clock import Clock
from actwheel.messages import (
    EVENT_BATCH,
    ActionsCompleted,
    AutomationChanged,
    CompletedAction,
    Message,
    RunsReady,
    RunsTransitioned,
    RunTransition,
)
from actwheel.storage.records import Automation, NewOutboxMessage, Run

__all__ = ["EventFactory", "transition_of"]

#: Ready run ids per ``run.ready`` message: one message, one consumer transaction.
READY_BATCH = 500
#: Results are user data of any size: a batched message stops growing past this many bytes of them.
_RESULT_BYTES_PER_MESSAGE = 256 * 1024


def transition_of(run: Run, *, summary: str | None = None, error: str | None = None) -> RunTransition:
    """The lifecycle entry for ``run`` in its current status."""
    return RunTransition(run_id=run.id, automation_id=run.automation_id, status=run.status.value, reason=run.reason,
                         attempt=run.attempt, scheduled_for=run.scheduled_for, action_type=run.action_type,
                         summary=summary, error=error)


class EventFactory:
    """Turns message records into outbox rows for one instance (``source``)."""

    def __init__(self, *, topology: Topology, clock: Clock, source: str) -> None:
        self.topology = topology
        self._clock = clock
        self._source = source

    def row(self, exchange: str, routing_key: str, message: Message,
            correlation_id: str | None = None) -> NewOutboxMessage:
        envelope = Envelope.new(type=message.TYPE, data=message.to_data(), source=self._source,
                                correlation_id=correlation_id, clock=self._clock)
        return NewOutboxMessage(exchange=exchange, routing_key=routing_key, body=encode(envelope),
                                headers={"x-schema-version": 1})

    def runs_ready(self, run_ids: Sequence[str]) -> list[NewOutboxMessage]:
        return [self.row(self.topology.events, RunsReady.TYPE,
                         RunsReady(run_ids=tuple(run_ids[i : i + READY_BATCH])))
                for i in range(0, len(run_ids), READY_BATCH)]

    def automation_changed(self, automation: Automation, change: str) -> NewOutboxMessage:
        message = AutomationChanged(automation_id=automation.id, change=change,
                                    next_run_at=automation.next_run_at, version=automation.version)
        return self.row(self.topology.events, message.routing_key, message)

    def automation_gone(self, automation_id: str, change: str) -> NewOutboxMessage:
        message = AutomationChanged(automation_id=automation_id, change=change)
        return self.row(self.topology.events, message.routing_key, message)

    def runs_transitioned(self, transitions: Sequence[RunTransition]) -> list[NewOutboxMessage]:
        """``run.<status>`` messages: one per status (in first-seen order), at most EVENT_BATCH entries each."""
        rows = []
        order = {status: i for i, status in reversed(list(enumerate(t.status for t in transitions)))}
        by_status = sorted(transitions, key=lambda t: order[t.status])
        for status, group in groupby(by_status, key=lambda t: t.status):
            entries = list(group)
            for i in range(0, len(entries), EVENT_BATCH):
                chunk = tuple(entries[i : i + EVENT_BATCH])
                message = RunsTransitioned(status=status, runs=chunk)
                rows.append(self.row(self.topology.events, message.routing_key, message,
                                     correlation_id=chunk[0].run_id if len(chunk) == 1 else None))
        return rows

    def run_transitioned(self, run: Run, *, summary: str | None = None,
                         error: str | None = None) -> NewOutboxMessage:
        """The ``run.<status>`` message for one run."""
        return self.runs_transitioned([transition_of(run, summary=summary, error=error)])[0]

    def runs_canceled(self, run_ids: Sequence[str], automation_id: str | None, reason: str) -> list[NewOutboxMessage]:
        """``run.canceled`` for runs canceled by disabling or deleting their automation."""
        return self.runs_transitioned([RunTransition(run_id=run_id, automation_id=automation_id, status="CANCELED",
                                                     reason=reason) for run_id in run_ids])

    def actions_completed(self, completed: Sequence[CompletedAction]) -> list[NewOutboxMessage]:
        """``action.completed`` for every successful action, batched (by count and by result size)."""
        return [self.row(self.topology.events, ActionsCompleted.ROUTING_KEY, ActionsCompleted(actions=chunk),
                         correlation_id=chunk[0].run_id if len(chunk) == 1 else None)
                for chunk in _chunks_by_size(completed)]

    def action_completed(self, run: Run, result: dict[str, Any]) -> NewOutboxMessage:
        """``action.completed`` for one successful action."""
        return self.actions_completed([CompletedAction(run_id=run.id, automation_id=run.automation_id,
                                                       action_type=run.action_type, result=result)])[0]


def _chunks_by_size(completed: Sequence[CompletedAction]) -> Iterator[tuple[CompletedAction, ...]]:
    chunk: list[CompletedAction] = []
    size = 0
    for item in completed:
        weight = len(orjson.dumps(item.result, default=str)) if item.result else 0
        if chunk and (len(chunk) >= EVENT_BATCH or size + weight > _RESULT_BYTES_PER_MESSAGE):
            yield tuple(chunk)
            chunk, size = [], 0
        chunk.append(item)
        size += weight
    if chunk:
        yield tuple(chunk)
