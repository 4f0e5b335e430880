"""``actwheel preview``: the next fire times of a trigger, with the notes that explain them.

::

    actwheel preview --cron '0 30 18 ? * MON-FRI' --tz Asia/Shanghai
    actwheel preview --once 2027-01-01T09:00+08:00[Asia/Shanghai]
    actwheel preview --repeat '{"repeat": "WORKDAYS", "execute_time": "09:30", "calendar": "CN"}' \\
        --tz Asia/Shanghai --from 2026-09-25T00:00+08:00 -n 5 --json

Exit codes: 0 printed; 2 bad input (the error on stderr); 1 the schedule
needs data that does not exist yet (a holiday calendar's next year) — the
fires found before that point are printed first.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from actwheel.clock import Clock, SystemClock
from actwheel.errors import InvalidInput, InvalidTrigger, NotAvailable
from actwheel.triggers import Fire, Trigger, parse
from actwheel.triggers.base import parse_datetime

__all__ = ["PreviewResult", "build_spec", "compute", "register"]

EXIT_OK = 0
EXIT_UNAVAILABLE = 1
EXIT_BAD_INPUT = 2
MAX_COUNT = 10_000


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "preview",
        help="print the next fire times of a trigger",
        description="Print the next fire times of a trigger with their offsets, a description of the "
        "schedule, and a note on each fire that a DST rule or a holiday moved or skipped.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cron", metavar="EXPR", help="Quartz (6/7 fields) or Unix (5 fields) cron")
    source.add_argument("--once", metavar="ISO", help="ISO instant with offset, or Java's ...+08:00[Zone]")
    source.add_argument("--repeat", metavar="JSON", help="a repeat spec as JSON ('type' may be left out)")
    source.add_argument("--spec", metavar="JSON", help="any trigger spec as JSON")
    parser.add_argument("--tz", metavar="ZONE", help="IANA zone: 'timezone' when the spec has none")
    parser.add_argument("--from", dest="start", metavar="ISO", help="start after this instant (default now)")
    parser.add_argument("-n", dest="count", type=int, default=10, metavar="N", help="fires (default 10)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    return run(args, SystemClock(), sys.stdout, sys.stderr)


@dataclass(frozen=True, slots=True)
class PreviewResult:
    """What ``preview`` prints: the trigger, the instant it started from, the fires, why it stopped."""

    trigger: Trigger
    start: datetime
    fires: list[Fire]
    ended: bool
    error: NotAvailable | None = None


def run(args: argparse.Namespace, clock: Clock, out: TextIO, err: TextIO) -> int:
    """Run the command with an injected clock and streams; returns the exit code."""
    try:
        result = compute(build_spec(args), start=args.start, count=args.count, clock=clock)
    except InvalidInput as exc:
        print(f"actwheel preview: error: {exc}", file=err)
        return EXIT_BAD_INPUT
    except NotAvailable as exc:  # a trigger type that is not built yet
        print(f"actwheel preview: error: {exc}", file=err)
        return EXIT_UNAVAILABLE
    (_print_json if args.json else _print_text)(result, out)
    if result.error is not None:
        print(f"actwheel preview: error: {result.error}", file=err)
        return EXIT_UNAVAILABLE
    return EXIT_OK


def build_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The trigger spec the options describe.

    :raises InvalidTrigger: naming the option when it is not valid
    """
    if args.cron is not None:
        spec: dict[str, Any] = {"type": "cron", "expression": args.cron}
    elif args.once is not None:
        spec = {"type": "once", "at": args.once}
    elif args.repeat is not None:
        spec = {"type": "repeat", **_json_object(args.repeat, "--repeat")}
    else:
        spec = _json_object(args.spec, "--spec")
    return _with_zone(spec, args.tz)


def _json_object(text: str, option: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidTrigger(option, text, f"a JSON object ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise InvalidTrigger(option, value, "a JSON object such as '{\"repeat\": \"DAILY\", ...}'")
    return value


def _with_zone(spec: dict[str, Any], tz: str | None) -> dict[str, Any]:
    if tz is None:
        return spec
    if "timezone" in spec and spec["timezone"] != tz:
        raise InvalidTrigger("--tz", tz, f"the spec's own timezone ({spec['timezone']!r}) or no --tz")
    return {**spec, "timezone": tz}


def compute(spec: Mapping[str, Any], *, start: str | None, count: int, clock: Clock) -> PreviewResult:
    """Parse ``spec`` and collect up to ``count`` fires after ``start`` (default: the clock's now).

    :raises InvalidInput: naming the field or option that is not valid
    """
    if not 0 <= count <= MAX_COUNT:
        raise InvalidTrigger("-n", count, f"a count from 0 to {MAX_COUNT}")
    trigger = parse(spec)
    after = _start(start, trigger, clock)
    fires: list[Fire] = []
    instant = after
    try:
        while len(fires) < count:
            fire = trigger.next_fire_after(instant)
            if fire is None:
                return PreviewResult(trigger, after, fires, ended=True)
            fires.append(fire)
            instant = fire.at
    except NotAvailable as exc:
        return PreviewResult(trigger, after, fires, ended=False, error=exc)
    return PreviewResult(trigger, after, fires, ended=False)


def _start(text: str | None, trigger: Trigger, clock: Clock) -> datetime:
    """``--from``: an ISO instant; without an offset it is a wall time in the trigger's zone."""
    if text is None:
        return clock.now().astimezone(trigger.zone)
    parsed = parse_datetime(text, "--from", "an ISO date-time such as '2026-10-01T00:00:00+08:00'")
    value = parsed.value
    return value.astimezone(trigger.zone) if value.tzinfo is not None else value.replace(tzinfo=trigger.zone)


def _print_text(result: PreviewResult, out: TextIO) -> None:
    trigger = result.trigger
    print(trigger.describe(), file=out)
    if trigger.is_event:
        print("fires when a matching event arrives; no clock fires to preview", file=out)
        return
    print(f"after {result.start.isoformat()} ({trigger.zone.key}):", file=out)
    for index, fire in enumerate(result.fires, 1):
        note = f"  -- {fire.note}" if fire.note else ""
        print(f"{index:>4}  {fire.at.isoformat()}  {fire.at:%a}{note}", file=out)
    if result.ended:
        print("(the schedule has ended)" if result.fires else "(no fire: the schedule has ended)", file=out)


def _print_json(result: PreviewResult, out: TextIO) -> None:
    document = {
        "description": result.trigger.describe(),
        "spec": result.trigger.to_spec(),
        "timezone": result.trigger.zone.key,
        "is_event": result.trigger.is_event,
        "from": result.start.isoformat(),
        "fires": [{"at": fire.at.isoformat(), "note": fire.note} for fire in result.fires],
        "ended": result.ended,
        "error": None if result.error is None else str(result.error),
    }
    print(json.dumps(document, ensure_ascii=False, indent=2), file=out)
