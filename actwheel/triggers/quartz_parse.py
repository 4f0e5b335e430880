"""Parse a Quartz cron expression exactly as Quartz 2.3.2's ``CronExpression`` accepts it.

Quartz's parser is lenient in ways its documentation does not mention
(``5X`` in a field means ``5``; ``MON-FRI/2`` means ``MON-FRI``; ``*/0``
means ``*``; ``?X`` means ``?``; tokens after the seventh are ignored), and
strict in others (``L`` mixed with a list, two ``#``, increments above the
field's range). This module reproduces the *set* of accepted expressions and
the value sets they denote, token by token, so that the evaluator in
:mod:`actwheel.triggers.quartz_eval` sees what Quartz sees. The behaviour was
established from Quartz's documented semantics and checked against the real
library with the vectors under ``tests/triggers/vectors`` (see ``docs/cron.md``).

On top of Quartz we refuse what Quartz accepts but cannot evaluate: a
seconds, minutes, hours or month field that denotes no value at all (``L`` in
the seconds field — Quartz throws ``NoSuchElementException`` on first use) and
``0W`` (Quartz loops forever).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from actwheel.errors import InvalidTrigger

__all__ = [
    "ALL_SPEC",
    "FIELD_NAMES",
    "MAX_YEAR",
    "NO_SPEC",
    "QuartzExpression",
    "parse_quartz",
]

SECOND, MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK, YEAR = range(7)

#: Field names as they appear in error messages (``expression.<name>``).
FIELD_NAMES = ("seconds", "minutes", "hours", "day_of_month", "month", "day_of_week", "year")

#: Quartz marks ``*`` and ``?`` by these values inside the field's value set.
ALL_SPEC = 99
NO_SPEC = 98

#: Quartz's ``MAX_YEAR`` is "the JVM's current year + 100", fixed when the class loads.
#: We pin it to the value Quartz has in 2026 so that evaluation stays a pure function.
MAX_YEAR = 2126

_INT_MAX = 2**31 - 1
_MIN = (0, 0, 0, 1, 1, 1, 1970)
_MAX = (59, 59, 23, 31, 12, 7, MAX_YEAR)
_WRAP = (60, 60, 24, 31, 12, 7, 0)
_STEP_MAX = (59, 59, 23, 31, 12, 7, None)
_MONTHS = {n: i + 1 for i, n in enumerate(
    ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"))}
_DAYS = {n: i + 1 for i, n in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
_LAST_DAY_FORMS = re.compile(r"L-[0-9]*W?")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_EXPECTED = (
    "0-59, names not allowed; , - * /",
    "0-59; , - * /",
    "0-23; , - * /",
    "1-31, ?, L, L-n, LW, nW; , - * /",
    "1-12 or JAN-DEC; , - * /",
    "1-7 (1 = SUN) or SUN-SAT, ?, L, nL, n#k (k 1-5); , - * /",
    "1970-2126; , - * /",
)


class _Refused(Exception):
    """One token Quartz would refuse; ``why`` says what would be valid."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass(frozen=True, slots=True)
class QuartzExpression:
    """The value sets and flags of a parsed Quartz expression (Quartz's own model).

    ``values[k]`` is the sorted value set of field ``k`` (seconds..year); it may
    hold the markers :data:`ALL_SPEC` and :data:`NO_SPEC` like Quartz's sets do.
    """

    text: str
    fields: tuple[str, ...]
    values: tuple[tuple[int, ...], ...]
    last_day_of_month: bool
    last_day_offset: int
    nearest_weekday: bool
    last_day_of_week: bool
    nth_day_of_week: int

    @property
    def day_of_month_spec(self) -> bool:
        """True when the day is chosen by the day-of-month field (day-of-week is ``?``)."""
        return NO_SPEC not in self.values[DAY_OF_MONTH]


#: Value sets shared between parsed expressions: most fields are '*' or a small common set, and a
#: wheel holding 100k cron timers would otherwise hold 100k copies of the 330 years of '*'.
_SHARED: dict[tuple[int, ...], tuple[int, ...]] = {}
_SHARED_MAX = 20_000


def _interned(values: tuple[int, ...]) -> tuple[int, ...]:
    shared = _SHARED.get(values)
    if shared is not None:
        return shared
    if len(_SHARED) < _SHARED_MAX:
        _SHARED[values] = values
    return values


