"""What a wall-clock schedule does when DST skips or repeats an hour.

Rules (``dst`` in a trigger spec):

- default: the rule of the real cron daemon (Debian's ``cron``, Vixie cron
  3.0pl1, ``cron(8)`` "Daylight Saving Time and other time changes"). A
  *wildcard* job is one whose minute or hour field begins with ``*``; any
  other is a *fixed-time* job. On spring-forward a fixed-time job whose wall
  time was skipped fires once, at the instant right after the jump (several
  skipped wall times collapse into that one fire), while a wildcard job does
  not catch up: it just goes on at the new time. On fall-back a wildcard job
  fires in both passes of the repeated hour (so it keeps its real interval)
  and a fixed-time job only in the first. Schedules that are not cron
  expressions (``repeat``) count as fixed-time jobs.
- ``"quartz"``: exactly what Quartz 2.3.2 does (cron triggers implement it in
  their own evaluator; for other triggers it means ``gap=skip, fold=second``).
- ``{"gap": "shift" | "skip", "fold": "first" | "second" | "both"}``: explicit;
  an omitted ``gap`` means ``shift``, an omitted ``fold`` the default rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from actwheel.errors import InvalidTrigger
from actwheel.triggers.base import Fire

__all__ = [
    "DstPolicy",
    "FoldRule",
    "GapRule",
    "first_fire_after",
    "is_wildcard_job",
    "resolve_wall_time",
]

_E = TypeVar("_E", bound=StrEnum)


def is_wildcard_job(minute: str, hour: str) -> bool:
    """Whether cron counts a job with these minute and hour fields as a *wildcard* job.

    The test is textual, as in Vixie cron's ``entry.c`` (``MIN_STAR``/``HR_STAR``):
    a field that *begins* with ``*`` makes a wildcard job, so ``*/20`` does and
    ``0-23/2`` does not.
    """
    return minute.startswith("*") or hour.startswith("*")


class GapRule(StrEnum):
    SHIFT = "shift"
    SKIP = "skip"
    AUTO = "auto"  # cron's rule: shift for a fixed-time job, skip for a wildcard job


class FoldRule(StrEnum):
    FIRST = "first"
    SECOND = "second"
    BOTH = "both"
    AUTO = "auto"  # cron's rule: first for a fixed-time job, both for a wildcard job


@dataclass(frozen=True, slots=True)
class DstPolicy:
    gap: GapRule = GapRule.AUTO
    fold: FoldRule = FoldRule.AUTO
    quartz: bool = False

    @classmethod
    def parse(cls, value: Any, field: str = "dst") -> DstPolicy:
        """From a spec's ``dst`` value: absent/``"default"``, ``"quartz"`` or ``{gap, fold}``."""
        if value is None or value == "default":
            return cls()
        if value == "quartz":
            return cls(gap=GapRule.SKIP, fold=FoldRule.SECOND, quartz=True)
        if isinstance(value, dict):
            unknown = set(value) - {"gap", "fold"}
            if unknown:
                raise InvalidTrigger(f"{field}.{sorted(unknown)[0]}", value, "only 'gap' and 'fold'")
            return cls(gap=_enum(GapRule, value.get("gap", "shift"), f"{field}.gap"),
                       fold=_enum(FoldRule, value.get("fold", "auto"), f"{field}.fold"))
        raise InvalidTrigger(field, value, "'default', 'quartz' or {'gap': 'shift'|'skip', "
                             "'fold': 'first'|'second'|'both'}")

    def to_spec(self) -> str | dict[str, str] | None:
        if self.quartz:
            return "quartz"
        if self == DstPolicy():
            return None
        return {"gap": self.gap.value, "fold": self.fold.value}


