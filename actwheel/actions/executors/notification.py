"""``notification.send``: render a subject and body, deliver them through a channel.

Templates are Jinja2 rendered in a :class:`~jinja2.sandbox.SandboxedEnvironment`
with the run's context (the variables, ``vars``, ``steps``, ``run``); an undefined
name is an error, not an empty string. Channels come from a
:class:`ChannelRegistry`: ``log``, ``amqp`` (publish to a routing key), ``webhook``
(generic JSON, or the Slack / DingTalk / Feishu-Lark / WeCom robot formats) and
``email`` (SMTP). Sending twice sends twice: idempotency is NONE.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import smtplib
import ssl
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, ClassVar

import jinja2
import orjson
from jinja2.sandbox import SandboxedEnvironment

from actwheel.actions.base import ActionContext, ActionDefinition, ActionResult, Capabilities, Idempotency
from actwheel.actions.executors.webhook import (
    OutgoingRequest,
    WebhookClient,
    WebhookRetry,
    WebhookSettings,
)
from actwheel.actions.secrets import ResolvedConfig, resolve_config
from actwheel.errors import ChannelFailed, FieldError, InvalidAction, NotFound
from actwheel.topics import RESERVED_NAMESPACES, is_reserved_pattern

__all__ = [
    "AmqpChannel",
    "ChannelFailed",
    "ChannelRegistry",
    "EmailChannel",
    "LogChannel",
    "NotificationChannel",
    "RenderedMessage",
    "SendNotification",
    "SmtpSettings",
    "WebhookChannel",
    "default_channels",
    "render_template",
]

MAX_RENDERED_CHARS = 100_000
_ENV = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)
_SECRET_REF_SCHEMA = {
    "type": "object",
    "required": ["$secret"],
    "additionalProperties": False,
    "properties": {"$secret": {"type": "string", "minLength": 1}},
}
_URL_OR_SECRET = {"anyOf": [{"type": "string", "minLength": 1}, _SECRET_REF_SCHEMA]}
# A user's message under actwheel's own routing keys would impersonate actwheel's events.
_OUTSIDE_RESERVED = "a routing key outside actwheel's own namespaces (" + ", ".join(RESERVED_NAMESPACES) + ")"


@dataclass(frozen=True, slots=True)
class RenderedMessage:
    subject: str
    body: str


def render_template(source: str, names: Mapping[str, Any], field_name: str = "body") -> str:
    """Render ``source`` in the sandbox.

    :raises InvalidAction: a syntax error, an undefined name, an unsafe access or an oversized result
    """
    try:
        text = _ENV.from_string(source).render(**names)
    except jinja2.TemplateError as exc:
        raise InvalidAction(field_name, source, f"a template that renders: {type(exc).__name__}: {exc}") from None
    if len(text) > MAX_RENDERED_CHARS:
        raise InvalidAction(field_name, source, f"a template rendering at most {MAX_RENDERED_CHARS} characters")
    return text


def _template_errors(config: Mapping[str, Any]) -> list[FieldError]:
    errors = []
    for name in ("subject", "body"):
        try:
            _ENV.parse(config.get(name, ""))
        except jinja2.TemplateSyntaxError as exc:
            errors.append(FieldError(name, config[name], f"valid template syntax: {exc.message} (line {exc.lineno})"))
    return errors


class NotificationChannel(ABC):
    """One way to deliver a rendered notification.

    ``fields`` are the channel's config fields (JSON Schema each), ``required`` the ones it needs,
    ``required_scopes`` what a caller needs beyond ``notification:send`` to send through it (a
    channel that reaches the network or the bus needs the scope of doing that directly, so
    ``notification.send`` is no way around ``webhook:call`` or ``bus:publish``).
    """

    name: ClassVar[str]
    fields: ClassVar[dict[str, Any]] = {}
    required: ClassVar[tuple[str, ...]] = ()
    required_scopes: ClassVar[frozenset[str]] = frozenset()

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        """Problems with the channel-specific part of ``config`` (default: required fields present)."""
        return [
            FieldError(n, None, f"a value (required by channel {self.name})") for n in self.required if n not in config
        ]

    @abstractmethod
    async def send(self, message: RenderedMessage, config: Mapping[str, Any], ctx: ActionContext) -> dict[str, Any]:
        """Deliver ``message``; ``config`` has its secrets resolved. Returns delivery details.

        :raises ChannelFailed: not delivered
        """

    def describe(self, config: Mapping[str, Any]) -> str:
        """Where a message would go, for the dry run (no secret values)."""
        return f"via {self.name}"


class ChannelRegistry:
    """Notification channels by name; a duplicate name is refused."""

    def __init__(self, channels: list[NotificationChannel] | None = None) -> None:
        self._channels: dict[str, NotificationChannel] = {}
        for channel in channels or []:
            self.register(channel)

    def register(self, channel: NotificationChannel) -> None:
        """:raises InvalidAction: a channel of that name exists"""
        if channel.name in self._channels:
            raise InvalidAction("channel", channel.name, "a channel name not registered yet")
        self._channels[channel.name] = channel

    def get(self, name: str) -> NotificationChannel:
        """:raises InvalidAction: unknown channel (field ``channel``), listing the known ones"""
        try:
            return self._channels[name]
        except KeyError:
            raise InvalidAction("channel", name, "one of " + ", ".join(self.names())) from None

    def names(self) -> list[str]:
        return sorted(self._channels)

    def required_scopes(self, name: Any) -> frozenset[str]:
        """The extra scopes of channel ``name``; of every channel when ``name`` is not a known one.

        Permission is checked before validation, on a config that may be malformed or hold a
        ``${...}`` placeholder resolved only at run time, so an unknown name fails closed.
        """
        channel = self._channels.get(name) if isinstance(name, str) else None
        if channel is not None:
            return channel.required_scopes
        return frozenset().union(*(c.required_scopes for c in self._channels.values()))

    def fields(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for channel in self._channels.values():
            merged.update(channel.fields)
        return merged


class LogChannel(NotificationChannel):
    name = "log"
    fields: ClassVar[dict[str, Any]] = {"level": {"enum": ["debug", "info", "warning", "error"]}}

    async def send(self, message: RenderedMessage, config: Mapping[str, Any], ctx: ActionContext) -> dict[str, Any]:
        level = config.get("level", "info")
        getattr(ctx.log, level)("notification", subject=message.subject, body=message.body)
        return {"level": level}


class AmqpChannel(NotificationChannel):
    name = "amqp"
    fields: ClassVar[dict[str, Any]] = {
        "routing_key": {"type": "string", "pattern": r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$"}
    }
    required = ("routing_key",)
    required_scopes = frozenset({"bus:publish"})

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().check(config)
        routing_key = config.get("routing_key")
        if isinstance(routing_key, str) and is_reserved_pattern(routing_key):
            errors.append(FieldError("routing_key", routing_key, _OUTSIDE_RESERVED))
        return errors

    async def send(self, message: RenderedMessage, config: Mapping[str, Any], ctx: ActionContext) -> dict[str, Any]:
        if ctx.publish is None:
            raise ChannelFailed("no bus publisher on this host for the amqp channel", retryable=False)
        if is_reserved_pattern(config["routing_key"]):  # validated already; a second lock on impersonation
            raise ChannelFailed(f"routing key: expected {_OUTSIDE_RESERVED}", retryable=False)
        data = {
            "subject": message.subject,
            "body": message.body,
            "run_id": ctx.run_id,
            "automation_id": ctx.automation_id,
        }
        await ctx.publish(config["routing_key"], data)
        return {"routing_key": config["routing_key"]}

    def describe(self, config: Mapping[str, Any]) -> str:
        return f"via amqp to routing key {config['routing_key']}"


def _robot_timestamp_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk: base64(HMAC-SHA256(key=secret, msg=f"{ts}\\n{secret}"))."""
    mac = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def _feishu_sign(secret: str, timestamp_s: int) -> str:
    """Feishu/Lark: base64(HMAC-SHA256(key=f"{ts}\\n{secret}", msg=b""))."""
    mac = hmac.new(f"{timestamp_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def _text(message: RenderedMessage) -> str:
    return f"{message.subject}\n{message.body}" if message.subject else message.body


def _json_body(message: RenderedMessage, ctx: ActionContext) -> dict[str, Any]:
    return {
        "subject": message.subject,
        "body": message.body,
        "run_id": ctx.run_id,
        "automation_id": ctx.automation_id,
    }


FORMATS: dict[str, Callable[[RenderedMessage, ActionContext], dict[str, Any]]] = {
    "json": _json_body,
    "slack": lambda m, _: {"text": f"*{m.subject}*\n{m.body}" if m.subject else m.body},
    "dingtalk": lambda m, _: {"msgtype": "text", "text": {"content": _text(m)}},
    "feishu": lambda m, _: {"msg_type": "text", "content": {"text": _text(m)}},
    "wecom": lambda m, _: {"msgtype": "text", "text": {"content": _text(m)}},
}


def _robot_error(fmt: str, body: str) -> str | None:
    """IM robots answer 200 with an error code in the body; return the error, if any."""
    if fmt not in ("dingtalk", "feishu", "wecom"):
        return None
    try:
        reply = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    code = reply.get("errcode", reply.get("code", 0)) if isinstance(reply, dict) else 0
    return None if code in (0, None) else f"robot answered code {code}: {reply.get('errmsg') or reply.get('msg')}"


class WebhookChannel(NotificationChannel):
    name = "webhook"
    fields: ClassVar[dict[str, Any]] = {
        "url": _URL_OR_SECRET,
        "format": {"enum": list(FORMATS)},
        "robot_secret": _SECRET_REF_SCHEMA,
        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 10},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 120},
    }
    required = ("url",)
    required_scopes = frozenset({"webhook:call"})

    def __init__(self, client: WebhookClient) -> None:
        self.client = client

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        errors = super().check(config)
        if "robot_secret" in config and config.get("format") not in ("dingtalk", "feishu"):
            errors.append(FieldError("robot_secret", config["robot_secret"], "only with format dingtalk or feishu"))
        return errors

    def _url_and_body(
        self, message: RenderedMessage, config: Mapping[str, Any], ctx: ActionContext
    ) -> tuple[str, dict[str, Any]]:
        fmt = config.get("format", "json")
        url, body = str(config["url"]), FORMATS[fmt](message, ctx)
        secret = config.get("robot_secret")
        if fmt == "dingtalk" and secret:
            ts = ctx.clock.now_ms()
            query = urllib.parse.urlencode({"timestamp": ts, "sign": _robot_timestamp_sign(secret, ts)})
            url = f"{url}{'&' if '?' in url else '?'}{query}"
        if fmt == "feishu" and secret:
            ts = ctx.clock.now_ms() // 1000
            body.update(timestamp=str(ts), sign=_feishu_sign(secret, ts))
        return url, body

    async def send(self, message: RenderedMessage, config: Mapping[str, Any], ctx: ActionContext) -> dict[str, Any]:
        url, body = self._url_and_body(message, config, ctx)
        request = OutgoingRequest(
            method="POST",
            url=url,
            body=orjson.dumps(body),
            headers={"Content-Type": "application/json", "User-Agent": "actwheel-notify/0.1"},
            timeout_s=float(config.get("timeout", 10.0)),
        )
        delivery = await self.client.send(
            request,
            clock=ctx.clock,
            retry=WebhookRetry(max_attempts=config.get("max_attempts", 3)),
            budget_s=ctx.remaining(),
        )
        details = {
            "status_code": delivery.status_code,
            "body": delivery.body,
            "attempts": len(delivery.attempts),
        }
        if not delivery.succeeded:
            raise ChannelFailed(
                f"webhook answered {delivery.status_code or delivery.error}",
                retryable=delivery.retryable,
                details=details,
            )
        robot = _robot_error(config.get("format", "json"), delivery.body)
        if robot:
            raise ChannelFailed(robot, retryable=False, details=details)
        return details

    def describe(self, config: Mapping[str, Any]) -> str:
        return f"via webhook ({config.get('format', 'json')} format)"


