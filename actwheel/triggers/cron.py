"""The ``cron`` trigger: Quartz (6 or 7 fields) or classic Unix cron (5 fields) in an IANA zone.

Spec::

    {"type": "cron", "expression": "0 30 18 ? * MON-FRI", "timezone": "Asia/Shanghai",
     "dst": "quartz", "start": "2027-01-01T00:00:00+08:00", "end": "2027-12-31T23:59:59+08:00"}

``timezone`` defaults to ``"UTC"``; ``dst`` (see :mod:`actwheel.triggers.dst`),
``start`` (first fire at or after it) and ``end`` (last fire at or before it)
are optional. With ``"dst": "quartz"`` a Quartz expression fires exactly when
Quartz 2.3.2 fires it; with the other policies the expression yields wall
times that the policy resolves in the zone. The default policy follows the cron
daemon's rule, which depends on whether the job is a *wildcard* job (minute or
hour field begins with ``*``; for Quartz, its minute and hour fields, not its
seconds) or a *fixed-time* job. See ``docs/cron.md``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from actwheel.errors import InvalidTrigger
from actwheel.triggers.base import Fire, Trigger, check_fields, parse_datetime, parse_zone, require_aware
from actwheel.triggers.dst import DstPolicy, first_fire_after, is_wildcard_job
from actwheel.triggers.quartz_describe import describe_quartz, describe_unix
from actwheel.triggers.quartz_eval import QuartzLoops, next_fire_seconds
from actwheel.triggers.quartz_parse import HOUR, MINUTE, QuartzExpression, parse_quartz
from actwheel.triggers.unixcron import UnixCron, parse_unix

__all__ = ["CronTrigger"]

_FIELDS = ("type", "expression", "timezone", "dst", "start", "end")
_EXPECTED_EXPRESSION = ("a cron expression: 6 or 7 fields (Quartz: seconds minutes hours day-of-month "
                        "month day-of-week [year]) or 5 fields (Unix: minute hour day-of-month month day-of-week)")
_EXPECTED_BOUND = "an ISO-8601 date-time with an offset, e.g. '2027-01-01T00:00:00+08:00'"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_NEAR = timedelta(hours=3)  # wider than any DST shift: no offset change this close means no DST effect
_SECOND = timedelta(seconds=1)


def _epoch_seconds(instant: datetime) -> int:
    """Whole seconds since 1970, rounded down (exact; no float)."""
    return (instant - _EPOCH) // _SECOND


def _naive_seconds(wall: datetime) -> int:
    return (wall - _NAIVE_EPOCH) // _SECOND


class _QuartzSchedule:
    """Quartz semantics: exact in the zone (``dst: quartz``) or as pure wall times."""

    dialect = "quartz"
    __slots__ = ("fixed_time", "parsed", "text")

    def __init__(self, text: str, parsed: QuartzExpression) -> None:
        self.text = text  # the key of _compiled(), which returned ``parsed``
        self.parsed = parsed
        # cron has no seconds field: judge a Quartz job by its minute and hour, as cron would
        self.fixed_time = not is_wildcard_job(parsed.fields[MINUTE], parsed.fields[HOUR])

    def next_in_zone(self, zone: ZoneInfo, after_seconds: int) -> int | None:
        return self._evaluate(zone, after_seconds)

    def walls_from(self, start: datetime) -> Iterator[datetime]:
        after = _naive_seconds(start)
        while (wall := self._evaluate(None, after)) is not None:
            yield _NAIVE_EPOCH + timedelta(seconds=wall)
            after = wall + 1

    def describe(self) -> str:
        return describe_quartz(self.parsed)

    def _evaluate(self, zone: ZoneInfo | None, after_seconds: int) -> int | None:
        try:
            return _next_seconds(self.text, zone, after_seconds)
        except QuartzLoops:
            raise InvalidTrigger("expression.day_of_month", self.parsed.fields[3],
                                 "an 'L-n' offset that stays inside every month the schedule reaches; "
                                 "Quartz never finishes evaluating this one") from None


class _UnixSchedule:
    dialect = "unix"

    def __init__(self, parsed: UnixCron) -> None:
        self.parsed = parsed
        self.fixed_time = not is_wildcard_job(parsed.fields[0], parsed.fields[1])

    def walls_from(self, start: datetime) -> Iterator[datetime]:
        return self.parsed.walls_from(start)

    def describe(self) -> str:
        return describe_unix(self.parsed)


_Schedule = _QuartzSchedule | _UnixSchedule


@dataclass(frozen=True, slots=True)
class CronTrigger(Trigger):
    """A cron schedule in a zone. Build it with :meth:`from_spec` (or ``actwheel.triggers.parse``).

    :ivar expression: the expression as written
    :ivar tz: the IANA zone the expression is read in
    :ivar policy: what a DST gap or repeated hour does
    :ivar start: no fire before this instant
    :ivar end: no fire after this instant
    """

    expression: str
    tz: ZoneInfo
    policy: DstPolicy
    start: datetime | None
    end: datetime | None
    schedule: _Schedule = field(compare=False, repr=False)

    type = "cron"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Trigger:
        """A cron trigger from its JSON spec.

        :raises InvalidTrigger: naming the field (``expression.day_of_month``, ``timezone``, ...),
            the value and what would be valid; also for expressions Quartz accepts but cannot evaluate
        """
        check_fields(spec, _FIELDS, "a 'cron' trigger")
        schedule = _parse_expression(spec.get("expression"))
        zone = parse_zone(spec.get("timezone", "UTC"))
        policy = DstPolicy.parse(spec.get("dst"))
        start, end = _bound(spec, "start"), _bound(spec, "end")
        if start is not None and end is not None and end < start:
            raise InvalidTrigger("end", spec["end"], f"an instant at or after start ({spec['start']})")
        return cls(spec["expression"], zone, policy, start, end, schedule)

    @property
    def zone(self) -> ZoneInfo:
        return self.tz

    @property
    def dialect(self) -> str:
        """``"quartz"`` (6 or 7 fields) or ``"unix"`` (5 fields)."""
        return self.schedule.dialect

    def next_fire_after(self, instant: datetime) -> Fire | None:
        """The first fire strictly after ``instant``.

        :raises ValueError: if ``instant`` is naive
        :raises InvalidTrigger: if Quartz would never finish evaluating the expression from here
        """
        require_aware(instant)
        if self.start is not None and instant < self.start:
            instant = self.start - timedelta(microseconds=1)
        fire = self._next(instant)
        if fire is None or (self.end is not None and fire.at > self.end):
            return None
        return fire

    def describe(self) -> str:
        bounds = "".join((f", from {self.start.isoformat()}" if self.start else "",
                          f", until {self.end.isoformat()}" if self.end else ""))
        return f"{self.schedule.describe()}{bounds} ({self.tz.key})"

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"type": self.type, "expression": self.expression, "timezone": self.tz.key}
        dst = self.policy.to_spec()
        if dst is not None:
            spec["dst"] = dst
        if self.start is not None:
            spec["start"] = self.start.isoformat()
        if self.end is not None:
            spec["end"] = self.end.isoformat()
        return spec

    # --- evaluation --------------------------------------------------------------------------

    def _next(self, instant: datetime) -> Fire | None:
        schedule = self.schedule
        if isinstance(schedule, _QuartzSchedule) and self.policy.quartz:
            seconds = schedule.next_in_zone(self.tz, _epoch_seconds(instant) + 1)
            return None if seconds is None else Fire((_EPOCH + timedelta(seconds=seconds)).astimezone(self.tz))
        return self._next_by_policy(instant)

    def _next_by_policy(self, instant: datetime) -> Fire | None:
        local = instant.astimezone(self.tz).replace(tzinfo=None)
        candidate = next(self.schedule.walls_from(local.replace(microsecond=0) + _SECOND), None)
        if candidate is None:
            return None
        fire = self._unaffected_by_dst(instant, candidate)
        if fire is not None:
            return fire
        return first_fire_after(instant, self.tz, self.policy, self.schedule.walls_from,
                                fixed_hour=self.schedule.fixed_time)

    def _unaffected_by_dst(self, instant: datetime, wall: datetime) -> Fire | None:
        """The fire at ``wall`` when no offset change lies near ``instant`` or near ``wall``.

        Then no wall time before ``wall`` can fire after ``instant`` and ``wall`` exists once.
        """
        at = wall.replace(tzinfo=self.tz)
        if at.utcoffset() != wall.replace(tzinfo=self.tz, fold=1).utcoffset():
            return None
        if not (self._steady_around(instant) and self._steady_around(at)):
            return None
        return Fire(at)

    def _steady_around(self, instant: datetime) -> bool:
        before = (instant - _NEAR).astimezone(self.tz).utcoffset()
        return before == (instant + _NEAR).astimezone(self.tz).utcoffset()


def _parse_expression(value: Any) -> _Schedule:
    if not isinstance(value, str) or not value.strip():
        raise InvalidTrigger("expression", value, _EXPECTED_EXPRESSION)
    text = value if type(value) is str else str(value)
    compiled = _compiled(text)
    return _UnixSchedule(compiled) if isinstance(compiled, UnixCron) else _QuartzSchedule(text, compiled)


#: Distinct expression texts whose parse is kept (speed only: most automations share a few texts).
COMPILED_EXPRESSIONS_MAX = 4096


@lru_cache(maxsize=COMPILED_EXPRESSIONS_MAX)
def _compiled(expression: str) -> QuartzExpression | UnixCron:
    """The parsed expression, shared by every trigger written with exactly this text.

    Keyed by the text alone because the parse reads nothing else: the zone, the DST policy and the
    bounds are parsed apart and never reach it, the dialect is the text's field count, Quartz's
    ``MAX_YEAR`` is pinned, and the field prefix only names errors (a refused text raises, and
    ``lru_cache`` keeps no exception). Safe to share: both results are frozen dataclasses of tuples.
    """
    count = len(expression.split())
    if count == 5:
        return parse_unix(expression)
    if count >= 6:  # like Quartz, ignore anything after the year field
        return parse_quartz(expression)
    raise InvalidTrigger("expression", expression, _EXPECTED_EXPRESSION + f"; got {count} fields")


#: Quartz evaluations kept (speed only): a batch of creates, or every automation firing at one instant
#: with one expression, asks for the same next fire from the same second.
QUARTZ_FIRES_MAX = 4096


@lru_cache(maxsize=QUARTZ_FIRES_MAX)
def _next_seconds(text: str, zone: ZoneInfo | None, after_seconds: int) -> int | None:
    """:func:`next_fire_seconds` of the Quartz expression ``text`` (see :func:`_compiled`).

    A pure function of its arguments: the parse depends on the text alone, and a ``ZoneInfo`` is
    keyed by identity (an object built with ``no_cache`` is another key, never a wrong answer).
    ``QuartzLoops`` is raised again each time (``lru_cache`` keeps no exception).
    """
    compiled = _compiled(text)
    if not isinstance(compiled, QuartzExpression):  # a 5-field text is never a _QuartzSchedule's
        raise TypeError(f"not a Quartz expression: {text!r}")
    return next_fire_seconds(compiled, zone, after_seconds)


def _bound(spec: Mapping[str, Any], name: str) -> datetime | None:
    if spec.get(name) is None:
        return None
    parsed = parse_datetime(spec[name], name, _EXPECTED_BOUND)
    if parsed.value.tzinfo is None:
        raise InvalidTrigger(name, spec[name], _EXPECTED_BOUND + "; a time without an offset is ambiguous")
    return parsed.value
