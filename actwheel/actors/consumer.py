"""Actors whose mailbox is one or more bus queues.

Intake is declared as :class:`Intake` (queue spec, handler, prefetch). The
actor is ready once every consumer is live; on stop, the subscriptions are
cancelled first (no new deliveries), in-flight handlers get the bus's grace
period, and unacked messages go back to the queue for another instance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from actwheel.actors.base import Actor
from actwheel.bus.base import Bus, Delivery, Handler, Reject, Retry, Subscription, invalid_reason
from actwheel.bus.topology import QueueSpec
from actwheel.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    StorageUnavailable,
    Unauthenticated,
    Unsupported,
)

__all__ = ["PERMISSION", "UNAUTHENTICATED", "ConsumerActor", "Intake", "outcome_of"]

#: The dead-letter reason of a message whose publisher is not a known, active service.
UNAUTHENTICATED = "unauthenticated"
#: The dead-letter reason of a message its publisher may not send (owner, scopes).
PERMISSION = "permission"


@dataclass(frozen=True, slots=True)
class Intake:
    spec: QueueSpec
    handler: Handler
    prefetch: int = 32


class ConsumerActor(Actor):
    """Subscribes to :meth:`intake`, then runs :meth:`work` until asked to stop."""

    def __init__(self, bus: Bus) -> None:
        super().__init__()
        self.bus = bus
        self._subscriptions: list[Subscription] = []

    def intake(self) -> Sequence[Intake]:
        return ()

    async def work(self) -> None:
        """Background work besides consuming; the default waits for stop."""
        await self.stopping.wait()

    async def drain(self) -> None:
        """Finish in-flight work once intake has stopped (subscriptions cancelled)."""

    async def run(self) -> None:
        try:
            for item in self.intake():
                await self.bus.declare_queue(item.spec)
                self._subscriptions.append(await self.bus.consume(item.spec.name, self._logged(item.handler),
                                                                  prefetch=item.prefetch))
            self.mark_ready()
            await self.work()
        finally:
            await self._cancel_subscriptions()  # stop intake first; handlers in flight get the bus grace
            await self.drain()

    def _logged(self, handler: Handler) -> Handler:
        """``handler`` with the message's ids bound to every log line it writes."""
        async def handle(delivery: Delivery) -> None:
            envelope = delivery.envelope
            # The tokens restore what was bound before, as bound_contextvars would, for a third of its
            # cost (it copies the whole context to save the keys first): one bind per message consumed.
            tokens = structlog.contextvars.bind_contextvars(
                actor=self.name, message_id=envelope.id, message_type=envelope.type,
                correlation_id=envelope.correlation_id)
            try:
                await handler(delivery)
            finally:
                structlog.contextvars.reset_contextvars(**tokens)
        return handle

    async def _cancel_subscriptions(self) -> None:
        subscriptions, self._subscriptions = self._subscriptions, []
        for subscription in subscriptions:
            await subscription.cancel()


def outcome_of(exc: Exception) -> Exception:
    """The bus outcome for an error raised while handling a message.

    Input that will never succeed is dead-lettered at once (docs/bus.md): data that does not fit
    its type — a missing or ill-typed field, an invalid trigger or action config — with reason
    ``invalid_message`` and the bare field detail (``data.args.automation_id=None: expected ...``),
    an envelope type the queue does not take with ``unknown_type``; a publisher that is not known
    (``unauthenticated``) or may not ask for this (``permission``); a well-formed request refused as
    it stands (unknown record, lost version race, unsupported combination) with ``rejected``, its
    detail prefixed by the error's class. A database that is briefly unavailable is retried after
    a pause.
    """
    if isinstance(exc, Unauthenticated):
        return Reject(f"{type(exc).__name__}: {exc}", reason=UNAUTHENTICATED)
    if isinstance(exc, PermissionDenied):
        return Reject(f"{type(exc).__name__}: {exc}", reason=PERMISSION)
    if isinstance(exc, InvalidInput):
        return Reject(str(exc), reason=invalid_reason(exc))
    if isinstance(exc, Unsupported | NotFound | Conflict):
        return Reject(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, StorageUnavailable):
        return Retry(delay=1.0)
    return exc