@dataclass(slots=True)
class _Builder:
    sets: list[set[int]] = field(default_factory=lambda: [set() for _ in range(7)])
    last_day_of_month: bool = False
    last_day_offset: int = 0
    nearest_weekday: bool = False
    last_day_of_week: bool = False
    nth_day_of_week: int = 0


def parse_quartz(expression: str, field_prefix: str = "expression") -> QuartzExpression:
    """Parse a 6- or 7-field Quartz expression.

    :raises InvalidTrigger: naming ``expression.<field>``, the offending text and what is valid
    """
    text = expression.upper()
    tokens = [t for t in re.split(r"[ \t]+", text) if t]
    if len(tokens) < 6:
        raise InvalidTrigger(field_prefix, expression, "6 or 7 space-separated fields (Quartz) or 5 (Unix)")
    tokens = tokens[:7]  # Quartz ignores anything after the year field
    builder = _Builder()
    for kind, token in enumerate(tokens):
        _parse_field(builder, kind, token, field_prefix)
    if len(tokens) == 6:
        _add(builder, YEAR, ALL_SPEC, -1, 0)
    _check_day_fields(builder, tokens, field_prefix)
    _check_evaluable(builder, tokens, field_prefix)
    return _freeze(expression, tokens, builder)


def _parse_field(builder: _Builder, kind: int, token: str, prefix: str) -> None:
    name = f"{prefix}.{FIELD_NAMES[kind]}"
    try:
        _check_field_shape(kind, token)
        for part in token.split(","):
            if part:
                _store(builder, kind, part)
    except _Refused as refused:
        raise InvalidTrigger(name, token, f"{refused.why} (valid: {_EXPECTED[kind]})") from None


def _check_field_shape(kind: int, token: str) -> None:
    if kind == DAY_OF_MONTH and "L" in token and len(token) > 1 and "," in token:
        raise _Refused("'L' and 'LW' cannot be combined with other days of the month")
    if kind == DAY_OF_WEEK and "L" in token and len(token) > 1 and "," in token:
        raise _Refused("'L' cannot be combined with other days of the week")
    if kind == DAY_OF_WEEK and token.count("#") > 1:
        raise _Refused("only one 'n#k' is allowed")


def _check_day_fields(builder: _Builder, tokens: list[str], prefix: str) -> None:
    dom_given = NO_SPEC not in builder.sets[DAY_OF_MONTH]
    dow_given = NO_SPEC not in builder.sets[DAY_OF_WEEK]
    if dom_given == dow_given:
        raise InvalidTrigger(f"{prefix}.day_of_week", tokens[DAY_OF_WEEK],
                             "'?' in exactly one of day-of-month and day-of-week "
                             "(Quartz cannot combine them)")


def _check_evaluable(builder: _Builder, tokens: list[str], prefix: str) -> None:
    for kind in (SECOND, MINUTE, HOUR, MONTH):
        if not builder.sets[kind]:
            raise InvalidTrigger(f"{prefix}.{FIELD_NAMES[kind]}", tokens[kind],
                                 f"at least one value ({_EXPECTED[kind]}); Quartz accepts this "
                                 "but fails when it evaluates it")
    dom = builder.sets[DAY_OF_MONTH]
    if builder.nearest_weekday and not builder.last_day_of_month and NO_SPEC not in dom and min(dom) < 1:
        raise InvalidTrigger(f"{prefix}.day_of_month", tokens[DAY_OF_MONTH],
                             "nW with n in 1-31; Quartz accepts 0W but never finishes evaluating it")


def _freeze(expression: str, tokens: list[str], b: _Builder) -> QuartzExpression:
    return QuartzExpression(
        text=expression, fields=tuple(tokens), values=tuple(_interned(tuple(sorted(s))) for s in b.sets),
        last_day_of_month=b.last_day_of_month, last_day_offset=b.last_day_offset,
        nearest_weekday=b.nearest_weekday, last_day_of_week=b.last_day_of_week,
        nth_day_of_week=b.nth_day_of_week)


# --- one comma-separated part of a field ------------------------------------------------------


