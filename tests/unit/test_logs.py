"""The process's logging: the engine's structlog lines, and the libraries' stdlib records rendered as
the same lines with URL passwords masked — and the MCP SDK no longer takes the root logger over."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from actwheel.logs import configure_logging, get_logger

pytestmark = pytest.mark.usefixtures("process_logging_restored")


def _lines(err: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in err.splitlines() if line.strip()]


def test_a_library_record_is_a_json_line_with_the_url_password_masked(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", json=True)
    logging.getLogger("aiormq.connection").warning("Connecting to amqp://actwheel:s3cr3t-pw@broker:5672/vh ...")
    (line,) = _lines(capsys.readouterr().err)
    assert line["level"] == "warning"
    assert line["logger"] == "aiormq.connection"
    assert line["event"] == "Connecting to amqp://actwheel:***@broker:5672/vh ..."
    assert "s3cr3t" not in orjson.dumps(line).decode()
    assert "timestamp" in line


def test_library_info_is_left_out_unless_debug(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", json=True)
    logging.getLogger("httpx").info("HTTP Request: POST http://x/v1/automations 201")
    assert capsys.readouterr().err == ""
    configure_logging("DEBUG", json=True)
    logging.getLogger("httpx").info("HTTP Request: POST http://x/v1/automations 201")
    (line,) = _lines(capsys.readouterr().err)
    assert (line["level"], line["logger"]) == ("info", "httpx")


def test_configuring_twice_leaves_one_root_handler(capsys: pytest.CaptureFixture[str]) -> None:
    logging.getLogger().addHandler(logging.StreamHandler())  # a library's, installed before ours
    configure_logging("INFO", json=True)
    configure_logging("WARNING", json=True)
    assert len(logging.getLogger().handlers) == 1
    logging.getLogger("asyncpg").error("boom")
    assert len(_lines(capsys.readouterr().err)) == 1


def test_the_engine_s_own_lines_still_mask_secret_keys(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", json=True)
    get_logger("actwheel.test").warning("key_used", api_key="awk_x_secret", run_id="r1")
    (line,) = _lines(capsys.readouterr().err)
    assert (line["api_key"], line["run_id"], line["logger_name"]) == ("***", "r1", "actwheel.test")


def _delivery(envelope_: Any) -> Any:
    from actwheel.bus import Delivery

    return Delivery(envelope=envelope_, queue="q", exchange="x", routing_key="k", redelivered=False,
                    delivery_count=1, headers={})


async def test_a_consumed_message_binds_its_ids_to_the_handler_and_restores_what_was_bound_after() -> None:
    from structlog.contextvars import bind_contextvars, clear_contextvars, get_contextvars

    from actwheel.actors.consumer import ConsumerActor
    from actwheel.bus import Envelope, MemoryBus

    seen: list[dict[str, Any]] = []

    async def handler(_: Any) -> None:
        seen.append(get_contextvars())
        bind_contextvars(correlation_id="changed-inside", run_id="r1")  # a handler may bind more

    async def failing(_: Any) -> None:
        raise ValueError("boom")

    actor = ConsumerActor(MemoryBus())
    message = Envelope.new(type="run.ready", data={}, source="tests", correlation_id="c-1")
    clear_contextvars()
    bind_contextvars(correlation_id="outer", request="q-9")
    try:
        await actor._logged(handler)(_delivery(message))
        assert seen == [{"correlation_id": "c-1", "request": "q-9", "actor": actor.name,
                         "message_id": message.id, "message_type": "run.ready"}]
        assert get_contextvars() == {"correlation_id": "outer", "request": "q-9", "run_id": "r1"}
        with pytest.raises(ValueError, match="boom"):
            await actor._logged(failing)(_delivery(message))
        assert get_contextvars() == {"correlation_id": "outer", "request": "q-9", "run_id": "r1"}
    finally:
        clear_contextvars()
