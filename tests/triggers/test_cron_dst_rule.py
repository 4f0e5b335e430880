"""The default DST policy of the cron trigger is the cron daemon's rule (Debian cron(8), Vixie cron 3.0pl1).

A job whose minute or hour field begins with ``*`` is a wildcard job: on spring-forward it does not
catch up on skipped times, on fall-back it fires in both passes. Any other job is fixed-time: a
skipped time fires once right after the jump, a repeated time only in the first pass.
Each case lists the fires (" *" = with a note) from just before the transition, for both dialects.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from actwheel.triggers import parse, preview_fires
from actwheel.triggers.dst import DstPolicy, is_wildcard_job

NY, BERLIN = "America/New_York", "Europe/Berlin"

# (zone, kind): (Unix expression, start, expected fires with " *" marking a note)
SPRING_FORWARD: dict[tuple[str, str], tuple[str, str, list[str]]] = {
    (NY, "fixed"): ("30 2 * * *", "2027-03-14T00:50:00-05:00",
                    ["2027-03-14T03:00:00-04:00 *", "2027-03-15T02:30:00-04:00"]),
    (NY, "wildcard minute"): ("*/20 2 * * *", "2027-03-14T00:50:00-05:00",
                              ["2027-03-15T02:00:00-04:00 *", "2027-03-15T02:20:00-04:00"]),
    (NY, "wildcard hour"): ("15 * * * *", "2027-03-14T00:50:00-05:00",
                            ["2027-03-14T01:15:00-05:00", "2027-03-14T03:15:00-04:00 *",
                             "2027-03-14T04:15:00-04:00"]),
    (NY, "step hour"): ("0 0-23/2 * * *", "2027-03-14T00:50:00-05:00",
                        ["2027-03-14T03:00:00-04:00 *", "2027-03-14T04:00:00-04:00"]),
    (NY, "step hour from *"): ("0 */2 * * *", "2027-03-14T00:50:00-05:00",
                               ["2027-03-14T04:00:00-04:00 *", "2027-03-14T06:00:00-04:00"]),
    (BERLIN, "fixed"): ("30 2 * * *", "2027-03-28T00:50:00+01:00",
                        ["2027-03-28T03:00:00+02:00 *", "2027-03-29T02:30:00+02:00"]),
    (BERLIN, "wildcard minute"): ("*/20 2 * * *", "2027-03-28T00:50:00+01:00",
                                  ["2027-03-29T02:00:00+02:00 *", "2027-03-29T02:20:00+02:00"]),
    (BERLIN, "wildcard hour"): ("15 * * * *", "2027-03-28T00:50:00+01:00",
                                ["2027-03-28T01:15:00+01:00", "2027-03-28T03:15:00+02:00 *",
                                 "2027-03-28T04:15:00+02:00"]),
    (BERLIN, "step hour"): ("0 0-23/2 * * *", "2027-03-28T00:50:00+01:00",
                            ["2027-03-28T03:00:00+02:00 *", "2027-03-28T04:00:00+02:00"]),
    (BERLIN, "step hour from *"): ("0 */2 * * *", "2027-03-28T00:50:00+01:00",
                                   ["2027-03-28T04:00:00+02:00 *", "2027-03-28T06:00:00+02:00"]),
}

FALL_BACK: dict[tuple[str, str], tuple[str, str, list[str]]] = {
    (NY, "fixed"): ("30 1 * * *", "2027-11-07T00:50:00-04:00",
                    ["2027-11-07T01:30:00-04:00 *", "2027-11-08T01:30:00-05:00"]),
    (NY, "wildcard minute"): ("*/20 1 * * *", "2027-11-07T00:50:00-04:00",
                              ["2027-11-07T01:00:00-04:00 *", "2027-11-07T01:20:00-04:00 *",
                               "2027-11-07T01:40:00-04:00 *", "2027-11-07T01:00:00-05:00 *",
                               "2027-11-07T01:20:00-05:00 *", "2027-11-07T01:40:00-05:00 *",
                               "2027-11-08T01:00:00-05:00"]),
    (NY, "wildcard hour"): ("15 * * * *", "2027-11-07T00:50:00-04:00",
                            ["2027-11-07T01:15:00-04:00 *", "2027-11-07T01:15:00-05:00 *",
                             "2027-11-07T02:15:00-05:00"]),
    (NY, "step hour"): ("0 1-23/2 * * *", "2027-11-07T00:50:00-04:00",
                        ["2027-11-07T01:00:00-04:00 *", "2027-11-07T03:00:00-05:00"]),
    (NY, "step hour from *"): ("0 */1 * * *", "2027-11-07T00:50:00-04:00",
                               ["2027-11-07T01:00:00-04:00 *", "2027-11-07T01:00:00-05:00 *",
                                "2027-11-07T02:00:00-05:00"]),
    (BERLIN, "fixed"): ("30 2 * * *", "2027-10-31T01:50:00+02:00",
                        ["2027-10-31T02:30:00+02:00 *", "2027-11-01T02:30:00+01:00"]),
    (BERLIN, "wildcard minute"): ("*/20 2 * * *", "2027-10-31T01:50:00+02:00",
                                  ["2027-10-31T02:00:00+02:00 *", "2027-10-31T02:20:00+02:00 *",
                                   "2027-10-31T02:40:00+02:00 *", "2027-10-31T02:00:00+01:00 *",
                                   "2027-10-31T02:20:00+01:00 *", "2027-10-31T02:40:00+01:00 *",
                                   "2027-11-01T02:00:00+01:00"]),
    (BERLIN, "wildcard hour"): ("15 * * * *", "2027-10-31T01:50:00+02:00",
                                ["2027-10-31T02:15:00+02:00 *", "2027-10-31T02:15:00+01:00 *",
                                 "2027-10-31T03:15:00+01:00"]),
    (BERLIN, "step hour"): ("0 0-23/2 * * *", "2027-10-31T01:50:00+02:00",
                            ["2027-10-31T02:00:00+02:00 *", "2027-10-31T04:00:00+01:00"]),
    (BERLIN, "step hour from *"): ("0 */2 * * *", "2027-10-31T01:50:00+02:00",
                                   ["2027-10-31T02:00:00+02:00 *", "2027-10-31T02:00:00+01:00 *",
                                    "2027-10-31T04:00:00+01:00"]),
}


def _quartz(unix: str) -> str:
    """The Quartz twin of a Unix expression whose day fields are both ``*``."""
    minute, hour, day, month, weekday = unix.split()
    assert (day, weekday) == ("*", "*")
    return f"0 {minute} {hour} * {month} ?"


def _fires(expression: str, zone: str, after: str, count: int, dst: Any = None) -> list[str]:
    spec = {"type": "cron", "expression": expression, "timezone": zone} | ({} if dst is None else {"dst": dst})
    fires = preview_fires(spec, after=datetime.fromisoformat(after), count=count)
    return [f.at.isoformat() + (" *" if f.note else "") for f in fires]


def _notes(expression: str, zone: str, after: str, count: int) -> list[str | None]:
    spec = {"type": "cron", "expression": expression, "timezone": zone}
    return [f.note for f in preview_fires(spec, after=datetime.fromisoformat(after), count=count)]


@pytest.mark.parametrize("dialect", ["unix", "quartz"])
@pytest.mark.parametrize("case", sorted(SPRING_FORWARD), ids=" / ".join)
def test_spring_forward_follows_crons_rule(case: tuple[str, str], dialect: str) -> None:
    expression, start, expected = SPRING_FORWARD[case]
    if dialect == "quartz":
        expression = _quartz(expression)

    assert _fires(expression, case[0], start, len(expected)) == expected


@pytest.mark.parametrize("dialect", ["unix", "quartz"])
@pytest.mark.parametrize("case", sorted(FALL_BACK), ids=" / ".join)
def test_fall_back_follows_crons_rule(case: tuple[str, str], dialect: str) -> None:
    expression, start, expected = FALL_BACK[case]
    if dialect == "quartz":
        expression = _quartz(expression)

    assert _fires(expression, case[0], start, len(expected)) == expected


@pytest.mark.parametrize(
    ("minute", "hour", "wildcard"),
    [
        ("*", "*", True),
        ("15", "*", True),
        ("*/20", "1", True),
        ("*", "9-17", True),
        ("0", "*/2", True),
        ("0", "0-23/2", False),
        ("0-59/5", "1", False),
        ("30", "9,18", False),
        ("0,*", "1", False),  # cron looks at the first character only
    ],
)
def test_a_wildcard_job_is_one_whose_minute_or_hour_begins_with_a_star(minute: str, hour: str,
                                                                       wildcard: bool) -> None:
    assert is_wildcard_job(minute, hour) is wildcard


def test_a_wildcard_job_does_not_catch_up_on_the_skipped_slot() -> None:
    """The issue's example: the real hourly interval, no extra fire at 03:00 EDT."""
    assert _fires("15 * * * *", NY, "2027-03-14T00:50:00-05:00", 3) == [
        "2027-03-14T01:15:00-05:00", "2027-03-14T03:15:00-04:00 *", "2027-03-14T04:15:00-04:00"]
    assert _notes("15 * * * *", NY, "2027-03-14T01:15:00-05:00", 1) == [
        "DST gap: skipped 2027-03-14 02:15:00 (not in America/New_York)"]


