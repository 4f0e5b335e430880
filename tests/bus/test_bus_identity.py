"""Who published a command or an action request: the broker-validated AMQP ``user_id`` (issue 11).

On RabbitMQ, the broker enforces the users of ``ops/dev-services`` (a user per role, vhost and topic
permissions; a forged ``user_id`` refused), and the engine maps ``user_id`` to a service principal:
no known user → dead-lettered ``unauthenticated``, an owner outside ``on_behalf_of`` or a missing
scope → ``permission``, nothing written. The memory bus is in-process and trusted.

The role users come from ``ops/dev-services start``; a broker without them skips loudly (fails in CI).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import aiormq
import pytest
from bus_harness import WAIT_S, Collector, Harness, envelope, rabbitmq_url
from conftest import delete_topology

from actwheel.actors.consumer import ConsumerActor
from actwheel.actors.planner import Planner
from actwheel.actors.publishers import publisher_caller
from actwheel.actors.router import ExecutorRouter
from actwheel.bus import Delivery, Envelope, Reject, Topology
from actwheel.bus.amqp import url_user
from actwheel.engine import Engine
from actwheel.errors import PermissionDenied, Unauthenticated
from actwheel.messages import ActionRequested, AutomationCommandRequested
from actwheel.settings import Settings
from actwheel.storage.records import NewPrincipal, PrincipalKind

OWNER = "owner-identity"
#: An action with a scope of its own (notification:send), for the double-scope rule.
NOTIFY = {"type": "notification.send", "config": {"channel": "log", "body": "hello"}}
AUTOMATION = {"name": "from a service", "trigger": {"type": "once", "at": "2031-01-01T09:00:00+08:00"},
              "action": {"type": "simple.op", "config": {"op": "log", "message": "hi"}}}


# --- the broker: users, permissions, user_id -------------------------------------------------------


def role_url(user: str) -> str:
    """The dev-services broker URL as ``user`` (password = user name); skips/fails without the user."""
    parts = urlsplit(rabbitmq_url())
    return urlunsplit(parts._replace(netloc=f"{user}:{user}@{parts.hostname}:{parts.port}"))


@contextlib.asynccontextmanager
async def connected(user: str) -> AsyncIterator[aio_pika.abc.AbstractConnection]:
    try:
        connection = await aio_pika.connect(role_url(user), timeout=10)
    except aiormq.exceptions.ProbableAuthenticationError:
        message = (f"!!! RabbitMQ user {user!r} missing !!! run `ops/dev-services start rabbitmq` "
                   "(it creates the role users idempotently)")
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    async with connection:
        yield connection


async def publish_as(user: str, exchange: str, routing_key: str, body: bytes = b"{}",
                     user_id: str | None = None) -> None:
    async with connected(user) as connection:
        channel = await connection.channel(publisher_confirms=True)
        target = await channel.get_exchange(exchange, ensure=False)
        await target.publish(aio_pika.Message(body, user_id=user_id if user_id is not None else user),
                             routing_key=routing_key, mandatory=False)


@pytest.fixture
async def prefixed() -> AsyncIterator[tuple[str, Topology]]:
    """A fresh prefixed topology's exchanges on the shared broker, removed afterwards."""
    prefix = f"t-{uuid.uuid4().hex[:10]}."
    topology = Topology.prefixed(prefix)
    url = rabbitmq_url()
    connection = await aio_pika.connect(url, timeout=10)
    async with connection:
        channel = await connection.channel()
        for name in (*topology.exchanges, topology.dlx):
            await channel.declare_exchange(name, aio_pika.ExchangeType.TOPIC, durable=True)
    try:
        yield prefix, topology
    finally:
        await delete_topology(url, topology, [])


@pytest.mark.rabbitmq
async def test_an_event_publisher_may_not_publish_commands(prefixed: tuple[str, Topology]) -> None:
    _, topology = prefixed
    await publish_as("svc-events", topology.events, "order.created")  # its own exchange: fine
    with pytest.raises(aiormq.exceptions.ChannelAccessRefused) as refused:
        await publish_as("svc-events", topology.commands, "command.create")
    assert f"access to exchange '{topology.commands}'" in str(refused.value)
    assert "refused for user 'svc-events'" in str(refused.value)


