"""Settings (defaults < environment < flags) and ``actwheel run`` argument handling (errors exit 2, never start)."""

from __future__ import annotations

import os

import pytest

from actwheel.cli import main
from actwheel.errors import InvalidInput
from actwheel.redact import redact_url as _safe
from actwheel.settings import ALL_ROLES, DEFAULT_DATABASE_URL, Settings, instance_id, parse_http

pytestmark = pytest.mark.usefixtures("process_logging_restored")  # actwheel run configures logging


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("ACTWHEEL_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_defaults_from_an_empty_environment() -> None:
    settings = Settings.from_env({})
    assert settings.database_url == DEFAULT_DATABASE_URL
    assert settings.broker_url == "memory://"
    assert settings.roles == ALL_ROLES
    assert (settings.http_host, settings.http_port) == ("127.0.0.1", 8080)
    assert settings.partition_leases is True
    assert settings.instance == f"pid-{os.getpid()}"


def test_instance_id_prefers_hostname() -> None:
    assert instance_id({"HOSTNAME": "box-7"}) == "box-7"
    assert instance_id({"HOSTNAME": ""}) == f"pid-{os.getpid()}"


def test_environment_overrides_defaults_and_flags_override_environment() -> None:
    env = {"ACTWHEEL_DATABASE_URL": "postgresql://db/actwheel", "ACTWHEEL_BROKER_URL": "amqp://mq/",
           "ACTWHEEL_HORIZON_S": "120", "ACTWHEEL_LEASE_S": "7.5", "ACTWHEEL_PARTITION_LEASES": "off",
           "HOSTNAME": "node-1"}
    settings = Settings.from_env(env)
    assert (settings.database_url, settings.broker_url) == ("postgresql://db/actwheel", "amqp://mq/")
    assert (settings.horizon_s, settings.lease_s, settings.partition_leases) == (120.0, 7.5, False)
    assert settings.instance == "node-1"
    flagged = Settings.from_env(env, database_url="sqlite:///x.db", broker_url=None, partition_leases=True)
    assert flagged.database_url == "sqlite:///x.db"
    assert flagged.broker_url == "amqp://mq/"  # a None flag leaves the environment's value
    assert flagged.partition_leases is True


@pytest.mark.parametrize(("env", "field"), [
    ({"ACTWHEEL_HORIZON_S": "an hour"}, "ACTWHEEL_HORIZON_S"),
    ({"ACTWHEEL_LEASE_S": ""}, "ACTWHEEL_LEASE_S"),
    ({"ACTWHEEL_PARTITION_LEASES": "maybe"}, "ACTWHEEL_PARTITION_LEASES"),
    ({"ACTWHEEL_HORIZON_S": "0.5"}, "horizon_s"),
    ({"ACTWHEEL_FIRE_AHEAD_S": "soon"}, "ACTWHEEL_FIRE_AHEAD_S"),
    ({"ACTWHEEL_FIRE_AHEAD_S": "-1"}, "ACTWHEEL_FIRE_AHEAD_S"),
    ({"ACTWHEEL_FIRE_AHEAD_S": "6"}, "ACTWHEEL_FIRE_AHEAD_S"),
    ({"ACTWHEEL_FIRE_AHEAD_S": "nan"}, "ACTWHEEL_FIRE_AHEAD_S"),
])
def test_bad_environment_values_name_the_variable(env: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Settings.from_env(env)
    assert caught.value.field == field


def test_fire_ahead_is_off_by_default_and_read_from_the_environment() -> None:
    assert Settings.from_env({}).fire_ahead_s == 0.0
    assert Settings.from_env({"ACTWHEEL_FIRE_AHEAD_S": "1.5"}).fire_ahead_s == 1.5


def test_unknown_role_and_bad_port_are_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        Settings.from_env({}, roles=("planner", "janitor"))
    assert (caught.value.field, caught.value.value) == ("actors", "janitor")
    with pytest.raises(InvalidInput) as caught:
        Settings.from_env({}, http_port=70000)
    assert caught.value.field == "http"


@pytest.mark.parametrize(("text", "expected"), [
    ("0.0.0.0:9000", ("0.0.0.0", 9000)), (":9000", ("127.0.0.1", 9000)), ("localhost:80", ("localhost", 80)),
])
def test_parse_http(text: str, expected: tuple[str, int]) -> None:
    assert parse_http(text) == expected


@pytest.mark.parametrize("text", ["9000", "host:", "host:port", "host:-1", ""])
def test_parse_http_refuses(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_http(text)
    assert (caught.value.field, caught.value.value) == ("--http", text)


def test_safe_url_hides_the_password() -> None:
    assert _safe("amqp://robot:s3cret@mq:5672/prod") == "amqp://robot:***@mq:5672/prod"
    assert _safe("postgresql://u:p@ss@db/x") == "postgresql://u:***@db/x"
    assert _safe("sqlite:///actwheel.db") == "sqlite:///actwheel.db"


# --- the command line: every refusal exits 2 with the reason on stderr, and starts nothing -------------


@pytest.mark.parametrize(("argv", "needle"), [
    (["run", "--http", "nowhere"], "--http='nowhere'"),
    (["run", "--http", "127.0.0.1:70000"], "http=70000"),
    (["run", "--actors", "planner,janitor"], "actors='janitor'"),
])
def test_run_refuses_bad_arguments(argv: list[str], needle: str, clean_env: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("actwheel run: ")
    assert needle in err


def test_run_refuses_a_bad_environment_variable(clean_env: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    clean_env.setenv("ACTWHEEL_HORIZON_S", "soon")
    assert main(["run"]) == 2
    assert "ACTWHEEL_HORIZON_S='soon'" in capsys.readouterr().err


def test_unknown_flag_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["run", "--colour", "red"])
    assert caught.value.code == 2
    assert "--colour" in capsys.readouterr().err


def test_run_refuses_an_unknown_log_level(clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["run", "--log-level", "nope", "--http", "bad"])
    except KeyError:
        code = 1
    assert code == 2
    assert "log" in capsys.readouterr().err.lower()


def test_run_refuses_an_empty_actor_list() -> None:
    with pytest.raises(InvalidInput) as caught:
        Settings.from_env({}, roles=())
    assert caught.value.field == "actors"


@pytest.mark.parametrize("env", [{"ACTWHEEL_LEASE_S": "-1"}, {"ACTWHEEL_LEASE_S": "0"},
                                 {"ACTWHEEL_HORIZON_S": "nan"}, {"ACTWHEEL_HORIZON_S": "inf"}])
def test_nonsense_numbers_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(InvalidInput):
        Settings.from_env(env)