@dataclass(frozen=True, kw_only=True)
class SmtpSettings:
    """Server-side SMTP defaults; ``password`` is a secret reference, resolved at send time."""

    host: str = "localhost"
    port: int = 25
    starttls: bool = False
    ssl: bool = False
    user: str | None = None
    password: dict[str, str] | None = field(default=None, repr=False)
    sender: str = "actwheel@localhost"
    timeout: float = 30.0
    secret_owner: str | None = None  # whose secret store holds ``password``; None = the run's owner

    def as_config(self) -> dict[str, Any]:
        base = {
            "host": self.host,
            "port": self.port,
            "starttls": self.starttls,
            "ssl": self.ssl,
            "from": self.sender,
            "timeout": self.timeout,
        }
        base.update({k: v for k, v in (("user", self.user), ("password", self.password)) if v is not None})
        return base


_SMTP_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "host": {"type": "string", "minLength": 1},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "starttls": {"type": "boolean"},
        "ssl": {"type": "boolean"},
        "user": {"type": "string"},
        "password": _SECRET_REF_SCHEMA,
        "from": {"type": "string"},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 300},
    },
}


def _email(message: RenderedMessage, sender: str, to: list[str], run_id: str) -> EmailMessage:
    mail = EmailMessage()
    mail["Subject"], mail["From"], mail["To"] = message.subject, sender, ", ".join(to)
    mail["X-Actwheel-Run"] = run_id
    mail.set_content(message.body)
    return mail