@pytest.mark.rabbitmq
async def test_an_event_publisher_may_not_forge_actwheel_events() -> None:
    # Topic permissions name the exchange literally: the production name, declared as the engine does.
    connection = await aio_pika.connect(rabbitmq_url(), timeout=10)
    async with connection:
        await (await connection.channel()).declare_exchange("actwheel.events", aio_pika.ExchangeType.TOPIC,
                                                            durable=True)
    await publish_as("svc-events", "actwheel.events", "order.created")
    for key in ("run.ready", "automation.due", "action.completed"):
        with pytest.raises(aiormq.exceptions.ChannelAccessRefused) as refused:
            await publish_as("svc-events", "actwheel.events", key)
        assert key in str(refused.value)


@pytest.mark.rabbitmq
async def test_a_forged_user_id_is_refused_by_the_broker(prefixed: tuple[str, Topology]) -> None:
    _, topology = prefixed
    with pytest.raises(aiormq.exceptions.ChannelPreconditionFailed) as refused:
        await publish_as("svc-commands", topology.commands, "command.create", user_id="actwheel")
    assert "user_id" in str(refused.value)


@pytest.mark.rabbitmq
async def test_the_amqp_bus_hands_the_validated_user_id_to_the_handler(harness: Harness) -> None:
    if harness.kind != "rabbitmq":
        pytest.skip("RabbitMQ only: the memory bus names no publisher (the next test)")
    queue = await harness.queue("identity", (harness.bus.topology.commands, "command.#"))
    collector = Collector()
    await harness.bus.consume(queue, collector, prefetch=4)
    sent = envelope("automation.command", command="create")
    await publish_as("svc-commands", harness.bus.topology.commands, "command.create", _body(sent))
    delivery = await collector.wait_for_id(sent.id)
    assert (delivery.publisher, delivery.trusted) == ("svc-commands", False)
    # The engine's own publishes name the engine's user (RabbitMQ checks it like anyone's).
    own = envelope("automation.command", command="create")
    await harness.bus.publish(harness.bus.topology.commands, "command.create", own)
    assert (await collector.wait_for_id(own.id)).publisher == url_user(rabbitmq_url()) == "actwheel"


async def test_the_memory_bus_is_trusted_and_names_no_publisher(harness: Harness) -> None:
    if harness.kind != "memory":
        pytest.skip("the memory bus only")
    queue = await harness.queue("identity", (harness.bus.topology.commands, "command.#"))
    collector = Collector()
    await harness.bus.consume(queue, collector, prefetch=4)
    sent = envelope("automation.command")
    await harness.bus.publish(harness.bus.topology.commands, "command.create", sent)
    delivery = await collector.wait_for_id(sent.id)
    assert (delivery.publisher, delivery.trusted) == (None, True)


# --- the engine: a service principal per user_id ---------------------------------------------------


def _body(env: Envelope) -> bytes:
    return json.dumps({"id": env.id, "type": env.type, "occurred_at": env.occurred_at.isoformat(),
                       "source": env.source, "correlation_id": env.correlation_id, "data": env.data}).encode()


def command(owner: str = OWNER, action: dict[str, Any] | None = None) -> Envelope:
    automation = AUTOMATION if action is None else {**AUTOMATION, "action": action}
    message = AutomationCommandRequested(command="create", owner_id=owner, args={"automation": automation})
    return Envelope.new(type=message.TYPE, data=message.to_data(), source="tests")


def action_request(owner: str = OWNER, key: str = "k-1") -> Envelope:
    message = ActionRequested(type="simple.op", config={"op": "log", "message": "ad hoc"}, owner_id=owner,
                              idempotency_key=key)
    return Envelope.new(type=message.TYPE, data=message.to_data(), source="tests")


def service(id_: str, *, scopes: tuple[str, ...] = ("automation:*", "action:request", "run:read"),
            on_behalf_of: tuple[str, ...] = (OWNER,)) -> NewPrincipal:
    return NewPrincipal(id=id_, kind=PrincipalKind.SERVICE, scopes=scopes, on_behalf_of=on_behalf_of)


async def create_principals(engine: Engine, *principals: NewPrincipal) -> None:
    async with engine.store.transaction() as tx:
        await tx.principals.create(NewPrincipal(id=OWNER, kind=PrincipalKind.USER, scopes=("*",)))
        for principal in principals:
            await tx.principals.create(principal)


async def automations_of(engine: Engine, owner: str = OWNER) -> list[Any]:
    async with engine.store.transaction() as tx:
        return list(await tx.automations.query(owner_id=owner))


async def runs_of(engine: Engine, owner: str = OWNER) -> list[Any]:
    async with engine.store.transaction() as tx:
        return list(await tx.runs.query(owner_id=owner))