def test_a_fixed_time_job_fires_right_after_the_jump_with_a_note() -> None:
    assert _notes("30 2 * * *", NY, "2027-03-14T00:00:00-05:00", 1) == [
        "DST gap: 02:30:00 does not exist in America/New_York on 2027-03-14; "
        "fired right after the jump at 03:00:00 EDT"]


def test_fold_notes_say_which_pass_fired() -> None:
    assert _notes("*/20 1 * * *", NY, "2027-11-07T01:30:00-04:00", 2) == [
        "DST fold: 01:40:00 occurs twice in America/New_York on 2027-11-07; first of two fires",
        "DST fold: 01:00:00 occurs twice in America/New_York on 2027-11-07; second of two fires"]
    assert _notes("0 0-23/2 * * *", BERLIN, "2027-10-31T01:00:00+02:00", 1) == [
        "DST fold: 02:00:00 occurs twice in Europe/Berlin on 2027-10-31; fired at the first (CEST) only"]


def test_quartz_seconds_do_not_make_a_wildcard_job() -> None:
    """Only the minute and hour fields count, as cron has no seconds: this is a fixed-time job."""
    assert _fires("*/30 30 2 * * ?", NY, "2027-03-14T00:00:00-05:00", 2) == [
        "2027-03-14T03:00:00-04:00 *", "2027-03-15T02:30:00-04:00"]


