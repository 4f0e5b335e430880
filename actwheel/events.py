"""Build outbox rows from message records: one envelope codec, one place.

Every state change appends its event here, in the transaction that makes the
change (docs/design.md invariant 4). The envelope id is the event id consumers dedupe by.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

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
from actwheel.run_context import SKIPPED_KEY, instants_of
from actwheel.storage.records import Automation, NewOutboxMessage, Run, RunStatus

__all__ = ["MAX_EVENT_TEXT", "EventFactory", "transition_of"]

#: Ready run ids per ``run.ready`` message: one message, one consumer transaction.
READY_BATCH = 500
#: Texts and results are user data of any size: a batched message stops growing past this many bytes
#: of them (well under the bus's 1 MiB message limit, whatever the 500 entries' fixed fields add).
_TEXT_BYTES_PER_MESSAGE = 256 * 1024


#: Longest ``summary`` / ``error`` text an event carries (the run row keeps the whole text).
MAX_EVENT_TEXT = 4096
_TRUNCATED = "… (truncated; the run record has the full text)"


def transition_of(run: Run, *, summary: str | None = None, error: str | None = None,
                  status: RunStatus | None = None, reason: str | None = None) -> RunTransition:
    """The lifecycle entry for ``run`` in its current status (long texts cut to MAX_EVENT_TEXT); with
    ``status``, for ``run`` moved to that status with ``reason`` (``run`` being the row before the move)."""
    instants = instants_of(run.context)
    if status is None:
        status, reason = run.status, run.reason
    return RunTransition(run_id=run.id, automation_id=run.automation_id, status=status.value,
                         reason=_bounded(reason), attempt=run.attempt, scheduled_for=run.scheduled_for,
                         action_type=run.action_type, summary=_bounded(summary), error=_bounded(error),
                         skipped_through=_through(run) if instants > 1 else None, instants=instants)


def _through(run: Run) -> datetime | None:
    skipped = run.context.get(SKIPPED_KEY)
    through = skipped.get("through") if isinstance(skipped, Mapping) else None
    return datetime.fromisoformat(through) if isinstance(through, str) else None


def _bounded(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_EVENT_TEXT:
        return text
    return text[: MAX_EVENT_TEXT - len(_TRUNCATED)] + _TRUNCATED


class EventFactory:
    """Turns message records into outbox rows for one instance (``source``)."""

    def __init__(self, *, topology: Topology, clock: Clock, source: str) -> None:
        self.topology = topology
        self._clock = clock
        self._source = source

    @property
    def source(self) -> str:
        """Who publishes: this instance's envelope ``source``."""
        return self._source

    def row(self, exchange: str, routing_key: str, message: Message,
            correlation_id: str | None = None) -> NewOutboxMessage:
        envelope = Envelope.new(type=message.TYPE, data=message.to_data(), source=self._source,
                                correlation_id=correlation_id, clock=self._clock)
        return NewOutboxMessage(exchange=exchange, routing_key=routing_key, body=encode(envelope),
                                headers={"x-schema-version": 1})

    def runs_ready(self, run_ids: Sequence[str], *, not_before: datetime | None = None) -> list[NewOutboxMessage]:
        """``run.ready`` for ``run_ids``, at most READY_BATCH per message; ``not_before``: they were planned
        ahead of that instant (fire-ahead) and may not be claimed before it."""
        messages = [RunsReady(run_ids=tuple(run_ids[i : i + READY_BATCH]), not_before=not_before)
                    for i in range(0, len(run_ids), READY_BATCH)]
        return [self.row(self.topology.events, m.routing_key, m) for m in messages]

    def automation_changed(self, automation: Automation, change: str) -> NewOutboxMessage:
        kind = automation.trigger.get("type")
        message = AutomationChanged(automation_id=automation.id, change=change, next_run_at=automation.next_run_at,
                                    version=automation.version, trigger_type=kind if isinstance(kind, str) else None)
        return self.row(self.topology.events, message.routing_key, message)

    def automation_gone(self, automation_id: str, change: str) -> NewOutboxMessage:
        message = AutomationChanged(automation_id=automation_id, change=change)
        return self.row(self.topology.events, message.routing_key, message)

    def runs_transitioned(self, transitions: Sequence[RunTransition]) -> list[NewOutboxMessage]:
        """``run.<status>`` messages: one per status (in first-seen order), at most EVENT_BATCH entries
        and about ``_TEXT_BYTES_PER_MESSAGE`` of texts each."""
        by_status: dict[str, list[RunTransition]] = {}
        for transition in transitions:
            by_status.setdefault(transition.status, []).append(transition)
        rows = []
        for status, group in by_status.items():
            for chunk in _chunks(group, _transition_weight):
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
                for chunk in _chunks(completed, _result_weight)]

    def action_completed(self, run: Run, result: dict[str, Any]) -> NewOutboxMessage:
        """``action.completed`` for one successful action."""
        return self.actions_completed([CompletedAction(run_id=run.id, automation_id=run.automation_id,
                                                       action_type=run.action_type, result=result)])[0]


_E = TypeVar("_E")


def _chunks(entries: Sequence[_E], weight: Callable[[_E], int]) -> Iterator[tuple[_E, ...]]:
    """``entries`` in order, cut at EVENT_BATCH entries or ``_TEXT_BYTES_PER_MESSAGE`` of weight."""
    chunk: list[_E] = []
    size = 0
    for entry in entries:
        heavy = weight(entry)
        if chunk and (len(chunk) >= EVENT_BATCH or size + heavy > _TEXT_BYTES_PER_MESSAGE):
            yield tuple(chunk)
            chunk, size = [], 0
        chunk.append(entry)
        size += heavy
    if chunk:
        yield tuple(chunk)


def _transition_weight(transition: RunTransition) -> int:
    return sum(len(text) for text in (transition.summary, transition.error, transition.reason) if text)


def _result_weight(completed: CompletedAction) -> int:
    return len(orjson.dumps(completed.result, default=str)) if completed.result else 0