def _store(b: _Builder, kind: int, part: str) -> None:
    first = part[0]
    if "A" <= first <= "Z" and not _is_last_day_form(part):
        _store_name(b, kind, part)
    elif first == "?":
        _store_no_spec(b, kind, part)
    elif first in "*/":
        _store_all(b, kind, part)
    elif first == "L":
        _store_last(b, kind, part)
    elif "0" <= first <= "9":
        _store_number(b, kind, part)
    else:
        raise _Refused(f"unexpected character {first!r}")


def _is_last_day_form(part: str) -> bool:
    return part in ("L", "LW") or _LAST_DAY_FORMS.fullmatch(part) is not None


def _store_name(b: _Builder, kind: int, part: str) -> None:
    if kind not in (MONTH, DAY_OF_WEEK):
        raise _Refused(f"names are not allowed here: {part[:3]!r}")
    names = _MONTHS if kind == MONTH else _DAYS
    start = _name(names, part[:3], len(part) >= 3)
    end = -1
    after = part[3:4]
    if after == "-":
        end = _name(names, part[4:7], len(part) >= 7)
    elif after == "#" and kind == DAY_OF_WEEK:
        b.nth_day_of_week = _nth(part[4:])
    elif after == "L" and kind == DAY_OF_WEEK:
        b.last_day_of_week = True
    _add(b, kind, start, end, 1 if end != -1 else 0)


def _name(names: dict[str, int], text: str, complete: bool) -> int:
    value = names.get(text) if complete else None
    if value is None:
        raise _Refused(f"unknown name {text!r}")
    return value


def _nth(text: str) -> int:
    value = _java_int(text, "a number 1-5 after '#'")
    if not 1 <= value <= 5:
        raise _Refused("a number 1-5 after '#'")
    return value


def _store_no_spec(b: _Builder, kind: int, part: str) -> None:
    if len(part) > 2:
        raise _Refused(f"nothing after '?' (got {part!r})")
    if kind not in (DAY_OF_MONTH, DAY_OF_WEEK):
        raise _Refused("'?' only in day-of-month or day-of-week")
    if kind == DAY_OF_WEEK and not b.last_day_of_month:
        dom = b.sets[DAY_OF_MONTH]
        if not dom or max(dom) == NO_SPEC:
            raise _Refused("'?' in day-of-month or day-of-week, not both")
    _add(b, kind, NO_SPEC, -1, 0)


def _store_all(b: _Builder, kind: int, part: str) -> None:
    if part == "*":
        _add(b, kind, ALL_SPEC, -1, 0)
        return
    if part == "/":
        raise _Refused("an integer after '/'")
    rest = part[1:] if part[0] == "*" else part
    step = 1
    if rest[:1] == "/":
        if len(rest) == 1:
            raise _Refused("an integer after '/'")
        step = _java_int(rest[1:], "an integer after '/'")
        _check_step(kind, step)
    _add(b, kind, ALL_SPEC, -1, step)


def _check_step(kind: int, step: int) -> None:
    limit = _STEP_MAX[kind]
    if limit is not None and step > limit:
        raise _Refused(f"an increment of at most {limit}")


def _store_last(b: _Builder, kind: int, part: str) -> None:
    if kind == DAY_OF_WEEK:
        _add(b, kind, 7, 7, 0)
    if kind != DAY_OF_MONTH:
        return  # Quartz accepts and ignores 'L' in the other fields
    b.last_day_of_month = True
    pos = 1
    if part[1:2] == "-":
        offset, pos = _digits_from(part, 2, "a number after 'L-'")
        if offset > 30:
            raise _Refused("an offset from the last day of at most 30")
        b.last_day_offset = offset
    if part[pos:pos + 1] == "W":
        b.nearest_weekday = True


def _digits_from(part: str, pos: int, why: str) -> tuple[int, int]:
    """Quartz's digit run at ``pos`` (which must exist; no digits reads as 0) and the position after it."""
    if pos >= len(part):
        raise _Refused(why)
    end = pos
    while end < len(part) and part[end].isdigit():
        end += 1
    value = int("0" + part[pos:end])
    if value > _INT_MAX:
        raise _Refused(why)
    return value, end


def _store_number(b: _Builder, kind: int, part: str) -> None:
    value, pos = _digits_from(part, 0, "a number")
    after = part[pos:pos + 1]
    handler = _AFTER_NUMBER.get(after)
    if handler is None:
        _add(b, kind, value, -1, 0)  # anything else after the number is ignored, as Quartz does
    else:
        handler(b, kind, part, value, pos)