def _enum(kind: type[_E], value: Any, field: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        raise InvalidTrigger(field, value, "one of " + ", ".join(repr(m.value) for m in kind)) from None


def _exists(wall: datetime, zone: ZoneInfo, fold: int) -> datetime | None:
    aware = wall.replace(tzinfo=zone, fold=fold)
    back = aware.astimezone(UTC).astimezone(zone)
    return back if back.replace(tzinfo=None) == wall else None


def _transition_after(lo: datetime, hi: datetime, zone: ZoneInfo) -> datetime:
    """The first instant in (lo, hi] whose offset differs from lo's (bisection to 1 s)."""
    lo_off = lo.astimezone(zone).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(zone).utcoffset() == lo_off:
            lo = mid
        else:
            hi = mid
    return hi.replace(microsecond=0).astimezone(zone)


def resolve_wall_time(
    wall: datetime, zone: ZoneInfo, policy: DstPolicy, *, fixed_hour: bool
) -> list[Fire]:
    """The instants (0, 1 or 2, in order) at which a naive wall time ``wall`` fires in ``zone``.

    ``fixed_hour`` says the schedule is a fixed-time job in cron's sense (see
    :func:`is_wildcard_job`); the ``auto`` rules depend on it.
    """
    first, second = _exists(wall, zone, 0), _exists(wall, zone, 1)
    if first is not None and second is not None and first.timestamp() != second.timestamp():
        return _fold(wall, zone, policy, first, second, fixed_hour=fixed_hour)
    if first is not None or second is not None:
        return [Fire(first or second)]  # type: ignore[arg-type]
    return _gap(wall, zone, policy, fixed_hour=fixed_hour)


def _fold(wall: datetime, zone: ZoneInfo, policy: DstPolicy, first: datetime, second: datetime,
          *, fixed_hour: bool) -> list[Fire]:
    rule = policy.fold
    if rule is FoldRule.AUTO:  # cron runs wildcard jobs in both passes, fixed-time jobs in the first only
        rule = FoldRule.FIRST if fixed_hour else FoldRule.BOTH
    where = f"{wall:%H:%M:%S} occurs twice in {zone.key} on {wall:%Y-%m-%d}"
    if rule is FoldRule.FIRST:
        return [Fire(first, f"DST fold: {where}; fired at the first ({first:%Z}) only")]
    if rule is FoldRule.SECOND:
        return [Fire(second, f"DST fold: {where}; fired at the second ({second:%Z}) only")]
    return [Fire(first, f"DST fold: {where}; first of two fires"),
            Fire(second, f"DST fold: {where}; second of two fires")]


def _gap(wall: datetime, zone: ZoneInfo, policy: DstPolicy, *, fixed_hour: bool) -> list[Fire]:
    where = f"{wall:%H:%M:%S} does not exist in {zone.key} on {wall:%Y-%m-%d}"
    rule = policy.gap
    if rule is GapRule.AUTO:  # cron runs skipped fixed-time jobs after the jump; wildcard jobs do not catch up
        rule = GapRule.SHIFT if fixed_hour else GapRule.SKIP
    if rule is GapRule.SKIP:
        return []
    before = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    after = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    lo, hi = min(before, after), max(before, after)
    jump = _transition_after(lo, hi, zone)
    return [Fire(jump, f"DST gap: {where}; fired right after the jump at {jump:%H:%M:%S %Z}")]


def _fold_length(wall: datetime, zone: ZoneInfo) -> timedelta:
    """How long the repeated hour lasts when ``wall`` occurs twice in ``zone``; zero otherwise."""
    first, second = _exists(wall, zone, 0), _exists(wall, zone, 1)
    if first is None or second is None:
        return timedelta(0)
    return abs(second.timestamp() - first.timestamp()) * timedelta(seconds=1)


def first_fire_after(
    instant: datetime,
    zone: ZoneInfo,
    policy: DstPolicy,
    walls_from: Callable[[datetime], Iterator[datetime]],
    *,
    fixed_hour: bool,
    limit: int = 100_000,
) -> Fire | None:
    """The earliest fire strictly after ``instant`` of a wall-clock schedule.

    ``walls_from(start)`` yields the schedule's naive wall times at or after
    ``start`` in increasing order. Wall order and instant order agree except in
    a repeated hour: there a later wall's *first* occurrence can come before an
    earlier wall's *second* one. So when ``instant`` lies in a repeated hour the
    walk starts one fold-length earlier, and when the best fire so far is a
    second occurrence it goes on for one fold-length more; everywhere else the
    first candidate after ``instant`` is the answer.
    When skipped wall times do not fire (``gap=skip``, or a wildcard job under
    the default) the next fire's note names them.
    """
    # Aware datetimes in one zone compare by wall time, ignoring ``fold``: compare timestamps.
    local = instant.astimezone(zone).replace(tzinfo=None)
    after = instant.timestamp()
    best: Fire | None = None
    best_wall: datetime | None = None
    margin = timedelta(0)
    skipped: list[datetime] = []
    for count, wall in enumerate(walls_from(local - _fold_length(local, zone))):
        if (best_wall is not None and wall > best_wall + margin) or count >= limit:
            break
        fires = resolve_wall_time(wall, zone, policy, fixed_hour=fixed_hour)
        if not fires and wall > local:
            skipped.append(wall)
        for fire in fires:
            if fire.at.timestamp() > after and (best is None or fire.at.timestamp() < best.at.timestamp()):
                best, best_wall = fire, wall
                margin = _fold_length(wall, zone) if fire.at.fold == 1 else timedelta(0)
    if best is not None and skipped and best.note is None:
        gone = ", ".join(f"{w:%Y-%m-%d %H:%M:%S}" for w in skipped if w < (best_wall or w))
        if gone:
            best = Fire(best.at, f"DST gap: skipped {gone} (not in {zone.key})")
    return best
