"""Optional attribute-based rules on top of scopes, loaded from a JSON policy file.

A rule: ``{"effect": "allow" | "deny", "subject": "user:*", "action": "webhook.*",
"resource": "https://hooks.example.com/*", "conditions": {"dry_run": false}}``.
Patterns are shell-style (``fnmatch``). ``deny`` wins over ``allow``; when no rule
matches, the file's ``default`` decides (``allow`` unless set). The resource of
an action is its target: a webhook URL, an ontology object type, a function name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import orjson

from actwheel.errors import FieldError, InvalidInput

__all__ = ["AccessRequest", "PolicyRules", "Rule", "resource_of"]

_RESOURCE_FIELDS = ("url", "object_type", "relation_type", "function", "channel", "op", "mode")


@dataclass(frozen=True, slots=True)
class AccessRequest:
    subject: str
    action: str
    resource: str
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Rule:
    effect: str
    subject: str = "*"
    action: str = "*"
    resource: str = "*"
    conditions: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, request: AccessRequest) -> bool:
        return (
            fnmatchcase(request.subject, self.subject)
            and fnmatchcase(request.action, self.action)
            and fnmatchcase(request.resource, self.resource)
            and all(request.attributes.get(k) == v for k, v in self.conditions.items())
        )


@dataclass(frozen=True, slots=True)
class PolicyRules:
    rules: tuple[Rule, ...] = ()
    default: str = "allow"

    def decide(self, request: AccessRequest) -> tuple[bool, str]:
        """(allowed, why) for ``request``."""
        matched = [r for r in self.rules if r.matches(request)]
        for rule in matched:
            if rule.effect == "deny":
                return False, f"denied by rule {_describe(rule)}"
        if matched:
            return True, f"allowed by rule {_describe(matched[0])}"
        return self.default == "allow", f"no rule matched; default {self.default}"

    @classmethod
    def load(cls, path: Path) -> PolicyRules:
        """:raises InvalidInput: naming the rule and field that does not fit"""
        try:
            raw = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise InvalidInput("policy_file", str(path), f"a readable JSON file ({exc})") from None
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: Any) -> PolicyRules:
        if not isinstance(raw, Mapping):
            raise InvalidInput("policy_file", raw, "an object {rules: [...], default?}")
        default = raw.get("default", "allow")
        errors: list[FieldError] = []
        if default not in ("allow", "deny"):
            errors.append(FieldError("default", default, "'allow' or 'deny'"))
        rules = _rules(raw.get("rules", []), errors)
        if errors:
            raise InvalidInput.collect(errors)
        return cls(rules=rules, default=default)


def _rules(raw: Any, errors: list[FieldError]) -> tuple[Rule, ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        errors.append(FieldError("rules", raw, "a list of rules"))
        return ()
    rules = []
    for i, item in enumerate(raw):
        rule = _rule(i, item, errors)
        if rule is not None:
            rules.append(rule)
    return tuple(rules)


def _rule(i: int, item: Any, errors: list[FieldError]) -> Rule | None:
    if not isinstance(item, Mapping):
        errors.append(FieldError(f"rules[{i}]", item, "an object {effect, subject?, action?, resource?, conditions?}"))
        return None
    found = len(errors)
    if item.get("effect") not in ("allow", "deny"):
        errors.append(FieldError(f"rules[{i}].effect", item.get("effect"), "'allow' or 'deny'"))
    for name in ("subject", "action", "resource"):
        if not isinstance(item.get(name, "*"), str):
            errors.append(FieldError(f"rules[{i}].{name}", item[name], "a shell-style pattern string"))
    conditions = item.get("conditions", {})
    if not isinstance(conditions, Mapping):
        errors.append(FieldError(f"rules[{i}].conditions", conditions, "an object"))
    if len(errors) > found:
        return None
    return Rule(effect=item["effect"], subject=item.get("subject", "*"), action=item.get("action", "*"),
                resource=item.get("resource", "*"), conditions=dict(conditions))


def _describe(rule: Rule) -> str:
    return f"{rule.effect} subject={rule.subject} action={rule.action} resource={rule.resource}"


def resource_of(config: Mapping[str, Any]) -> str:
    """The target an action config points at, for resource patterns."""
    for name in _RESOURCE_FIELDS:
        value = config.get(name)
        if isinstance(value, str):
            return value
    return "*"
