"""Build outbox rows from message records: one envelope codec, one place.

Every state change appends its event here, in the transaction that makes the
change (DESIGN invariant 4). The envelope id is the event id consumers dedupe by.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actwheel.bus.envelope import Envelope, encode
from actwheel.bus.topology import Topology
from actwheel.clock import Clock
from actwheel.messages import ActionCompleted, AutomationChanged, Message, RunsReady, RunTransitioned
from actwheel.storage.records import Automation, NewOutboxMessage, Run

__all__ = ["EventFactory"]

#: Ready run ids per ``run.ready`` message: one message, one consumer transaction.
READY_BATCH = 500


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

    def run_transitioned(self, run: Run, *, summary: str | None = None,
                         error: str | None = None) -> NewOutboxMessage:
        message = RunTransitioned(run_id=run.id, automation_id=run.automation_id, status=run.status.value,
                                  reason=run.reason, attempt=run.attempt, scheduled_for=run.scheduled_for,
                                  action_type=run.action_type, summary=summary, error=error)
        return self.row(self.topology.events, message.routing_key, message, correlation_id=run.id)

    def runs_canceled(self, run_ids: Sequence[str], automation_id: str | None, reason: str) -> list[NewOutboxMessage]:
        """``run.canceled`` for runs canceled by disabling or deleting their automation."""
        rows = []
        for run_id in run_ids:
            message = RunTransitioned(run_id=run_id, automation_id=automation_id, status="CANCELED", reason=reason)
            rows.append(self.row(self.topology.events, message.routing_key, message, correlation_id=run_id))
        return rows

    def action_completed(self, run: Run, result: dict[str, Any]) -> NewOutboxMessage:
        """``action.completed`` for every successful action (routing key ``action.completed``)."""
        message = ActionCompleted(run_id=run.id, automation_id=run.automation_id, action_type=run.action_type,
                                  result=result)
        return self.row(self.topology.events, ActionCompleted.TYPE, message, correlation_id=run.id)