def _deliver_mail(smtp: Mapping[str, Any], message: EmailMessage) -> dict[str, Any]:
    """Blocking SMTP delivery (runs in a worker thread)."""
    factory = smtplib.SMTP_SSL if smtp.get("ssl") else smtplib.SMTP
    with factory(smtp["host"], smtp["port"], timeout=smtp["timeout"]) as client:
        if smtp.get("starttls"):
            client.starttls(context=ssl.create_default_context())
        if smtp.get("user"):
            client.login(smtp["user"], smtp.get("password", ""))
        refused = client.send_message(message)
    return {"refused": sorted(refused)}


class EmailChannel(NotificationChannel):
    name = "email"
    fields: ClassVar[dict[str, Any]] = {
        "to": {
            "type": "array",
            "minItems": 1,
            "maxItems": 100,
            "items": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+$"},
        },
        "smtp": _SMTP_SCHEMA,
    }
    required = ("to",)

    def __init__(self, settings: SmtpSettings | None = None) -> None:
        self.settings = settings or SmtpSettings()

    def _smtp(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.settings.as_config(), **config.get("smtp", {})}

    async def send(self, message: RenderedMessage, config: Mapping[str, Any], ctx: ActionContext) -> dict[str, Any]:
        owner = self.settings.secret_owner or ctx.owner_id
        smtp = (await resolve_config(self._smtp(config), ctx.secrets, owner)).config
        mail = _email(message, smtp["from"], config["to"], ctx.run_id)
        try:
            details = await asyncio.to_thread(_deliver_mail, smtp, mail)
        except smtplib.SMTPResponseException as exc:
            retryable = 400 <= exc.smtp_code < 500
            raise ChannelFailed(f"SMTP {exc.smtp_code}: {exc.smtp_error!r}", retryable=retryable) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise ChannelFailed(f"SMTP delivery failed: {type(exc).__name__}: {exc}", retryable=True) from None
        return {**details, "to": list(config["to"])}

    def describe(self, config: Mapping[str, Any]) -> str:
        smtp = self._smtp(config)
        return f"via email to {', '.join(config['to'])} through {smtp['host']}:{smtp['port']}"


