"""ABAC policy rules: parsing with named errors, deny wins, default, conditions, resources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actwheel.actions.abac import AccessRequest, PolicyRules, Rule, resource_of
from actwheel.errors import InvalidInput


def _request(subject: str = "alice", action: str = "webhook.call", resource: str = "https://hooks.example.com/a",
             **attributes: Any) -> AccessRequest:
    return AccessRequest(subject=subject, action=action, resource=resource, attributes=attributes)


def test_from_dict_builds_rules_with_defaults() -> None:
    rules = PolicyRules.from_dict({"default": "deny", "rules": [{"effect": "allow", "action": "simple.*"}]})
    assert rules.default == "deny"
    assert rules.rules == (Rule(effect="allow", subject="*", action="simple.*", resource="*", conditions={}),)
    assert PolicyRules.from_dict({}) == PolicyRules()


def test_from_dict_collects_every_error_with_its_index() -> None:
    raw = {"default": "maybe", "rules": [
        {"effect": "allow"}, {"effect": "permit", "action": "x"}, "deny", {"effect": "deny", "conditions": [1]}]}
    with pytest.raises(InvalidInput) as caught:
        PolicyRules.from_dict(raw)
    assert [e.field for e in caught.value.errors] == ["default", "rules[1].effect", "rules[2]",
                                                      "rules[3].conditions"]
    assert caught.value.errors[0].value == "maybe"
    assert caught.value.errors[3].value == [1]


@pytest.mark.parametrize("raw", [[], "rules", None])
def test_from_dict_needs_an_object(raw: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        PolicyRules.from_dict(raw)
    assert caught.value.field == "policy_file"


@pytest.mark.parametrize("rules", ["deny all", {"effect": "deny"}, 3])
def test_rules_must_be_a_list(rules: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        PolicyRules.from_dict({"rules": rules})
    assert caught.value.field == "rules"


def test_rule_errors_carry_the_offending_value() -> None:
    with pytest.raises(InvalidInput) as caught:
        PolicyRules.from_dict({"rules": [{"effect": "permit", "action": "x"}, {"effect": "deny", "subject": ["a"]}]})
    assert [(e.field, e.value) for e in caught.value.errors] == [("rules[0].effect", "permit"),
                                                                 ("rules[1].subject", ["a"])]


def test_deny_wins_whatever_the_order() -> None:
    allow = {"effect": "allow", "action": "webhook.*"}
    deny = {"effect": "deny", "resource": "https://hooks.example.com/*"}
    for order in ([allow, deny], [deny, allow]):
        allowed, why = PolicyRules.from_dict({"rules": order}).decide(_request())
        assert not allowed
        assert why.startswith("denied by rule deny")


def test_a_matching_allow_allows_even_under_default_deny() -> None:
    rules = PolicyRules.from_dict({"default": "deny", "rules": [{"effect": "allow", "subject": "ali*"}]})
    assert rules.decide(_request()) == (True, "allowed by rule allow subject=ali* action=* resource=*")
    allowed, why = rules.decide(_request(subject="bob"))
    assert not allowed
    assert why == "no rule matched; default deny"


def test_default_allow_when_nothing_matches() -> None:
    rules = PolicyRules.from_dict({"rules": [{"effect": "deny", "subject": "mallory"}]})
    assert rules.decide(_request()) == (True, "no rule matched; default allow")


def test_conditions_compare_attributes() -> None:
    rules = PolicyRules.from_dict({"rules": [{"effect": "deny", "conditions": {"dry_run": False}}]})
    assert not rules.decide(_request(dry_run=False))[0]
    assert rules.decide(_request(dry_run=True))[0]
    assert rules.decide(_request())[0]  # absent attribute: the condition does not hold


def test_patterns_are_case_sensitive_shell_patterns() -> None:
    rules = PolicyRules.from_dict({"rules": [{"effect": "deny", "action": "webhook.?all"}]})
    assert not rules.decide(_request(action="webhook.call"))[0]
    assert rules.decide(_request(action="Webhook.call"))[0]
    assert rules.decide(_request(action="webhook.calls"))[0]


def test_resource_of_takes_the_first_target_field() -> None:
    assert resource_of({"url": "https://x", "op": "log"}) == "https://x"
    assert resource_of({"object_type": "Order"}) == "Order"
    assert resource_of({"function": "billing.charge"}) == "billing.charge"
    assert resource_of({"url": {"$secret": "hook"}, "channel": "email"}) == "email"
    assert resource_of({}) == "*"


def test_load_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text('{"default": "deny", "rules": [{"effect": "allow", "action": "simple.op"}]}')
    rules = PolicyRules.load(path)
    assert rules.decide(_request(action="simple.op"))[0]
    assert not rules.decide(_request())[0]


@pytest.mark.parametrize("content", [None, "{not json"])
def test_load_refuses_missing_or_malformed_files(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "policy.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InvalidInput) as caught:
        PolicyRules.load(path)
    assert (caught.value.field, caught.value.value) == ("policy_file", str(path))
