"""Server-side action configuration from the environment: functions, webhook allow-list, SMTP, ABAC file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from actwheel.actions.config import (
    policy_rules_from_env,
    registry_from_env,
    smtp_from_env,
    webhook_settings_from_env,
)
from actwheel.errors import InvalidInput


def test_functions_from_the_named_modules_are_invocable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shop_functions.py").write_text(textwrap.dedent("""
        def register(registry):
            registry.register("double", lambda x: x * 2)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = registry_from_env({"ACTWHEEL_FUNCTIONS": "shop_functions"})
    invoke = registry.get("function.invoke")
    assert invoke.validate({"function": "double", "args": {"x": 2}}) == []
    assert invoke.validate({"function": "triple", "args": {}}) != []


def test_a_missing_functions_module_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput) as caught:
        registry_from_env({"ACTWHEEL_FUNCTIONS": "no_such_module_here"})
    assert "no_such_module_here" in str(caught.value)


def test_webhook_allow_list() -> None:
    settings = webhook_settings_from_env({"ACTWHEEL_WEBHOOK_ALLOW_HOSTS": "Hooks.Internal, other",
                                          "ACTWHEEL_WEBHOOK_ALLOW_NETWORKS": "10.1.0.0/16"})
    assert settings.host_allowed("hooks.internal")
    assert not settings.host_allowed("evil.example")
    import ipaddress
    assert settings.address_allowed(ipaddress.ip_address("10.1.2.3"))
    assert not settings.address_allowed(ipaddress.ip_address("10.2.0.1"))


def test_a_bad_network_names_the_variable() -> None:
    with pytest.raises(InvalidInput) as caught:
        webhook_settings_from_env({"ACTWHEEL_WEBHOOK_ALLOW_NETWORKS": "10.1.0.0/99"})
    assert caught.value.field == "ACTWHEEL_WEBHOOK_ALLOW_NETWORKS"
    assert caught.value.value == "10.1.0.0/99"


def test_smtp_settings_keep_the_password_as_a_reference() -> None:
    smtp = smtp_from_env({"ACTWHEEL_SMTP_HOST": "mail", "ACTWHEEL_SMTP_PORT": "2525",
                          "ACTWHEEL_SMTP_STARTTLS": "true", "ACTWHEEL_SMTP_PASSWORD_SECRET": "smtp-pw"})
    assert (smtp.host, smtp.port, smtp.starttls) == ("mail", 2525, True)
    assert smtp.password == {"$secret": "smtp-pw"}
    assert "smtp-pw" not in repr(smtp)


@pytest.mark.parametrize(("name", "value"), [("ACTWHEEL_SMTP_PORT", "99999"), ("ACTWHEEL_SMTP_STARTTLS", "maybe")])
def test_bad_smtp_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        smtp_from_env({name: value})
    assert caught.value.field == name


def test_policy_file(tmp_path: Path) -> None:
    assert policy_rules_from_env({}) is None
    path = tmp_path / "rules.json"
    path.write_text('{"rules": [{"effect": "deny", "action": "webhook.*"}]}')
    rules = policy_rules_from_env({"ACTWHEEL_POLICY_FILE": str(path)})
    assert rules is not None
    assert len(rules.rules) == 1
    path.write_text("{not json")
    with pytest.raises(InvalidInput) as caught:
        policy_rules_from_env({"ACTWHEEL_POLICY_FILE": str(path)})
    assert caught.value.field == "policy_file"
