"""The built-in action types, registered by name: the one place that knows every executor.

Kept out of :mod:`actwheel.actions.registry` so the registry depends on the action port
alone (the composite executor takes a registry; the registry must not import it back).
"""

from __future__ import annotations

from actwheel.actions.executors import composite, function, notification, ontology, simple, webhook
from actwheel.actions.executors.function import FunctionRegistry
from actwheel.actions.executors.notification import ChannelRegistry
from actwheel.actions.executors.webhook import WebhookSettings
from actwheel.actions.registry import ActionRegistry

__all__ = ["default_registry"]


def default_registry(
    *,
    functions: FunctionRegistry | None = None,
    webhook_settings: WebhookSettings | None = None,
    channels: ChannelRegistry | None = None,
) -> ActionRegistry:
    """A registry with the ten built-in types.

    ``functions``: the functions ``function.invoke`` may call (default: none);
    ``webhook_settings``: the SSRF allow-list and limits; ``channels``: notification
    channels (default: log, amqp, webhook, email).
    """
    settings = webhook_settings or webhook.WebhookSettings()
    registry = ActionRegistry()
    for definition in ontology.definitions():
        registry.register(definition)
    registry.register(function.InvokeFunction(functions or function.FunctionRegistry()))
    registry.register(webhook.WebhookCall(settings))
    registry.register(notification.SendNotification(channels or notification.default_channels(settings)))
    registry.register(simple.SimpleOp())
    registry.register(composite.CompositeAction(registry))
    return registry
