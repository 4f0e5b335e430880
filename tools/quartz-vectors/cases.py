"""Random but reproducible Quartz test cases: expressions, zones and start instants.

Used by ``generate.py`` (committed vectors) and ``compare.py`` (local fuzzing).
Every Quartz feature appears: lists, ranges (also wrapping ones such as 22-2
and FRI-MON), steps, names, ``? L L-n LW L-nW nW nL n#k``, the year field
(also past 2099 and past Quartz's last year), plus mutated expressions that
probe what Quartz accepts and rejects.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

ZONES = (
    "UTC", "Asia/Shanghai", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe",
    "Europe/London", "Australia/Sydney", "Pacific/Auckland", "America/Sao_Paulo", "America/Santiago",
    "Asia/Kolkata", "Asia/Kathmandu", "Pacific/Chatham", "America/St_Johns", "America/Havana",
    "Asia/Beirut", "Africa/Casablanca", "Antarctica/Troll", "America/Asuncion", "Europe/Moscow",
    "Asia/Tehran", "America/Los_Angeles", "Pacific/Apia", "Asia/Tokyo", "America/Nuuk",
)
DST_ZONES = ("America/New_York", "Europe/Berlin", "Australia/Lord_Howe")
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_JUNK = "0123456789*/-,?LW#ABCDEFHIJMNORSTUVXY "


def _plain(rng: random.Random, low: int, high: int, names: tuple[str, ...] = ()) -> str:
    def value() -> str:
        v = rng.randint(low, high)
        return names[v - low] if names and rng.random() < 0.4 else str(v)

    kind = rng.choice(("star", "one", "list", "range", "step", "range_step", "star_step"))
    if kind == "star":
        return "*"
    if kind == "one":
        return value()
    if kind == "list":
        return ",".join(value() for _ in range(rng.randint(2, 4)))
    if kind == "range":
        return f"{value()}-{value()}"  # may wrap (22-2, FRI-MON)
    step = rng.randint(1, max(1, (high - low) // 2 + 2))
    if kind == "step":
        return f"{rng.randint(low, high)}/{step}"
    if kind == "range_step":
        return f"{rng.randint(low, high)}-{rng.randint(low, high)}/{step}"
    return f"*/{step}"


def _day_of_month(rng: random.Random) -> str:
    n = rng.randint(1, 31)
    return rng.choice((
        "L", "LW", f"L-{rng.randint(0, 30)}", f"L-{rng.randint(0, 30)}W", f"{n}W",
        f"{rng.choice((1, 2, 28, 29, 30, 31))}W",
        str(rng.choice((28, 29, 30, 31))), _plain(rng, 1, 31), _plain(rng, 1, 31), "*",
    ))


def _day_of_week(rng: random.Random) -> str:
    d = rng.randint(1, 7)
    name = DAYS[d - 1]
    return rng.choice((
        f"{d}L", f"{name}L", f"{d}#{rng.randint(1, 5)}", f"{name}#{rng.randint(1, 5)}", f"{d}#5", "L",
        _plain(rng, 1, 7, DAYS), _plain(rng, 1, 7, DAYS), "MON-FRI", "FRI-MON", "*",
    ))


def _year(rng: random.Random) -> str | None:
    y = rng.randint(2024, 2140)
    return rng.choice((
        None, None, None, str(y), f"{y}-{y + rng.randint(0, 30)}", f"{y}/{rng.randint(1, 20)}", "*",
        f"{rng.randint(2024, 2030)},{rng.randint(2096, 2104)}", "2099-2110", "2120-2135", "2200",
        f"*/{rng.randint(1, 9)}",
    ))


def expression(rng: random.Random) -> str:
    """A structurally valid (mostly) Quartz expression."""
    seconds = rng.choice(("0", "0", "30", _plain(rng, 0, 59)))
    minutes = rng.choice(("0", "30", "*/15", _plain(rng, 0, 59)))
    hours = rng.choice(("0", "2", "9,18", "*", "*/3", "22-2", "1-3", _plain(rng, 0, 23)))
    months = rng.choice(("*", "*", "2", "FEB", "2,4,6,9,11", "NOV-FEB", _plain(rng, 1, 12, MONTHS)))
    if rng.random() < 0.5:
        dom, dow = _day_of_month(rng), "?"
    else:
        dom, dow = "?", _day_of_week(rng)
    fields = [seconds, minutes, hours, dom, months, dow]
    year = _year(rng)
    if year is not None:
        fields.append(year)
    return " ".join(fields)


def mutated(rng: random.Random) -> str:
    """An expression with random edits: probes Quartz's accept/reject boundary."""
    text = list(expression(rng))
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(text) + 1)
        action = rng.random()
        if action < 0.4:
            text.insert(pos, rng.choice(_JUNK))
        elif action < 0.7 and pos < len(text):
            del text[pos]
        elif pos < len(text):
            text[pos] = rng.choice(_JUNK)
    return "".join(text)


def transitions(zone: str, years: range) -> list[datetime]:
    """UTC instants at which the zone's offset changes, found by hourly scanning then bisection."""
    tz = ZoneInfo(zone)
    found: list[datetime] = []
    for year in years:
        t = datetime(year, 1, 1, tzinfo=UTC)
        end = datetime(year + 1, 1, 1, tzinfo=UTC)
        while t < end:
            nxt = t + timedelta(hours=1)
            if t.astimezone(tz).utcoffset() != nxt.astimezone(tz).utcoffset():
                lo, hi = t, nxt
                while hi - lo > timedelta(seconds=1):
                    mid = lo + (hi - lo) / 2
                    if mid.astimezone(tz).utcoffset() == lo.astimezone(tz).utcoffset():
                        lo = mid
                    else:
                        hi = mid
                found.append(hi.replace(microsecond=0))
            t = nxt
    return found


def start_ms(rng: random.Random, zone: str, near: list[datetime]) -> int:
    """A start instant: uniform 1995-2135, or a few hours around a DST transition, or a month end."""
    pick = rng.random()
    if pick < 0.35 and near:
        base = rng.choice(near) + timedelta(seconds=rng.randint(-4 * 3600, 2 * 3600))
    elif pick < 0.55:
        local = datetime(rng.randint(2024, 2104), rng.randint(1, 12), 1, tzinfo=ZoneInfo(zone))
        base = local - timedelta(seconds=rng.randint(1, 3 * 86400))
    else:
        base = datetime(1995, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randint(0, 140 * 365 * 86400))
    ms = 500 if rng.random() < 0.05 else 0
    return int(base.timestamp()) * 1000 + ms


def cases(seed: int, count: int, mutate: float = 0.2) -> Iterator[tuple[str, str, int]]:
    """``count`` (expression, zone, start_ms) triples from ``seed``."""
    rng = random.Random(seed)
    near = {z: transitions(z, range(2025, 2029)) for z in ZONES}
    for _ in range(count):
        zone = rng.choice(DST_ZONES) if rng.random() < 0.4 else rng.choice(ZONES)
        expr = mutated(rng) if rng.random() < mutate else expression(rng)
        yield expr, zone, start_ms(rng, zone, near[zone])
