"""notification.send: the scopes each channel needs, and amqp routing keys kept out of actwheel's namespaces."""

from __future__ import annotations

from typing import Any

import pytest
from actions_support import Recorder, make_ctx

from actwheel.actions.defaults import default_registry
from actwheel.actions.executors.notification import AmqpChannel, ChannelFailed, RenderedMessage, SendNotification
from actwheel.topics import RESERVED_NAMESPACES

SEND = "notification:send"
EVERY_CHANNEL = {SEND, "webhook:call", "bus:publish"}


def _notification() -> SendNotification:
    definition = default_registry().get("notification.send")
    assert isinstance(definition, SendNotification)
    return definition


@pytest.mark.parametrize(
    ("config", "scopes"),
    [
        ({"channel": "log", "body": "b"}, {SEND}),
        ({"channel": "email", "body": "b", "to": ["a@example.com"]}, {SEND}),
        ({"channel": "webhook", "body": "b", "url": "https://example.com/h"}, {SEND, "webhook:call"}),
        ({"channel": "amqp", "body": "b", "routing_key": "orders.created"}, {SEND, "bus:publish"}),
    ],
)
def test_each_channel_requires_send_and_its_own_scope(config: dict[str, Any], scopes: set[str]) -> None:
    assert _notification().required_scopes_for(config) == scopes


@pytest.mark.parametrize("channel", [None, "carrier-pigeon", "${vars.channel}", 7, ["webhook"]])
def test_a_channel_not_known_before_validation_requires_every_channel_scope(channel: Any) -> None:
    config = {"body": "b"} if channel is None else {"channel": channel, "body": "b"}
    assert _notification().required_scopes_for(config) == EVERY_CHANNEL


def test_the_static_scopes_stay_notification_send() -> None:
    assert _notification().required_scopes == {SEND}


def _composite_with(step_config: dict[str, Any]) -> dict[str, Any]:
    return {
        "steps": [
            {"name": "log", "type": "simple.op", "config": {"op": "log", "message": "m"}},
            {"name": "tell", "type": "notification.send", "config": step_config},
        ]
    }


def test_a_composite_with_a_webhook_notification_requires_webhook_call() -> None:
    composite = default_registry().get("composite")
    config = _composite_with({"channel": "webhook", "body": "b", "url": "https://example.com/h"})
    assert {SEND, "webhook:call"} <= composite.required_scopes_for(config)
    assert "bus:publish" not in composite.required_scopes_for(config)


def test_a_composite_with_a_placeholder_channel_requires_every_channel_scope() -> None:
    composite = default_registry().get("composite")
    config = _composite_with({"channel": "${vars.channel}", "body": "b"})
    assert composite.required_scopes_for(config) >= EVERY_CHANNEL


@pytest.mark.parametrize("namespace", RESERVED_NAMESPACES)
def test_an_amqp_routing_key_under_a_reserved_namespace_is_invalid(namespace: str) -> None:
    routing_key = f"{namespace}finished"
    errors = _notification().validate({"channel": "amqp", "body": "b", "routing_key": routing_key})
    assert [(e.field, e.value) for e in errors] == [("routing_key", routing_key)]
    assert namespace in errors[0].expected


@pytest.mark.parametrize("routing_key", ["orders.created", "automation", "automations.x", "my.run.finished"])
def test_an_amqp_routing_key_outside_the_reserved_namespaces_is_valid(routing_key: str) -> None:
    assert _notification().validate({"channel": "amqp", "body": "b", "routing_key": routing_key}) == []


def test_a_reserved_routing_key_in_a_composite_step_names_the_step_field() -> None:
    composite = default_registry().get("composite")
    errors = composite.validate(_composite_with({"channel": "amqp", "body": "b", "routing_key": "run.finished"}))
    assert [(e.field, e.value) for e in errors] == [("steps[1].config.routing_key", "run.finished")]


async def test_a_placeholder_routing_key_that_resolves_into_a_reserved_namespace_publishes_nothing() -> None:
    recorder = Recorder()
    config = _composite_with({"channel": "amqp", "body": "b", "routing_key": "${vars.key}"})
    composite = default_registry().get("composite")
    assert composite.validate(config) == []  # the key is known only at run time
    result = await composite.execute(config, make_ctx(recorder=recorder, variables={"key": "automation.created"}))
    assert not result.succeeded
    assert "routing_key" in result.summary
    assert recorder.published == []


async def test_the_amqp_channel_itself_refuses_a_reserved_key_it_is_handed() -> None:
    recorder = Recorder()
    with pytest.raises(ChannelFailed, match="outside actwheel's own namespaces") as caught:
        await AmqpChannel().send(RenderedMessage("s", "b"), {"routing_key": "cdc.orders"}, make_ctx(recorder=recorder))
    assert not caught.value.retryable
    assert recorder.published == []