def default_channels(
    webhook_settings: WebhookSettings | None = None, smtp: SmtpSettings | None = None
) -> ChannelRegistry:
    """log, amqp, webhook (guarded by ``webhook_settings``) and email (``smtp`` defaults)."""
    client = WebhookClient(webhook_settings or WebhookSettings())
    return ChannelRegistry([LogChannel(), AmqpChannel(), WebhookChannel(client), EmailChannel(smtp)])


class SendNotification(ActionDefinition):
    type = "notification.send"
    aliases = ("Notification",)
    display_name = "Send notification"
    description = (
        "Render `subject` and `body` (Jinja2, sandboxed, over the run context: variables, `vars`, "
        "`steps.<name>.result`, `run.id`) and deliver through `channel`: `log` (`level`), `amqp` "
        "(`routing_key`), `webhook` (`url`, `format`: json | slack | dingtalk | feishu | wecom, optional "
        "`robot_secret`), or `email` (`to`, optional `smtp` overrides with `password` as a secret "
        "reference). Not idempotent: a retry sends again."
    )
    config_schema: ClassVar[dict[str, Any]] = {}
    idempotency = Idempotency.NONE
    required_scopes = frozenset({"notification:send"})
    capabilities = Capabilities(compensable=False, dry_run=True, timeout_control=True, parallel_safe=True)

    def __init__(self, channels: ChannelRegistry) -> None:
        self.channels = channels

    def schema(self) -> dict[str, Any]:
        channels = self.channels
        return {
            "type": "object",
            "required": ["channel", "body"],
            "additionalProperties": False,
            "properties": {
                "channel": {"enum": channels.names()},
                "subject": {"type": "string", "maxLength": 1000},
                "body": {"type": "string", "maxLength": 100_000},
                **channels.fields(),
            },
        }

    def required_scopes_for(self, config: Mapping[str, Any]) -> frozenset[str]:
        """``notification:send`` plus the channel's own: ``webhook:call`` for webhook, ``bus:publish`` for amqp."""
        return self.required_scopes | self.channels.required_scopes(config.get("channel"))

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        return _template_errors(config) + self.channels.get(config["channel"]).check(config)

    def _render(self, config: Mapping[str, Any], ctx: ActionContext) -> RenderedMessage:
        names = ctx.expression_names()
        return RenderedMessage(
            render_template(config.get("subject", ""), names, "subject"),
            render_template(config["body"], names, "body"),
        )

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        channel = self.channels.get(config["channel"])
        try:
            message = self._render(config, ctx)
            resolved = await resolve_config(dict(config), ctx.secrets, ctx.owner_id)
        except InvalidAction as exc:
            return ActionResult.fail(str(exc), retryable=False, code="template_error")
        except NotFound as exc:
            return ActionResult.fail(str(exc), retryable=False, code="secret_missing")
        return await self._send(channel, message, resolved, ctx)

    async def _send(
        self,
        channel: NotificationChannel,
        message: RenderedMessage,
        resolved: ResolvedConfig,
        ctx: ActionContext,
    ) -> ActionResult:
        try:
            details = await channel.send(message, resolved.config, ctx)
        except ChannelFailed as exc:
            return ActionResult.fail(
                resolved.scrub(f"{channel.name}: {exc}"),
                retryable=exc.retryable,
                code="delivery_failed",
                data=resolved.scrub(exc.details),
            )
        return ActionResult.ok(
            f"sent via {channel.name}",
            resolved.scrub({"channel": channel.name, "subject": message.subject, **details}),
        )

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        channel = self.channels.get(config["channel"])
        try:
            message = self._render(config, ctx)
        except InvalidAction as exc:
            return ActionResult.fail(str(exc), retryable=False, code="template_error")
        return ActionResult.ok(
            f"would send {channel.describe(config)}",
            {"channel": channel.name, "subject": message.subject, "body": message.body},
        )
