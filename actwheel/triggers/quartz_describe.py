"""Human-readable descriptions of cron schedules (both dialects): "at 18:30:00, Monday through Friday"."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from actwheel.triggers.quartz_parse import (
    ALL_SPEC,
    DAY_OF_MONTH,
    DAY_OF_WEEK,
    HOUR,
    MINUTE,
    MONTH,
    NO_SPEC,
    SECOND,
    YEAR,
    QuartzExpression,
)
from actwheel.triggers.unixcron import UnixCron

__all__ = ["describe_quartz", "describe_unix"]

_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December")
_ORDINALS = ("first", "second", "third", "fourth", "fifth")


def describe_quartz(expr: QuartzExpression) -> str:
    values = [_plain(v) for v in expr.values]
    parts = [_time(values[SECOND], values[MINUTE], values[HOUR], with_seconds=True), _quartz_days(expr)]
    parts += [p for p in (_months(values[MONTH]), _years(expr.fields[YEAR:], values[YEAR])) if p]
    return ", ".join(parts)


def describe_unix(cron: UnixCron) -> str:
    expanded = [_unix_values(values, low, high) for values, (low, high) in
                zip(cron.expanded, ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6)), strict=True)]
    minutes, hours, dom, months, dow = expanded
    parts = [_time([0], minutes, hours, with_seconds=False), _unix_days(cron, dom, dow)]
    month_text = _months(months)
    return ", ".join([*parts, month_text] if month_text else parts)


def _plain(values: Iterable[int]) -> list[int]:
    return [v for v in values if v not in (ALL_SPEC, NO_SPEC)]


def _unix_values(values: Sequence[int | str], low: int, high: int) -> list[int]:
    if values and values[0] == "*":
        return list(range(low, high + 1))
    return sorted({int(v) % 7 if high == 6 else int(v) for v in values})


def _compact(values: Sequence[int], name: Sequence[str] | None = None, base: int = 0) -> str:
    """``1,2,3,5`` -> ``1-3, 5`` (or names: ``Monday through Wednesday, Friday``)."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])

    def show(v: int) -> str:
        return name[v - base] if name and 0 <= v - base < len(name) else str(v)

    joiner = " through " if name else "-"
    return ", ".join(show(r[0]) if len(r) == 1 else f"{show(r[0])}{joiner}{show(r[-1])}" for r in runs)


def _step_of(values: Sequence[int], low: int, high: int) -> int | None:
    """N when ``values`` is every N-th value of the whole field starting at ``low``."""
    if len(values) < 2 or values[0] != low:
        return None
    step = values[1] - values[0]
    expected = list(range(low, high + 1, step))
    return step if list(values) == expected else None


def _unit(values: Sequence[int], low: int, high: int, unit: str) -> str:
    if len(values) == high - low + 1:
        return f"every {unit}"
    step = _step_of(values, low, high)
    if step is not None:
        return f"every {step} {unit}s"
    return f"{unit} {_compact(values)}"


def _time(seconds: Sequence[int], minutes: Sequence[int], hours: Sequence[int], *, with_seconds: bool) -> str:
    if len(seconds) == 1 and len(minutes) == 1 and len(hours) <= 3:
        clock = ", ".join(f"{h:02d}:{minutes[0]:02d}" + (f":{seconds[0]:02d}" if with_seconds else "")
                          for h in hours)
        return f"at {clock}"
    parts = []
    if list(seconds) != [0]:
        parts.append(_unit(seconds, 0, 59, "second"))
    if not (list(minutes) == [0] and parts == []):
        parts.append(_unit(minutes, 0, 59, "minute"))
    parts.append(_unit(hours, 0, 23, "hour"))
    return ", ".join(parts)


def _quartz_days(expr: QuartzExpression) -> str:
    if expr.day_of_month_spec:
        return _quartz_days_of_month(expr)
    days = _plain(expr.values[DAY_OF_WEEK])
    if expr.last_day_of_week:
        return f"on the last {_DAY_NAMES[(days[0] - 1) % 7]} of the month"
    if expr.nth_day_of_week:
        return f"on the {_ORDINALS[expr.nth_day_of_week - 1]} {_DAY_NAMES[(days[0] - 1) % 7]} of the month"
    if len(days) == 7:
        return "every day"
    return _compact(days, _DAY_NAMES, base=1)


def _quartz_days_of_month(expr: QuartzExpression) -> str:
    days = _plain(expr.values[DAY_OF_MONTH])
    if expr.last_day_of_month:
        back = f"{expr.last_day_offset} days before " if expr.last_day_offset else ""
        target = f"{back}the last day of the month"
        return f"on the weekday nearest {target}" if expr.nearest_weekday else f"on {target}"
    if expr.nearest_weekday:
        return f"on the weekday nearest day {days[0]} of the month"
    if len(days) == 31:
        return "every day"
    return f"on day {_compact(days)} of the month"


def _unix_days(cron: UnixCron, dom: Sequence[int], dow: Sequence[int]) -> str:
    dom_all, dow_all = cron.fields[2] == "*", cron.fields[4] == "*"
    on_dom = f"on day {_compact(dom)} of the month"
    on_dow = _compact(dow, _DAY_NAMES)
    if dom_all and dow_all:
        return "every day"
    if dow_all:
        return on_dom
    if dom_all:
        return on_dow
    return f"{on_dom} or {on_dow}"


def _months(months: Sequence[int]) -> str:
    return "" if len(months) == 12 else "in " + _compact(months, _MONTH_NAMES, base=1)


def _years(fields: Sequence[str], years: Sequence[int]) -> str:
    if not fields or fields[0] == "*" or not years:
        return ""
    return "in " + _compact(years)