def planner_of(engine: Engine) -> Planner:
    planner = engine.actors["planner"]
    assert isinstance(planner, Planner)
    return planner


def router_of(engine: Engine) -> ExecutorRouter:
    router = engine.actors["router"]
    assert isinstance(router, ExecutorRouter)
    return router


def delivery(env: Envelope, publisher: str | None, *, trusted: bool = False) -> Delivery:
    return Delivery(envelope=env, queue="q", exchange="actwheel.commands", routing_key="command.create",
                    redelivered=False, delivery_count=1, headers={}, publisher=publisher, trusted=trusted)


@pytest.fixture
async def memory_engine(tmp_path: Path) -> AsyncIterator[Engine]:
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'actwheel.db'}", broker_url=None,
                             instance=f"identity-{uuid.uuid4().hex[:6]}", grace_s=2.0))
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


async def test_a_trusted_in_process_command_acts_as_its_owner(memory_engine: Engine) -> None:
    async with memory_engine.store.transaction() as tx:
        await tx.principals.create(NewPrincipal(id=OWNER, kind=PrincipalKind.USER, scopes=("*",)))
    await planner_of(memory_engine).on_command(delivery(command(), None, trusted=True))
    assert [a.name for a in await automations_of(memory_engine)] == ["from a service"]


@pytest.mark.parametrize(("publisher", "principals", "reason"), [
    (None, (), "unauthenticated"),
    ("svc-nobody", (), "unauthenticated"),
    ("svc-user", (NewPrincipal(id="svc-user", kind=PrincipalKind.USER, scopes=("*",)),), "unauthenticated"),
    ("svc-other", (service("svc-other", on_behalf_of=("someone-else",)),), "permission"),
    ("svc-readonly", (service("svc-readonly", scopes=("automation:read",)),), "permission"),
    # automation:write alone may not create an enabled automation: the double-scope rule needs the action's too
    ("svc-nodouble", (service("svc-nodouble", scopes=("automation:write",)),), "permission"),
])
async def test_an_untrusted_command_without_a_service_that_may_act_is_rejected_and_writes_nothing(
        memory_engine: Engine, publisher: str | None, principals: tuple[NewPrincipal, ...], reason: str) -> None:
    await create_principals(memory_engine, *principals)
    with pytest.raises(Reject) as rejected:
        await planner_of(memory_engine).on_command(delivery(command(action=NOTIFY), publisher))
    assert rejected.value.reason == reason, rejected.value.detail
    assert await automations_of(memory_engine) == []


async def test_a_banned_service_is_unauthenticated(memory_engine: Engine) -> None:
    await create_principals(memory_engine, service("svc-banned"))
    async with memory_engine.store.transaction() as tx:
        await tx.principals.ban("svc-banned", reason="leaked", by=OWNER)
        banned = await tx.principals.get("svc-banned")
    with pytest.raises(Unauthenticated, match="banned"):
        publisher_caller(banned, OWNER)
    with pytest.raises(Reject) as rejected:
        await planner_of(memory_engine).on_command(delivery(command(), "svc-banned"))
    assert rejected.value.reason == "unauthenticated"


async def test_a_service_acts_for_its_owners_with_its_ceiling_never_as_an_admin(memory_engine: Engine) -> None:
    await create_principals(memory_engine, service("svc-any", scopes=("*",), on_behalf_of=("*",)))
    async with memory_engine.store.transaction() as tx:
        principal = await tx.principals.get("svc-any")
    caller = publisher_caller(principal, OWNER)
    assert (caller.owner_id, caller.principal_id, caller.kind) == (OWNER, "svc-any", "service")
    assert caller.holds("automation:write")
    assert not caller.holds("admin:write")
    assert not caller.holds("admin:read")
    with pytest.raises(PermissionDenied):
        publisher_caller(replace(principal, on_behalf_of=("x",)), OWNER)
    await planner_of(memory_engine).on_command(delivery(command(), "svc-any"))
    assert [a.name for a in await automations_of(memory_engine)] == ["from a service"]


@pytest.mark.parametrize(("scopes", "reason"), [
    (("automation:*",), "permission"),  # no action:request
    (("action:request", "automation:*"), None),  # simple.op needs no scope of its own
])
async def test_an_untrusted_action_request_needs_action_request(memory_engine: Engine, scopes: tuple[str, ...],
                                                                reason: str | None) -> None:
    await create_principals(memory_engine, service("svc-requests", scopes=scopes))
    handled = router_of(memory_engine).on_request(delivery(action_request(), "svc-requests"))
    if reason is None:
        await handled
        assert [r.dedupe_key for r in await runs_of(memory_engine)] == [f"request:{OWNER}:k-1"]
        return
    with pytest.raises(Reject) as rejected:
        await handled
    assert rejected.value.reason == reason
    assert await runs_of(memory_engine) == []