def _number_then_last(b: _Builder, kind: int, part: str, value: int, pos: int) -> None:
    if kind != DAY_OF_WEEK:
        raise _Refused("'nL' only in day-of-week")
    if not 1 <= value <= 7:
        raise _Refused("a day of week 1-7 before 'L'")
    b.last_day_of_week = True
    b.sets[kind].add(value)


def _number_then_weekday(b: _Builder, kind: int, part: str, value: int, pos: int) -> None:
    if kind != DAY_OF_MONTH:
        raise _Refused("'nW' only in day-of-month")
    if value > 31:
        raise _Refused("a day of month 1-31 before 'W'")
    b.nearest_weekday = True
    b.sets[kind].add(value)


def _number_then_nth(b: _Builder, kind: int, part: str, value: int, pos: int) -> None:
    if kind != DAY_OF_WEEK:
        raise _Refused("'n#k' only in day-of-week")
    b.nth_day_of_week = _nth(part[pos + 1:])
    b.sets[kind].add(value)


def _number_then_range(b: _Builder, kind: int, part: str, value: int, pos: int) -> None:
    if pos + 1 >= len(part) or not part[pos + 1].isdigit():
        raise _Refused("a number after '-'")
    end, pos = _digits_from(part, pos + 1, "a number after '-'")
    step = 1
    if part[pos:pos + 1] == "/":
        if pos + 1 >= len(part) or not part[pos + 1].isdigit():
            raise _Refused("an integer after '/'")
        step, _ = _digits_from(part, pos + 1, "an integer after '/'")
    _add(b, kind, value, end, step)  # Quartz does not bound the increment of a range


def _number_then_step(b: _Builder, kind: int, part: str, value: int, pos: int) -> None:
    if pos + 1 >= len(part) or not part[pos + 1].isdigit():
        raise _Refused("an integer after '/'")
    step, end = _digits_from(part, pos + 1, "an integer after '/'")
    if end == pos + 2 and end < len(part):
        raise _Refused(f"only digits after '/' (got {part[end]!r})")
    _check_step(kind, step)
    _add(b, kind, value, -1, step)


_AFTER_NUMBER = {
    "L": _number_then_last,
    "W": _number_then_weekday,
    "#": _number_then_nth,
    "-": _number_then_range,
    "/": _number_then_step,
}


def _java_int(text: str, why: str) -> int:
    if _JAVA_INT.fullmatch(text) is None or not -(2**31) <= int(text) <= _INT_MAX:
        raise _Refused(why)
    return int(text)


# --- Quartz's addToSet -----------------------------------------------------------------------


def _check_bounds(kind: int, start: int, end: int) -> None:
    if kind == YEAR or (start in (ALL_SPEC, NO_SPEC) and kind in (DAY_OF_MONTH, DAY_OF_WEEK)):
        return
    if start == ALL_SPEC:
        return
    low = 1 if kind == DAY_OF_WEEK else _MIN[kind]
    if start < low or start > _MAX[kind] or end > _MAX[kind]:
        raise _Refused(f"values {low}-{_MAX[kind]}")


def _add(b: _Builder, kind: int, start: int, end: int, step: int) -> None:
    """Add ``start[-end][/step]`` to the field's set the way Quartz does (ranges may wrap)."""
    _check_bounds(kind, start, end)
    target = b.sets[kind]
    if step in (0, -1) and start != ALL_SPEC:
        target.add(start if start != -1 else NO_SPEC)
        return
    if start == ALL_SPEC and step <= 0:
        step = 1
        target.add(ALL_SPEC)
    low = _MIN[kind] if start in (-1, ALL_SPEC) else start
    high = _MAX[kind] if end == -1 else end
    target.update(_range_values(kind, low, high, step))


def _range_values(kind: int, low: int, high: int, step: int) -> list[int]:
    wrap = 0
    if high < low:
        if kind == YEAR:
            raise _Refused("a start year before the end year")
        wrap = _WRAP[kind]
        high += wrap
    if kind == YEAR:
        high = min(high, MAX_YEAR + 1)  # later years can never fire: Quartz stops after MAX_YEAR
    if not wrap:
        return list(range(low, high + 1, step))
    one_based = kind in (MONTH, DAY_OF_WEEK, DAY_OF_MONTH)
    return [(v % wrap) or (wrap if one_based else 0) for v in range(low, high + 1, step)]
