"""Server-side action configuration, from the environment (never from an action's config).

| variable | meaning |
|---|---|
| ``ACTWHEEL_FUNCTIONS`` | comma-separated modules whose ``register(registry)`` adds functions |
| ``ACTWHEEL_WEBHOOK_ALLOW_HOSTS`` | host names webhooks may call although they resolve to private addresses |
| ``ACTWHEEL_WEBHOOK_ALLOW_NETWORKS`` | CIDR networks webhooks may call (``10.1.0.0/16,fd00::/8``) |
| ``ACTWHEEL_SMTP_HOST`` / ``_PORT`` / ``_STARTTLS`` / ``_SSL`` / ``_USER`` / ``_FROM`` | the mail server |
| ``ACTWHEEL_SMTP_PASSWORD_SECRET`` | the *name* of the secret holding the SMTP password |
| ``ACTWHEEL_POLICY_FILE`` | a JSON file of ABAC rules (see :mod:`actwheel.actions.abac`) |
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path

from actwheel.actions.abac import PolicyRules
from actwheel.actions.defaults import default_registry
from actwheel.actions.executors.function import FunctionRegistry
from actwheel.actions.executors.notification import SmtpSettings, default_channels
from actwheel.actions.executors.webhook import WebhookSettings
from actwheel.actions.registry import ActionRegistry
from actwheel.errors import InvalidInput

__all__ = ["policy_rules_from_env", "registry_from_env", "smtp_from_env", "webhook_settings_from_env"]


def _list(env: Mapping[str, str], name: str) -> list[str]:
    return [part.strip() for part in env.get(name, "").split(",") if part.strip()]


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "false").strip().lower()
    if raw not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise InvalidInput(name, raw, "true or false")
    return raw in ("1", "true", "yes", "on")


def webhook_settings_from_env(env: Mapping[str, str] | None = None) -> WebhookSettings:
    """:raises InvalidInput: naming the variable when a network is not CIDR"""
    env = os.environ if env is None else env
    networks = _list(env, "ACTWHEEL_WEBHOOK_ALLOW_NETWORKS")
    for network in networks:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise InvalidInput("ACTWHEEL_WEBHOOK_ALLOW_NETWORKS", network, "CIDR networks, e.g. 10.1.0.0/16") from None
    return WebhookSettings(allow_hosts=frozenset(_list(env, "ACTWHEEL_WEBHOOK_ALLOW_HOSTS")),
                           allow_networks=tuple(networks))


def smtp_from_env(env: Mapping[str, str] | None = None) -> SmtpSettings:
    """:raises InvalidInput: naming the variable when the port is not a number"""
    env = os.environ if env is None else env
    port = env.get("ACTWHEEL_SMTP_PORT", "25")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput("ACTWHEEL_SMTP_PORT", port, "a TCP port 1-65535")
    secret = env.get("ACTWHEEL_SMTP_PASSWORD_SECRET")
    return SmtpSettings(host=env.get("ACTWHEEL_SMTP_HOST", "localhost"), port=int(port),
                        starttls=_flag(env, "ACTWHEEL_SMTP_STARTTLS"), ssl=_flag(env, "ACTWHEEL_SMTP_SSL"),
                        user=env.get("ACTWHEEL_SMTP_USER"), password={"$secret": secret} if secret else None,
                        sender=env.get("ACTWHEEL_SMTP_FROM", "actwheel@localhost"))


def registry_from_env(env: Mapping[str, str] | None = None) -> ActionRegistry:
    """The built-in action types configured from ``env``."""
    env = os.environ if env is None else env
    webhook = webhook_settings_from_env(env)
    return default_registry(functions=FunctionRegistry.from_env(env), webhook_settings=webhook,
                            channels=default_channels(webhook, smtp_from_env(env)))


def policy_rules_from_env(env: Mapping[str, str] | None = None) -> PolicyRules | None:
    """The ABAC rules of ``ACTWHEEL_POLICY_FILE``, or ``None`` (scopes only) when it is unset."""
    env = os.environ if env is None else env
    path = env.get("ACTWHEEL_POLICY_FILE")
    return PolicyRules.load(Path(path)) if path else None