def test_explicit_policies_keep_their_meaning() -> None:
    spring, fall = "2027-03-14T00:50:00-05:00", "2027-11-07T00:50:00-04:00"

    assert _fires("15 * * * *", NY, spring, 3, {"gap": "shift"}) == [
        "2027-03-14T01:15:00-05:00", "2027-03-14T03:00:00-04:00 *", "2027-03-14T03:15:00-04:00"]
    assert _fires("30 2 * * *", NY, spring, 1, {"gap": "skip"}) == ["2027-03-15T02:30:00-04:00 *"]
    assert _fires("*/20 1 * * *", NY, fall, 4, {"fold": "first"}) == [
        "2027-11-07T01:00:00-04:00 *", "2027-11-07T01:20:00-04:00 *", "2027-11-07T01:40:00-04:00 *",
        "2027-11-08T01:00:00-05:00"]
    assert _fires("0 1-23/2 * * *", NY, fall, 3, {"fold": "both"}) == [
        "2027-11-07T01:00:00-04:00 *", "2027-11-07T01:00:00-05:00 *", "2027-11-07T03:00:00-05:00"]


def test_quartz_policy_is_unchanged() -> None:
    assert _fires("0 15 * * * ?", NY, "2027-03-14T00:50:00-05:00", 2, "quartz") == [
        "2027-03-14T01:15:00-05:00", "2027-03-14T03:15:00-04:00"]
    assert _fires("0 */20 1 * * ?", NY, "2027-11-07T00:50:00-04:00", 4, "quartz") == [
        "2027-11-07T01:00:00-05:00", "2027-11-07T01:20:00-05:00", "2027-11-07T01:40:00-05:00",
        "2027-11-08T01:00:00-05:00"]


def test_an_explicit_gap_survives_a_round_trip_and_the_default_stays_implicit() -> None:
    explicit = parse({"type": "cron", "expression": "15 * * * *", "timezone": NY, "dst": {"gap": "shift"}})
    default = parse({"type": "cron", "expression": "15 * * * *", "timezone": NY})

    assert parse(explicit.to_spec()) == explicit
    assert explicit.to_spec()["dst"] == {"gap": "shift", "fold": "auto"}
    assert "dst" not in default.to_spec()
    assert parse({"type": "cron", "expression": "15 * * * *", "timezone": NY, "dst": "default"}) == default


def test_auto_names_crons_rule_explicitly() -> None:
    assert DstPolicy.parse({"gap": "auto", "fold": "auto"}) == DstPolicy.parse("default")
    assert DstPolicy.parse("default").to_spec() is None