# --- end to end on RabbitMQ ------------------------------------------------------------------------


class Tap:
    """Every message a throwaway queue receives, as RabbitMQ delivers it."""

    def __init__(self) -> None:
        self.messages: list[aio_pika.abc.AbstractIncomingMessage] = []
        self._new = asyncio.Event()

    async def on_message(self, message: aio_pika.abc.AbstractIncomingMessage) -> None:
        await message.ack()
        self.messages.append(message)
        self._new.set()

    async def wait_for(self, envelope_id: str) -> aio_pika.abc.AbstractIncomingMessage:
        async with asyncio.timeout(WAIT_S):
            while True:
                for message in self.messages:
                    if json.loads(message.body).get("id") == envelope_id:
                        return message
                self._new.clear()
                await self._new.wait()

    async def wait_for_data(self, key: str, value: Any) -> aio_pika.abc.AbstractIncomingMessage:
        async with asyncio.timeout(WAIT_S):
            while True:
                for message in self.messages:
                    if json.loads(message.body).get("data", {}).get(key) == value:
                        return message
                self._new.clear()
                await self._new.wait()


async def tap(channel: aio_pika.abc.AbstractChannel, exchange: str, pattern: str) -> Tap:
    found = Tap()
    queue = await channel.declare_queue(exclusive=True, auto_delete=True)
    await queue.bind(exchange, pattern)
    await queue.consume(found.on_message)
    return found


@pytest.mark.rabbitmq
async def test_on_rabbitmq_commands_and_requests_are_authorised_by_their_user_id(tmp_path: Path) -> None:
    url = rabbitmq_url()
    prefix = f"t-{uuid.uuid4().hex[:8]}."
    topology = Topology.prefixed(prefix)
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'actwheel.db'}", broker_url=url,
                             instance=f"identity-{uuid.uuid4().hex[:6]}", grace_s=2.0),
                    topology=topology, queue_prefix=prefix)
    try:
        await engine.start()
        # svc-commands may act for OWNER only; svc-example is known to no principal at all.
        await create_principals(engine, service("svc-commands", scopes=("automation:*",)))
        connection = await aio_pika.connect(url, timeout=10)
        async with connection:
            channel = await connection.channel()
            dead = await tap(channel, topology.dlx, "#")
            created = await tap(channel, topology.events, "automation.created")

            unknown = command()
            await publish_as("svc-example", topology.commands, "command.create", _body(unknown))
            stranger = command(owner="not-mine")
            await publish_as("svc-commands", topology.commands, "command.create", _body(stranger))
            no_scope = action_request()
            await publish_as("svc-commands", topology.commands, "action.request", _body(no_scope))
            allowed = command()
            await publish_as("svc-commands", topology.commands, "command.create", _body(allowed))

            for sent, reason, queue in ((unknown, "unauthenticated", "actwheel.planner.commands"),
                                        (stranger, "permission", "actwheel.planner.commands"),
                                        (no_scope, "permission", "actwheel.router.requests")):
                letter = await dead.wait_for(sent.id)
                headers = letter.headers or {}
                assert headers.get("x-actwheel-reason") == reason, headers.get("x-actwheel-detail")
                assert letter.routing_key == prefix + queue
            assert (await dead.wait_for(stranger.id)).headers["x-actwheel-publisher"] == "svc-commands"
            event = await created.wait_for_data("change", "created")
        found = await automations_of(engine)
        assert [(a.id, a.owner_id, a.name) for a in found] == [
            (json.loads(event.body)["data"]["automation_id"], OWNER, "from a service")]
        assert await automations_of(engine, "not-mine") == []
        assert await runs_of(engine) == []  # the request lacked action:request: no run
        assert all((m.headers or {}).get("x-actwheel-reason") != "rejected" for m in dead.messages)
    finally:
        await engine.stop()
        queues = [intake.spec.name for actor in engine.actors.values() if isinstance(actor, ConsumerActor)
                  for intake in actor.intake()]
        await delete_topology(url, topology, [*queues, f"{prefix}actwheel.ticker.{engine.settings.instance}"])
