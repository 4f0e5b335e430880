"""JSON-Schema validation that reports every error at once, each with its field path and value."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jsonschema
import orjson

from actwheel.errors import FieldError

__all__ = ["schema_errors"]


def _format_path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _field_errors(error: jsonschema.ValidationError) -> list[FieldError]:
    path = _format_path(error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(error.validator_value, list) and isinstance(instance, dict):
        missing = [n for n in error.validator_value if n not in instance]
        return [FieldError(_join(path, n), None, "a value (required)") for n in missing]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = set(error.schema.get("properties", {})) if isinstance(error.schema, Mapping) else set()
        extra = sorted(k for k in instance if k not in allowed)
        return [FieldError(_join(path, k), instance[k], "no such field") for k in extra]
    return [FieldError(path or "config", instance, error.message)]


def schema_errors(schema: Mapping[str, Any], config: Any, prefix: str = "") -> list[FieldError]:
    """Every JSON-Schema violation of ``config``, each with its field path and value, in path order."""
    validator = _validator(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    if validator.is_valid(config):
        return []
    found = [f for e in validator.iter_errors(config) for f in _field_errors(e)]
    unique = {(f.field, f.expected, repr(f.value)): f for f in found}
    errors = list(unique.values())
    if prefix:
        errors = [FieldError(_join(prefix, e.field), e.value, e.expected) for e in errors]
    return sorted(errors, key=lambda e: e.field)


@functools.lru_cache(maxsize=512)
def _validator(schema_json: bytes) -> jsonschema.Draft202012Validator:
    """Building a validator costs more than most validations; cache it by the schema's canonical JSON."""
    return jsonschema.Draft202012Validator(orjson.loads(schema_json))
