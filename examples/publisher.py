"""Drive actwheel from any service: create an automation and dispatch an ad hoc action over RabbitMQ.

Plain aio-pika and the standard library, no actwheel import: this is what a service
written in another stack does, in Python. The contract it follows is
``docs/asyncapi.yaml`` (readable companion: ``docs/messages.md``):

- every message is a JSON envelope ``{id, type, occurred_at, source, correlation_id, data}``
  with ``content_type: application/json``, header ``x-schema-version: 1``, persistent;
- commands go to the durable topic exchange ``actwheel.commands``: an automation command
  (envelope type ``automation.command``) under routing key ``command.<command>``, an ad hoc
  action request (type ``action.request``) under ``action.request``;
- publish with publisher confirms and ``mandatory``: when no actwheel queue is bound (the
  engine never ran against this broker, or another prefix) the broker returns the message
  and the publish fails, instead of dropping it silently;
- set ``user_id`` to the RabbitMQ user you connect as: RabbitMQ refuses any other, and
  actwheel acts as the *service principal* of that id (it must exist, may act for the
  owner: ``on_behalf_of``, and hold the scopes); without it the message is dead-lettered
  ``unauthenticated``. This example connects as ``svc-example`` (``ops/dev-services``).

Run::

    python examples/publisher.py [--url amqp://svc-example:svc-example@127.0.0.1:56720/] [--prefix t-1.]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import aio_pika
from aio_pika.abc import AbstractExchange
from aio_pika.exceptions import DeliveryError, PublishError

__all__ = [
    "COMMANDS_EXCHANGE",
    "DEFAULT_URL",
    "Outgoing",
    "create_automation",
    "envelope",
    "example_automation",
    "main",
    "publish_all",
    "request_action",
    "to_amqp",
]

DEFAULT_URL = "amqp://svc-example:svc-example@127.0.0.1:56720/"  # ops/dev-services: the examples' own user
COMMANDS_EXCHANGE = "actwheel.commands"
SCHEMA_VERSION = 1
SOURCE = "example-publisher"


@dataclass(frozen=True)
class Outgoing:
    """One message to publish: its routing key on ``actwheel.commands`` and its envelope."""

    routing_key: str
    envelope: dict[str, Any]


def envelope(type_: str, data: dict[str, Any], *, source: str = SOURCE,
             correlation_id: str | None = None) -> dict[str, Any]:
    """A fresh envelope: unique id (actwheel dedupes by it), an aware UTC timestamp."""
    return {
        "id": uuid.uuid4().hex,
        "type": type_,
        "occurred_at": datetime.now(UTC).isoformat(),
        "source": source,
        "correlation_id": correlation_id,
        "data": data,
    }


def create_automation(owner_id: str, automation: dict[str, Any]) -> Outgoing:
    """``command.create``: the planner validates ``automation`` like ``POST /v1/automations`` does."""
    data = {"command": "create", "owner_id": owner_id, "args": {"automation": automation}}
    return Outgoing("command.create", envelope("automation.command", data))


def request_action(owner_id: str, action_type: str, config: dict[str, Any], *, idempotency_key: str,
                   scopes: Sequence[str] = (), context: dict[str, Any] | None = None) -> Outgoing:
    """``action.request``: one run now. The same ``idempotency_key`` (per owner) never makes a second run."""
    data = {"type": action_type, "config": config, "owner_id": owner_id, "idempotency_key": idempotency_key,
            "scopes": list(scopes), "context": context or {}}
    return Outgoing("action.request", envelope("action.request", data, correlation_id=idempotency_key))


def example_automation(name: str = "example: weekday report") -> dict[str, Any]:
    """Weekdays at 18:30 Shanghai time, log a line (triggers: docs/triggers.md, actions: docs/actions.md)."""
    return {
        "name": name,
        "trigger": {"type": "cron", "expression": "0 30 18 ? * MON-FRI", "timezone": "Asia/Shanghai"},
        "action": {"type": "simple.op", "config": {"op": "log", "message": "time for the weekday report"}},
        "policy": {"overlap": "skip", "misfire": "fire_once", "timeout_s": 60},
        "labels": {"agent_id": "example-agent", "team": "reports"},
    }


def to_amqp(outgoing: Outgoing, user_id: str | None = None) -> aio_pika.Message:
    """The AMQP message: JSON body, the properties and the header actwheel expects; ``user_id``: the
    RabbitMQ user of the connection (the broker refuses another), who actwheel authorises."""
    env = outgoing.envelope
    return aio_pika.Message(
        json.dumps(env, separators=(",", ":")).encode("utf-8"),
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        headers={"x-schema-version": SCHEMA_VERSION},
        message_id=env["id"],
        type=env["type"],
        correlation_id=env["correlation_id"],
        timestamp=datetime.fromisoformat(env["occurred_at"]),
        app_id=env["source"],
        user_id=user_id,
    )


async def commands_exchange(channel: aio_pika.abc.AbstractChannel, prefix: str = "") -> AbstractExchange:
    """Declare ``<prefix>actwheel.commands`` exactly as actwheel does (durable topic), so it exists."""
    return await channel.declare_exchange(prefix + COMMANDS_EXCHANGE, aio_pika.ExchangeType.TOPIC,
                                          durable=True)


async def publish_all(url: str, prefix: str, messages: Sequence[Outgoing]) -> None:
    """Publish ``messages`` in order, each confirmed by the broker before the next.

    :raises aio_pika.exceptions.PublishError: a message was unroutable (no actwheel queue bound)
    :raises aio_pika.exceptions.DeliveryError: the broker refused it (a queue is full)
    """
    username = urlsplit(url).username
    user_id = unquote(username) if username else None
    connection = await aio_pika.connect(url, timeout=10)
    async with connection:
        # Confirms: publish() returns only once the broker has the message. on_return_raises turns
        # a basic.return (mandatory, nobody bound) into an exception instead of a log line.
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        exchange = await commands_exchange(channel, prefix)
        for outgoing in messages:
            await exchange.publish(to_amqp(outgoing, user_id), routing_key=outgoing.routing_key, mandatory=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="AMQP URL (default: the ops/dev-services broker)")
    parser.add_argument("--prefix", default="", help="exchange name prefix of the engine (default: none)")
    parser.add_argument("--owner", default="example-owner", help="owner of the automation and the run")
    parser.add_argument("--idempotency-key", default=None,
                        help="key of the ad hoc request; repeat it to see that no second run is made")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    key = args.idempotency_key or f"example-{uuid.uuid4().hex[:12]}"
    messages = [
        create_automation(args.owner, example_automation()),
        request_action(args.owner, "simple.op", {"op": "log", "message": f"hello from {SOURCE} ({key})"},
                       idempotency_key=key),
    ]
    try:
        asyncio.run(publish_all(args.url, args.prefix, messages))
    except PublishError:
        print(f"unroutable: no queue is bound on {args.prefix}{COMMANDS_EXCHANGE} "
              "(is actwheel running against this broker with this prefix?)", file=sys.stderr)
        return 1
    except DeliveryError as exc:
        print(f"refused by the broker: {exc}", file=sys.stderr)
        return 1
    for outgoing in messages:
        print(f"published {outgoing.routing_key:<15} id={outgoing.envelope['id']}")
    print(f"idempotency key: {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
