"""Regenerate the committed Quartz test vectors under tests/triggers/vectors/ from real Quartz 2.3.2.

    .venv/bin/python tools/quartz-vectors/generate.py

Needs java, javac and Debian's libquartz2-java (/usr/share/java/quartz2.jar). Writes:

- quartz_random.json: random expressions (a fifth of them mutated to probe the parser) in many zones
- quartz_edges.json:  hand-picked corner cases (W, L-n, LW, nL, #5, leap years, years, wrapping ranges)
- quartz_dst.json:    New York, Berlin and Lord Howe, starting just before each 2026/2027 transition
- quartz_invalid.json: expressions Quartz rejects, or accepts but cannot evaluate
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cases as case_gen
import quartz

OUT = Path(__file__).resolve().parents[2] / "tests" / "triggers" / "vectors"
FIRES = 5

EDGE_EXPRESSIONS = (
    "0 0 12 1W * ?", "0 0 12 2W * ?", "0 0 12 15W * ?", "0 0 12 28W * ?", "0 0 12 29W * ?", "0 0 12 30W * ?",
    "0 0 12 31W * ?", "0 0 12 31W 2 ?", "0 0 12 30W 2,4 ?", "0 0 12 LW * ?", "0 0 12 L * ?", "0 0 12 L-1 * ?",
    "0 0 12 L-2 2 ?", "0 0 12 L-27 2 ?", "0 0 12 L-28 * ?", "0 0 12 L-30 * ?", "0 0 12 L-3W * ?", "0 0 12 L-1W * ?",
    "0 0 12 L-25W 1,3,5 ?", "0 0 12 ? * 6L", "0 0 12 ? * 1L", "0 0 12 ? * FRIL", "0 0 12 ? * L", "0 0 12 ? * 2#5",
    "0 0 12 ? * 7#5", "0 0 12 ? * 1#5 2027", "0 0 12 ? * MON#1", "0 0 12 ? * 6#3", "0 0 0 29 2 ?",
    "0 0 0 29 2 ? 2096", "0 0 0 29 2 ? 2100", "0 0 0 29 2 ? 2104", "0 0 0 30 2 ?", "0 0 0 31 4,6,9,11 ?",
    "0 0 0 1 1 ? 2099-2101", "0 0 0 1 1 ? 2125-2130", "0 0 0 1 1 ? 2126", "0 0 0 1 1 ? 2127", "0 0 0 1 1 ? 2200",
    "0 0 0 * * ? 2126", "0 0 22-2 * * ?", "0 0 0 ? * FRI-MON", "0 0 0 ? * 6-2", "0 0 0 28-3 * ?", "0 0 0 1 NOV-FEB ?",
    "0 0 0 1 11-2 ?", "50-10/5 * * * * ?", "0 0 1-23/4 * * ?", "0 0 0 5-25/7 * ?", "0 0 0 ? * 2-6/2",
    "0 0 0 1 1/5 ?", "0 0/25 * * * ?", "*/0 0 0 * * ?", "0 0 0 ? * MON-FRI/2", "0 0 0 ? * MONDAY",
    "5X 0 0 * * ?", "0 0 0 ?X * MON", "0 0 0 * * ? 2027 extra", "0 0 0 ? * 0#2", "0 0 0 ? * 8#2",
    "0 0 0 * * ? L", "0 0 12 1,15 * ?", "0 15 10 ? * 6L 2026-2028", "0 0 0 L-28W 1 ?", "0 0 0 L-30W 1 ? 2027",
)

INVALID_EXPRESSIONS = (
    "0 0 12 * * MON", "0 0 12 ? * ?", "60 0 0 * * ?", "0 60 0 * * ?", "0 0 24 * * ?", "0 0 0 0 * ?",
    "0 0 0 32 * ?", "0 0 0 * 0 ?", "0 0 0 * 13 ?", "0 0 0 ? * 0", "0 0 0 ? * 8", "0 0 0 ? * 1-8",
    "0 0 0 1 1 ? 2030-2020", "0 0 0 L,5 * ?", "0 0 0 ? * 1L,2", "0 0 0 ? * 1#2,3#4", "0 0 0 ? * 2#6",
    "0 0 0 ? * 2#0", "0 0 0 L-31 * ?", "0 0 0 32W * ?", "0 0 0 5L * ?", "0 0 0 ? * 5W", "5W 0 0 * * ?",
    "0 0 0 ? 5# MON", "*/60 0 0 * * ?", "0 */60 * * * ?", "0 0 */24 * * ?", "0 0 0 */32 * ?",
    "0 0 0 ? */13 ?", "0 0 0 ? * */8", "0 0 0 ? * FOO", "0 0 0 * FOO ?", "0 0 0 * JAN-FOO ?", "0 0 * * *",
    "0 0 0 * * ? *", "A 0 0 * * ?", "0 0 0 MON * ?", "0 0 0 * * ?X", "0 0 0 ??? * MON", "0 0 0 * * ? 2027/",
    "0 0 0 1-X * ?", "0 0 0 1- * ?", "0 0 0 5/ * ?", "0 0 0 5/X * ?", "0 0 0 */ * ?", "0 0 0 L- * ?",
    "0 0 0 ? * MO", "0 0 0 9999999999 * ?", "L 0 0 * * ?", "0 L 0 * * ?", "0 0 L * * ?", "0 0 0 * L ?",
    "0 0 0 0W * ?", "0 0 0 L-28W * ?", "0 0 0 L-30W * ?", "0 0 0 * * MON#2",
)


def _iso(ms: int, zone: str) -> str:
    when = datetime.fromtimestamp(ms / 1000, UTC).astimezone(ZoneInfo(zone))
    return when.isoformat(timespec="seconds")


def _start_iso(ms: int) -> str:
    when = datetime.fromtimestamp(ms // 1000, UTC) + timedelta(milliseconds=ms % 1000)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _record(answer: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "expression": answer["expression"], "timezone": answer["timezone"],
        "start": _start_iso(answer["start_ms"]), "outcome": answer["outcome"],
    }
    if answer["outcome"] == "ok":
        record["fires"] = [_iso(ms, answer["timezone"]) for ms in answer["fires_ms"]]
    elif "message" in answer:
        record["quartz_message"] = answer["message"]
    return record


def _java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True)
    return out.stderr.splitlines()[0]


def _write(name: str, about: str, todo: list[tuple[str, str, int]]) -> None:
    answers = quartz.run(todo, FIRES)
    header = {
        "about": about,
        "generated_by": "tools/quartz-vectors/generate.py (QuartzVectors.java over Quartz 2.3.2)",
        "java": _java_version(),
        "fires_per_case": FIRES,
    }
    head = json.dumps(header, ensure_ascii=False)[:-1]
    rows = ",\n".join(json.dumps(_record(a), ensure_ascii=False) for a in answers)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(f'{head}, "cases": [\n{rows}\n]}}\n', encoding="utf-8")
    print(f"{name}: {len(answers)} cases")


def _starts_near_transitions(zone: str) -> list[int]:
    offsets = (-3 * 3600, -3600 - 1, -1800, -1, 0, 1800, 3600)
    return [int((t + timedelta(seconds=o)).timestamp()) * 1000
            for t in case_gen.transitions(zone, range(2026, 2028)) for o in offsets]


DST_EXPRESSIONS = (
    "0 30 2 * * ?", "0 0 2 * * ?", "0 15 2 * * ?", "0 30 1 * * ?", "0 0 1 * * ?", "0 0 3 * * ?",
    "0 */15 * * * ?", "0 0 * * * ?", "0 30 * * * ?", "0 0/30 1-3 * * ?", "0 0 9,18 * * ?", "0 45 1,2 ? * SUN",
    "30 59 1 * * ?", "0 0 0 * * ?", "0 0 */2 * * ?", "0 0 12 L * ?",
)


def main() -> None:
    _write("quartz_random.json", "random expressions, zones and start instants (seed 20261129)",
           list(case_gen.cases(20261129, 3000, mutate=0.2)))
    edge_starts = (1767225600000, 1790000000000, 1835000000000, 2108000000000, 4070908800000, 4102444800000)
    _write("quartz_edges.json", "hand-picked corner cases",
           [(e, z, s) for e in EDGE_EXPRESSIONS for z in ("UTC", "America/New_York") for s in edge_starts])
    _write("quartz_dst.json", "DST transitions of 2026 and 2027 in New York, Berlin and Lord Howe",
           [(e, z, s) for z in case_gen.DST_ZONES for e in DST_EXPRESSIONS for s in _starts_near_transitions(z)])
    _write("quartz_invalid.json", "expressions Quartz rejects, or accepts but cannot evaluate",
           [(e, "UTC", 1790000000000) for e in INVALID_EXPRESSIONS])


if __name__ == "__main__":
    main()
