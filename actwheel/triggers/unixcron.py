"""Classic 5-field Unix cron (minute hour day-of-month month day-of-week), evaluated by croniter.

Day-of-week 0 or 7 is Sunday; names JAN-DEC and SUN-SAT are accepted; when both
day fields are restricted a day matching *either* fires (Vixie cron's rule).
Only the classic syntax is accepted (``* , - /`` and names): croniter's own
extensions (``L``, ``#``, ``H``, ``?``) belong to other dialects, and the Quartz
dialect (6 or 7 fields) is the place for ``L``/``W``/``#``.

croniter works on naive wall times here; the trigger resolves them in its
zone under its DST policy (:mod:`actwheel.triggers.dst`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from croniter import croniter
from croniter.croniter import CroniterError

from actwheel.errors import InvalidTrigger

__all__ = ["UNIX_FIELD_NAMES", "UnixCron", "parse_unix"]

UNIX_FIELD_NAMES = ("minute", "hour", "day_of_month", "month", "day_of_week")
_NUMBER = r"\d{1,2}"
_MONTH = r"(?:\d{1,2}|JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)"
_DAY = r"(?:\d|SUN|MON|TUE|WED|THU|FRI|SAT)"
_EXPECTED = (
    "0-59 with , - * /",
    "0-23 with , - * /",
    "1-31 with , - * /",
    "1-12 or JAN-DEC with , - * /",
    "0-7 (0 and 7 = Sunday) or SUN-SAT with , - * /",
)
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


def _field_pattern(atom: str) -> re.Pattern[str]:
    item = rf"(?:\*|{atom}(?:-{atom})?)(?:/\d{{1,2}})?"
    return re.compile(rf"{item}(?:,{item})*", re.IGNORECASE)


_PATTERNS = (
    _field_pattern(_NUMBER), _field_pattern(_NUMBER), _field_pattern(_NUMBER),
    _field_pattern(_MONTH), _field_pattern(_DAY),
)


@dataclass(frozen=True, slots=True)
class UnixCron:
    """A validated 5-field expression and croniter's expansion of it (for descriptions)."""

    text: str
    fields: tuple[str, ...]
    expanded: tuple[tuple[int | str, ...], ...]

    def walls_from(self, start: datetime) -> Iterator[datetime]:
        """Naive wall times at or after ``start`` (naive), in increasing order."""
        itr = croniter(self.text, start - timedelta(seconds=1))
        while True:
            try:
                wall = itr.get_next(datetime)
            except CroniterError:  # croniter gives up after decades without a match
                return
            if wall >= start:
                yield wall


def parse_unix(expression: str, field_prefix: str = "expression") -> UnixCron:
    """Validate a 5-field expression.

    :raises InvalidTrigger: naming ``expression.<field>``, its text and what is valid
    """
    fields = tuple(expression.split())
    for kind, text in enumerate(fields):
        _check_field(kind, text, field_prefix)
    try:
        expanded = croniter.expand(" ".join(fields))[0]
    except CroniterError as error:  # e.g. a step croniter refuses
        raise InvalidTrigger(field_prefix, expression, f"a valid 5-field cron expression ({error})") from None
    return UnixCron(" ".join(fields), fields, tuple(tuple(values) for values in expanded))


def _check_field(kind: int, text: str, prefix: str) -> None:
    name = f"{prefix}.{UNIX_FIELD_NAMES[kind]}"
    if _PATTERNS[kind].fullmatch(text) is None:
        raise InvalidTrigger(name, text, _EXPECTED[kind])
    low, high = _BOUNDS[kind]
    for item in text.split(","):
        _check_item(item, low, high, name, text, _EXPECTED[kind])


def _check_item(item: str, low: int, high: int, name: str, text: str, expected: str) -> None:
    body, _, step = item.partition("/")
    if step and not 1 <= int(step) <= high:
        raise InvalidTrigger(name, text, f"a step 1-{high} ({expected})")
    for value in body.split("-"):
        if value.isdigit() and not low <= int(value) <= high:
            raise InvalidTrigger(name, text, f"values {low}-{high} ({expected})")
    ends = body.split("-")
    if len(ends) == 2 and all(v.isdigit() for v in ends) and int(ends[0]) > int(ends[1]):
        raise InvalidTrigger(name, text, f"a range low-high ({expected})")
