"""``actwheel preview``: output, notes, --json, exit codes, default --from from the clock."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from actwheel.cli import build_parser, main
from actwheel.clock import VirtualClock
from actwheel.commands import preview as preview_command

CN_WORKDAYS = '{"repeat": "WORKDAYS", "execute_time": "09:30", "calendar": "CN"}'


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["preview", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_repeat_prints_description_fires_with_offsets_and_notes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        ["--repeat", CN_WORKDAYS, "--tz", "Asia/Shanghai", "--from", "2026-09-25T00:00:00+08:00", "-n", "5"],
        capsys,
    )

    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[0] == "every workday (CN calendar) at 09:30, Asia/Shanghai"
    assert lines[1] == "after 2026-09-25T00:00:00+08:00 (Asia/Shanghai):"
    assert lines[2] == (
        "   1  2026-09-28T09:30:00+08:00  Mon  -- skipped holidays in CN: 2026-09-25 (Mid-Autumn Festival)"
    )
    assert lines[3] == "   2  2026-09-29T09:30:00+08:00  Tue"
    assert lines[5].startswith("   4  2026-10-08T09:30:00+08:00  Thu  -- skipped holidays in CN: 2026-10-01")
    assert len(lines) == 7


def test_make_up_saturday_appears_with_its_note(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        ["--repeat", CN_WORKDAYS, "--tz", "Asia/Shanghai", "--from", "2026-10-09T12:00+08:00", "-n", "1"],
        capsys,
    )

    assert code == 0
    assert "2026-10-10T09:30:00+08:00  Sat  -- 2026-10-10 (Saturday) is a make-up workday in CN" in out


def test_dst_note_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        [
            "--repeat",
            '{"repeat": "DAILY", "execute_time": "02:30"}',
            "--tz",
            "America/New_York",
            "--from",
            "2026-03-07T12:00",
            "-n",
            "2",
        ],
        capsys,
    )

    assert code == 0
    assert (
        "2026-03-08T03:00:00-04:00  Sun  -- DST gap: 02:30:00 does not exist in America/New_York on "
        "2026-03-08; fired right after the jump at 03:00:00 EDT"
    ) in out
    assert "2026-03-09T02:30:00-04:00  Mon\n" in out


def test_once_and_the_end_of_the_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        ["--once", "2027-01-01T09:00+08:00[Asia/Shanghai]", "--from", "2026-01-01T00:00Z"], capsys
    )

    assert code == 0
    assert out.splitlines() == [
        "once at 2027-01-01T09:00:00+08:00 (Asia/Shanghai)",
        "after 2026-01-01T08:00:00+08:00 (Asia/Shanghai):",
        "   1  2027-01-01T09:00:00+08:00  Fri",
        "(the schedule has ended)",
    ]


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        [
            "--spec",
            '{"type": "repeat", "repeat": "MONTHLY", "month_day": 1, "execute_time": '
            '"10:00", "calendar": "CN", "on_holiday": "next_workday", "timezone": "Asia/Shanghai"}',
            "--from",
            "2026-09-02T00:00+08:00",
            "-n",
            "2",
            "--json",
        ],
        capsys,
    )

    document = json.loads(out)
    assert code == 0
    assert document["fires"] == [
        {
            "at": "2026-10-08T10:00:00+08:00",
            "note": "2026-10-01 is a holiday (National Day) in CN; moved to 2026-10-08",
        },
        {
            "at": "2026-11-02T10:00:00+08:00",
            "note": "2026-11-01 is a Sunday (not a workday in CN); moved to 2026-11-02",
        },
    ]
    assert document["description"].startswith("monthly on day 1 at 10:00")
    assert document["timezone"] == "Asia/Shanghai"
    assert document["from"] == "2026-09-02T00:00:00+08:00"
    assert document["spec"]["on_holiday"] == "next_workday"
    assert (document["ended"], document["error"], document["is_event"]) == (False, None, False)


def test_event_spec(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--spec", '{"type": "event", "routing_key": "orders.*.created"}'], capsys)

    assert code == 0
    assert "fires when a matching event arrives" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--repeat", '{"repeat": "DAILY", "execute_time": "9:30"}'], "execute_time='9:30'"),
        (["--repeat", "{not json"], "--repeat="),
        (["--repeat", "[1, 2]"], "a JSON object"),
        (["--spec", '{"type": "hourly"}'], "type='hourly'"),
        (["--once", "2027-01-01T09:00"], "at='2027-01-01T09:00'"),
        (["--once", "2027-01-01T09:00Z", "--from", "yesterday"], "--from='yesterday'"),
        (["--once", "2027-01-01T09:00Z", "-n", "-1"], "-n=-1"),
        (["--once", "2027-01-01T09:00Z", "--tz", "Mars/Base"], "timezone='Mars/Base'"),
        (
            [
                "--spec",
                '{"type": "once", "at": "2027-01-01T09:00Z", "timezone": "UTC"}',
                "--tz",
                "Asia/Tokyo",
            ],
            "--tz='Asia/Tokyo'",
        ),
    ],
)
def test_bad_input_exits_2_with_the_error_on_stderr(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(argv, capsys)

    assert code == 2
    assert out == ""
    assert err.startswith("actwheel preview: error: ")
    assert message in err


@pytest.mark.parametrize("argv", [[], ["--once", "x", "--cron", "y"], ["--once", "x", "-n", "ten"]])
def test_bad_options_exit_2_through_argparse(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["preview", *argv])

    assert caught.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_missing_calendar_data_prints_what_it_can_then_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        ["--repeat", CN_WORKDAYS, "--tz", "Asia/Shanghai", "--from", "2026-12-29T00:00+08:00", "-n", "5"],
        capsys,
    )

    assert code == 1
    assert [line.split()[1] for line in out.splitlines()[2:]] == [
        "2026-12-29T09:30:00+08:00",
        "2026-12-30T09:30:00+08:00",
        "2026-12-31T09:30:00+08:00",
    ]
    assert "calendar 'CN' for 2027 is not available yet" in err


def _args(**overrides: Any) -> argparse.Namespace:
    args = build_parser().parse_args(["preview", "--repeat", '{"repeat": "DAILY", "execute_time": "09:00"}'])
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


def test_default_from_is_the_clock_now() -> None:
    clock = VirtualClock(datetime(2031, 5, 6, 10, 0, tzinfo=UTC))
    out, err = io.StringIO(), io.StringIO()

    code = preview_command.run(_args(count=2), clock, out, err)

    assert code == 0
    assert out.getvalue().splitlines()[1:] == [
        "after 2031-05-06T10:00:00+00:00 (UTC):",
        "   1  2031-05-07T09:00:00+00:00  Wed",
        "   2  2031-05-08T09:00:00+00:00  Thu",
    ]


def test_naive_from_is_a_wall_time_in_the_trigger_zone() -> None:
    out, err = io.StringIO(), io.StringIO()

    code = preview_command.run(
        _args(count=1, tz="Asia/Shanghai", start="2026-06-01T09:30"), VirtualClock(), out, err
    )

    assert code == 0
    assert "   1  2026-06-02T09:00:00+08:00  Tue" in out.getvalue()


def test_console_entry_point_runs() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "actwheel",
            "preview",
            "--once",
            "2027-01-01T09:00:00+08:00",
            "--from",
            "2026-01-01T00:00Z",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["fires"] == [{"at": "2027-01-01T09:00:00+08:00", "note": None}]


def test_cron_option_builds_a_cron_spec_in_the_given_zone() -> None:
    args = build_parser().parse_args(["preview", "--cron", "0 30 18 ? * MON-FRI", "--tz", "Asia/Shanghai"])

    assert preview_command.build_spec(args) == {
        "type": "cron",
        "expression": "0 30 18 ? * MON-FRI",
        "timezone": "Asia/Shanghai",
    }


def test_cron_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        [
            "--cron",
            "0 30 18 ? * MON-FRI",
            "--tz",
            "Asia/Shanghai",
            "--from",
            "2026-09-25T00:00+08:00",
            "-n",
            "3",
            "--json",
        ],
        capsys,
    )

    assert code == 0
    assert [f["at"] for f in json.loads(out)["fires"]] == [
        "2026-09-25T18:30:00+08:00",
        "2026-09-28T18:30:00+08:00",
        "2026-09-29T18:30:00+08:00",
    ]
