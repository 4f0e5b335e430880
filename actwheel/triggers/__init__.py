"""Triggers: when something fires. Pure functions of an instant; no IO, no clock.

The trigger spec is a JSON object (see the README, "Trigger specs"); ``type``
selects one of the registered kinds::

    parse({"type": "cron", "expression": "0 30 18 ? * MON-FRI", "timezone": "Asia/Shanghai"})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from actwheel.errors import InvalidTrigger
from actwheel.triggers.base import Fire, Trigger, require_aware
from actwheel.triggers.cron import CronTrigger
from actwheel.triggers.event import EventTrigger
from actwheel.triggers.once import OnceTrigger
from actwheel.triggers.repeat import RepeatTrigger

__all__ = [
    "TRIGGER_TYPES",
    "CronTrigger",
    "EventTrigger",
    "Fire",
    "OnceTrigger",
    "RepeatTrigger",
    "Trigger",
    "parse",
    "preview",
    "preview_fires",
]

#: Every trigger kind, by its spec ``type``. Explicit: no import-time discovery.
TRIGGER_TYPES: Mapping[str, Callable[[Mapping[str, Any]], Trigger]] = {
    "once": OnceTrigger.from_spec,
    "cron": CronTrigger.from_spec,
    "repeat": RepeatTrigger.from_spec,
    "event": EventTrigger.from_spec,
}


def parse(spec: Mapping[str, Any] | Trigger) -> Trigger:
    """A :class:`Trigger` from its JSON spec.

    :raises InvalidTrigger: naming the field, the value and what would be valid
    """
    if isinstance(spec, Trigger):
        return spec
    if not isinstance(spec, Mapping):
        raise InvalidTrigger("trigger", spec, "a JSON object with a 'type' field")
    kind = spec.get("type")
    factory = TRIGGER_TYPES.get(kind) if isinstance(kind, str) else None
    if factory is None:
        raise InvalidTrigger("type", kind, "one of " + ", ".join(repr(k) for k in TRIGGER_TYPES))
    return factory(spec)


def preview_fires(spec: Mapping[str, Any] | Trigger, *, after: datetime, count: int) -> list[Fire]:
    """The next ``count`` fires after ``after`` with their notes (fewer when the schedule ends)."""
    require_aware(after, "after")
    if count < 0:
        raise InvalidTrigger("count", count, "a non-negative integer")
    trigger = parse(spec)
    fires: list[Fire] = []
    instant = after
    while len(fires) < count:
        fire = trigger.next_fire_after(instant)
        if fire is None:
            break
        fires.append(fire)
        instant = fire.at
    return fires


def preview(spec: Mapping[str, Any] | Trigger, *, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire times after ``after``, each with the trigger zone's offset."""
    return [fire.at for fire in preview_fires(spec, after=after, count=count)]
