"""The rules the MCP server enforces that are plain functions: named zones, the server-written
restatements and what to tell the user about a run. No IO; the tools call these.

1. *Preview first* and 4. *run now needs this turn's confirmation* need the server key and the
   confirmation table: :class:`~actwheel.service.confirmations.ConfirmationService` does them.
2. *No guessed time zones*: :func:`require_named_zone`.
3. *Restatement written by the server*: :func:`automation_summary`, :func:`preview_summary`.
5. *UNKNOWN is never retried*: :func:`run_flags`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from actwheel.errors import InvalidInput
from actwheel.storage.records import RunStatus
from actwheel.triggers import Fire, parse

__all__ = [
    "TIME_BASED",
    "UNKNOWN_SENTENCE",
    "action_target",
    "automation_summary",
    "offset_of",
    "preview_summary",
    "require_named_zone",
    "run_flags",
]

#: The trigger kinds that fire at times: over MCP each must name its IANA ``timezone``.
TIME_BASED = frozenset({"once", "cron", "repeat"})

#: What to tell the user about a run in UNKNOWN.
UNKNOWN_SENTENCE = ("This run's outcome is UNKNOWN: the action may or may not have happened. It is never "
                    "retried automatically; tell the user, and let them check the target before anything "
                    "is run again — running again may duplicate it.")

#: Config fields that say where an action acts, most telling first.
_TARGET_FIELDS = ("url", "to", "channel", "routing_key", "function", "object_type", "topic", "op")


def require_named_zone(trigger: Any, field: str = "trigger") -> None:
    """Refuse a time-based trigger spec that does not name its IANA zone (the REST API keeps its UTC
    default; an agent must not guess one). Checked on the raw spec, before parsing.

    :raises InvalidInput: naming ``<field>.timezone``
    """
    if not isinstance(trigger, Mapping) or trigger.get("type") not in TIME_BASED:
        return
    zone = trigger.get("timezone")
    if not isinstance(zone, str) or not zone.strip():
        raise InvalidInput(f"{field}.timezone", zone, "an IANA zone name such as 'Europe/Paris': over MCP every "
                           "time-based trigger names its zone; ask the user which zone they mean, never guess one")


def offset_of(at: datetime) -> str:
    """``+08:00`` for an instant in a zone eight hours ahead of UTC."""
    raw = at.strftime("%z") or "+0000"
    return f"{raw[:3]}:{raw[3:5]}"


def action_target(action_type: str, config: Mapping[str, Any]) -> str:
    """Where an action acts, in a few words (``https://example.com/hook``), for a restatement."""
    for name in _TARGET_FIELDS:
        value = config.get(name)
        if isinstance(value, str) and value:
            return f"{name} {value}"
    steps = config.get("steps")
    if isinstance(steps, Sequence) and not isinstance(steps, str):
        return f"{len(steps)} steps"
    return "its configured target"


def _first_fire(fires: Sequence[Fire]) -> str:
    if not fires:
        return "never fires again"
    at = fires[0].at
    return f"first fires at {at.isoformat()} (UTC{offset_of(at)})"


def _zone(trigger: Mapping[str, Any]) -> str:
    zone = trigger.get("timezone")
    return zone if isinstance(zone, str) else "UTC"


def preview_summary(trigger: Mapping[str, Any], fires: Sequence[Fire]) -> str:
    """One sentence for a preview: what the trigger does, its first fire with the offset, the zone."""
    described = parse(trigger).describe()
    if trigger.get("type") == "event":
        return f"Fires {described} (on events, not at times)."
    return f"{described[:1].upper()}{described[1:]}; {_first_fire(fires)}, time zone {_zone(trigger)}."


def automation_summary(*, name: str, trigger: Mapping[str, Any], fires: Sequence[Fire], action_type: str,
                       action_config: Mapping[str, Any], enabled: bool) -> str:
    """One sentence restating an automation: name, first fire with offset, zone, action and target."""
    if trigger.get("type") == "event":
        when = f"runs on events ({parse(trigger).describe()})"
    else:
        when = f"{_first_fire(fires)}, time zone {_zone(trigger)},"
    state = "" if enabled else " It is disabled: nothing fires until it is enabled."
    return (f"Automation “{name}” {when} and then runs {action_type} on "
            f"{action_target(action_type, action_config)}.{state}")


def run_flags(status: RunStatus) -> tuple[bool, bool, str | None]:
    """``(duplicate_risk, retry_allowed, sentence)`` for a run in ``status``.

    UNKNOWN: the action may have happened, so it is never retried and another run may duplicate it.
    A FAILED or DEAD run did not happen: a new run may be asked. Anything else is in flight or done.
    """
    if status is RunStatus.UNKNOWN:
        return True, False, UNKNOWN_SENTENCE
    if status in (RunStatus.FAILED, RunStatus.DEAD):
        return False, True, None
    return False, False, None
