"""Runtime-only automations (``durable: false``): held in memory by the instance that accepted them.

A transient automation is never written to the ``automations`` table. This
registry holds it (as an :class:`~actwheel.storage.records.Automation` record
with ``durable=False``, ``partition=-1``, an id starting ``tr_``) and the
instance's wheel ticker keeps its timer. It is lost when the process stops and
no other instance sees it: it is meant for internal watchers, not for
schedules that must survive. Its runs are ordinary rows (see
:mod:`actwheel.actors.transient`), so exactly-once per instant still comes
from the database.

The registry is plain data: no IO. Its :attr:`TransientRegistry.lock`
serialises the changes that also write runs (firing, disabling, deleting) so
that a disable can never miss a run being inserted for the same automation.
:func:`cancel_transient_runs` is the one write those share, in the caller's
transaction: the service's disable and delete and the timers' end of a
schedule both cancel a transient automation's waiting runs through it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from actwheel.clock import Clock
from actwheel.errors import Conflict, InvalidInput, NotFound
from actwheel.storage.records import Automation, AutomationStatus

if TYPE_CHECKING:
    from actwheel.events import EventFactory
    from actwheel.storage.base import Transaction

__all__ = ["DEFAULT_CAPACITY", "TRANSIENT_PREFIX", "TransientRegistry", "cancel_transient_runs", "is_transient_id"]

#: Ids of transient automations start with this, so a run's ``automation_id`` tells where it came from.
TRANSIENT_PREFIX = "tr_"
#: How many transient automations one instance holds at most (they live in its memory).
DEFAULT_CAPACITY = 10_000

Watcher = Callable[[str], None]


def is_transient_id(automation_id: str) -> bool:
    return automation_id.startswith(TRANSIENT_PREFIX)


class TransientRegistry:
    """The transient automations of this instance, by id; bounded by ``capacity``."""

    def __init__(self, *, clock: Clock, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise InvalidInput("capacity", capacity, "at least 1")
        self._clock = clock
        self.capacity = capacity
        self._items: dict[str, Automation] = {}
        self._watchers: list[Watcher] = []
        #: Held while a change also writes runs (fire, disable, delete): they never interleave.
        self.lock = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, automation_id: object) -> bool:
        return automation_id in self._items

    def new_id(self) -> str:
        """``tr_`` + creation milliseconds + randomness: later ids sort later, like the stored ones."""
        return f"{TRANSIENT_PREFIX}{self._clock.now_ms():012x}{secrets.token_hex(8)}"

    def add(self, automation: Automation) -> Automation:
        """:raises InvalidInput: naming ``durable`` when the registry is full"""
        if len(self._items) >= self.capacity and automation.id not in self._items:
            raise InvalidInput("durable", False, f"true, or fewer non-durable automations: this instance holds "
                               f"at most {self.capacity} (delete some first)")
        self._items[automation.id] = automation
        self._notify(automation.id)
        return automation

    def get(self, automation_id: str) -> Automation:
        """:raises NotFound: no transient automation ``automation_id`` here"""
        found = self._items.get(automation_id)
        if found is None:
            raise NotFound("automation", automation_id)
        return found

    def find(self, automation_id: str) -> Automation | None:
        return self._items.get(automation_id)

    def query(self, *, owner_id: str | None = None, session_id: str | None = None, agent_id: str | None = None,
              status: AutomationStatus | None = None, enabled: bool | None = None,
              after_id: str | None = None, limit: int = 100) -> list[Automation]:
        """Matching every given filter, ordered by id (as the store's query)."""
        found = [a for a in self._items.values()
                 if (owner_id is None or a.owner_id == owner_id) and (session_id is None or a.session_id == session_id)
                 and (agent_id is None or a.agent_id == agent_id) and (status is None or a.status is status)
                 and (enabled is None or a.enabled == enabled) and (after_id is None or a.id > after_id)]
        return sorted(found, key=lambda a: a.id)[:limit]

    def check_version(self, automation_id: str, expected_version: int | None) -> Automation:
        """The automation, if its version is ``expected_version`` (``None``: any).

        :raises NotFound: no such transient automation
        :raises Conflict: the current version is another
        """
        current = self.get(automation_id)
        if expected_version is not None and current.version != expected_version:
            raise Conflict("automation", automation_id,
                           f"version {expected_version} expected, the current version is {current.version}")
        return current

    def change(self, automation_id: str, expected_version: int | None, **changes: Any) -> Automation:
        """Apply ``changes`` (Automation fields) and bump the version: optimistic locking in memory.

        :raises NotFound: no such transient automation
        :raises Conflict: ``expected_version`` is given and is not the current version
        """
        current = self.check_version(automation_id, expected_version)
        updated = dataclasses.replace(current, **changes, version=current.version + 1,
                                      updated_at=self._clock.now())
        self._items[automation_id] = updated
        self._notify(automation_id)
        return updated

    def advance(self, automation_id: str, version: int, expected_next_run_at: datetime | None,
                new_next_run_at: datetime | None) -> bool:
        """Compare-and-set the cursor past fired instants (version unchanged); ``None``: the schedule
        ended and the automation goes. False when it was edited, moved on or removed meanwhile."""
        current = self._items.get(automation_id)
        if current is None or current.version != version or current.next_run_at != expected_next_run_at:
            return False
        if new_next_run_at is None:
            del self._items[automation_id]
        else:
            self._items[automation_id] = dataclasses.replace(current, next_run_at=new_next_run_at)
        self._notify(automation_id)
        return True

    def remove(self, automation_id: str) -> Automation:
        """:raises NotFound: no such transient automation"""
        removed = self.get(automation_id)
        del self._items[automation_id]
        self._notify(automation_id)
        return removed

    def discard(self, automation_id: str) -> Automation | None:
        """Remove it if it is still here (a schedule that ended meanwhile is already gone)."""
        removed = self._items.pop(automation_id, None)
        if removed is not None:
            self._notify(automation_id)
        return removed

    def due_before(self, before: datetime) -> list[Automation]:
        """Enabled ACTIVE automations with ``next_run_at < before``."""
        return [a for a in self._items.values()
                if a.enabled and a.status is AutomationStatus.ACTIVE and a.next_run_at is not None
                and a.next_run_at < before]

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher(id)`` after every change; returns a function that stops watching."""
        self._watchers.append(watcher)

        def unwatch() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return unwatch

    def _notify(self, automation_id: str) -> None:
        for watcher in list(self._watchers):
            watcher(automation_id)


async def cancel_transient_runs(tx: Transaction, events: EventFactory, automation_id: str, reason: str) -> list[str]:
    """PENDING / RETRY_WAIT runs of a transient automation → CANCELED(reason), with their ``run.canceled``
    (the store does this for stored automations in ``set_enabled`` / ``delete``, by the same query)."""
    canceled = await tx.runs.cancel_waiting(automation_id, reason)
    await tx.outbox.append_many(events.runs_canceled(canceled, automation_id, reason))
    return canceled
