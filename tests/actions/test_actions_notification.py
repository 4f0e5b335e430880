"""notification.send: sandboxed templates; log, amqp, webhook (IM robot formats) and email channels."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import urllib.parse
from collections.abc import Iterator
from email import message_from_bytes
from typing import Any

import pytest
from actions_support import FastClock, LocalHttpServer, Reply, make_ctx
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from structlog.testing import capture_logs

from actwheel.actions.base import Idempotency
from actwheel.actions.executors.notification import SendNotification, SmtpSettings, default_channels
from actwheel.actions.executors.webhook import WebhookSettings
from actwheel.actions.secrets import StaticSecrets

SMTP_PASSWORD = "smtp-pass-4711-zz"
ROBOT_SECRET = "SECrobot0001"
VARIABLES = {"order": {"id": 42, "sku": "A-1"}, "amount": 99.5}


def _send(smtp: SmtpSettings | None = None) -> SendNotification:
    return SendNotification(default_channels(WebhookSettings(allow_networks=("127.0.0.1/32",)), smtp))


def _secrets() -> StaticSecrets:
    return StaticSecrets({("alice", "smtp"): SMTP_PASSWORD, ("alice", "robot"): ROBOT_SECRET})


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []
        self.logins: list[tuple[bytes, bytes]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 OK"

    def authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        assert isinstance(data, LoginPassword)
        self.logins.append((data.login, data.password))
        return AuthResult(success=data.password == SMTP_PASSWORD.encode(), handled=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    mailbox = Mailbox()
    port = _free_port()
    controller = Controller(
        mailbox, hostname="127.0.0.1", port=port, authenticator=mailbox.authenticate, auth_require_tls=False
    )
    controller.start()
    try:
        yield mailbox, port
    finally:
        controller.stop()


async def test_email_through_a_real_smtp_server_with_a_secret_password(smtp_server: tuple[Mailbox, int]) -> None:
    mailbox, port = smtp_server
    smtp = SmtpSettings(
        host="127.0.0.1",
        port=port,
        user="robot",
        password={"$secret": "smtp"},
        sender="actwheel@example.test",
        timeout=5,
    )
    config = {
        "channel": "email",
        "to": ["ops@example.test", "cto@example.test"],
        "subject": "Order {{ order.id }}",
        "body": "SKU {{ order.sku }} for {{ '%.2f' % amount }}",
    }
    with capture_logs() as logs:
        result = await _send(smtp).execute(config, make_ctx(variables=VARIABLES, secrets=_secrets()))
    assert result.succeeded, result
    [(sender, recipients, raw)] = mailbox.messages
    mail = message_from_bytes(raw)
    assert (sender, recipients) == ("actwheel@example.test", ["ops@example.test", "cto@example.test"])
    assert mail["Subject"] == "Order 42"
    assert mail["X-Actwheel-Run"] == "run-1"
    assert mail.get_payload().strip() == "SKU A-1 for 99.50"
    assert mailbox.logins == [(b"robot", SMTP_PASSWORD.encode())]
    assert SMTP_PASSWORD not in repr(result) + repr(logs)


async def test_email_with_a_wrong_password_fails_without_leaking_it(smtp_server: tuple[Mailbox, int]) -> None:
    mailbox, port = smtp_server
    secrets = StaticSecrets({("alice", "smtp"): "not-the-password"})
    config = {
        "channel": "email",
        "to": ["ops@example.test"],
        "body": "x",
        "smtp": {"host": "127.0.0.1", "port": port, "user": "robot", "password": {"$secret": "smtp"}},
    }
    result = await _send().execute(config, make_ctx(secrets=secrets))
    assert (result.status, result.code, result.retryable) == ("failed", "delivery_failed", False)
    assert "535" in result.summary
    assert "not-the-password" not in repr(result)
    assert mailbox.messages == []


async def test_email_to_a_closed_port_is_retryable() -> None:
    config = {
        "channel": "email",
        "to": ["ops@example.test"],
        "body": "x",
        "smtp": {"host": "127.0.0.1", "port": _free_port(), "timeout": 2},
    }
    result = await _send().execute(config, make_ctx())
    assert (result.code, result.retryable) == ("delivery_failed", True)


async def test_log_channel_renders_with_the_run_context() -> None:
    with capture_logs() as logs:
        result = await _send().execute(
            {"channel": "log", "subject": "hi {{ run.id }}", "body": "{{ order.sku | lower }}", "level": "error"},
            make_ctx(variables=VARIABLES),
        )
    assert result.succeeded
    entry = next(e for e in logs if e["event"] == "notification")
    assert (entry["subject"], entry["body"], entry["log_level"]) == ("hi run-1", "a-1", "error")


async def test_amqp_channel_publishes_to_the_routing_key() -> None:
    from actions_support import Recorder

    recorder = Recorder()
    result = await _send().execute(
        {"channel": "amqp", "routing_key": "notify.orders", "body": "#{{ order.id }}"},
        make_ctx(variables=VARIABLES, recorder=recorder),
    )
    assert result.succeeded
    assert recorder.published == [
        ("notify.orders", {"subject": "", "body": "#42", "run_id": "run-1", "automation_id": None})
    ]
    orphan = await _send().execute({"channel": "amqp", "routing_key": "x", "body": "b"}, make_ctx(publish=None))
    assert orphan.code == "delivery_failed"
    assert "no bus publisher" in orphan.summary


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("json", {"subject": "S", "body": "B 42", "run_id": "run-1", "automation_id": None}),
        ("slack", {"text": "*S*\nB 42"}),
        ("wecom", {"msgtype": "text", "text": {"content": "S\nB 42"}}),
        ("dingtalk", {"msgtype": "text", "text": {"content": "S\nB 42"}}),
    ],
)
async def test_webhook_formats(http_server: LocalHttpServer, fmt: str, expected: dict[str, Any]) -> None:
    result = await _send().execute(
        {"channel": "webhook", "url": http_server.url(), "format": fmt, "subject": "S", "body": "B {{ order.id }}"},
        make_ctx(variables=VARIABLES),
    )
    assert result.succeeded, result
    assert http_server.json_bodies() == [expected]


async def test_dingtalk_robot_signature(http_server: LocalHttpServer) -> None:
    clock = FastClock()
    http_server.default = Reply(200, b'{"errcode": 0, "errmsg": "ok"}')
    result = await _send().execute(
        {
            "channel": "webhook",
            "url": http_server.url("/robot/send?access_token=t"),
            "format": "dingtalk",
            "robot_secret": {"$secret": "robot"},
            "body": "hi",
        },
        make_ctx(secrets=_secrets(), clock=clock),
    )
    assert result.succeeded, result
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(http_server.requests[0].path).query))
    ts = query["timestamp"]
    expected = base64.b64encode(
        hmac.new(ROBOT_SECRET.encode(), f"{ts}\n{ROBOT_SECRET}".encode(), hashlib.sha256).digest()
    ).decode()
    assert query["sign"] == expected
    assert query["access_token"] == "t"
    assert int(ts) == clock.now_ms()
    assert ROBOT_SECRET not in repr(result)


async def test_feishu_robot_signature_in_the_body(http_server: LocalHttpServer) -> None:
    http_server.default = Reply(200, b'{"code": 0, "msg": "success"}')
    result = await _send().execute(
        {
            "channel": "webhook",
            "url": http_server.url(),
            "format": "feishu",
            "robot_secret": {"$secret": "robot"},
            "body": "hi",
        },
        make_ctx(secrets=_secrets()),
    )
    assert result.succeeded
    [body] = http_server.json_bodies()
    expected = base64.b64encode(
        hmac.new(f"{body['timestamp']}\n{ROBOT_SECRET}".encode(), b"", hashlib.sha256).digest()
    ).decode()
    assert body["sign"] == expected
    assert body["content"] == {"text": "hi"}
    assert body["msg_type"] == "text"


async def test_robot_error_codes_are_failures(http_server: LocalHttpServer) -> None:
    http_server.default = Reply(200, json.dumps({"errcode": 310000, "errmsg": "sign not match"}).encode())
    result = await _send().execute(
        {"channel": "webhook", "url": http_server.url(), "format": "wecom", "body": "hi"}, make_ctx()
    )
    assert result.code == "delivery_failed"
    assert "sign not match" in result.summary


async def test_the_sandbox_refuses_unsafe_templates_and_undefined_names() -> None:
    unsafe = await _send().execute(
        {"channel": "log", "body": "{{ ''.__class__.__mro__[1].__subclasses__() }}"}, make_ctx()
    )
    assert unsafe.code == "template_error"
    assert "SecurityError" in unsafe.summary
    undefined = await _send().execute({"channel": "log", "body": "{{ ordr.id }}"}, make_ctx(variables=VARIABLES))
    assert undefined.code == "template_error"
    assert "'ordr' is undefined" in undefined.summary


def test_validation_lists_every_problem() -> None:
    errors = _send().validate({"channel": "pigeon", "body": "x", "level": "loud"})
    assert {e.field for e in errors} == {"channel", "level"}
    errors = _send().validate({"channel": "amqp", "body": "{% if %}", "subject": "{{ x"})
    assert {e.field for e in errors} == {"routing_key", "body", "subject"}
    errors = _send().validate({"channel": "email", "body": "b", "to": ["not-an-address"]})
    assert [e.field for e in errors] == ["to[0]"]
    errors = _send().validate({"channel": "webhook", "body": "b", "url": "http://x", "robot_secret": {"$secret": "r"}})
    assert [e.field for e in errors] == ["robot_secret"]


async def test_dry_run_renders_and_sends_nothing(http_server: LocalHttpServer) -> None:
    result = await _send().dry_run(
        {"channel": "webhook", "url": http_server.url(), "format": "slack", "body": "B {{ order.id }}"},
        make_ctx(variables=VARIABLES),
    )
    assert result.succeeded
    assert result.data["body"] == "B 42"
    assert "slack" in result.summary
    assert http_server.requests == []


def test_not_idempotent() -> None:
    assert _send().idempotency is Idempotency.NONE
    assert _send().capabilities.compensable is False
