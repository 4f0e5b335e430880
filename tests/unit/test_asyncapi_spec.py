"""docs/asyncapi.yaml is a valid AsyncAPI document, checked with the official schema, and names every
message the engine publishes under the routing key it publishes it with (issue 14).

The validator: the official AsyncAPI JSON Schema for the document's version, from the npm package
``@asyncapi/specs`` (PyPI has no official AsyncAPI parser), installed into ``.devdata/npm`` on first
use with ``npm`` by :mod:`tests.node_packages` (or point ``ACTWHEEL_ASYNCAPI_SPECS`` at its ``schemas``
folder). Without node/npm the validation test skips loudly on a dev machine and fails under ``CI``.
The document is validated as written, unresolved, as the AsyncAPI parser's schema rule does.
"""

from __future__ import annotations

import copy
import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from jsonschema.validators import validator_for

from actwheel.actions.storage_ontology import OntologyChanged, cdc_routing_key
from actwheel.actors.queues import AUTOMATION_CHANGES
from actwheel.bus.topology import CDC, EVENTS
from actwheel.messages import (
    ActionsCompleted,
    AutomationChanged,
    AutomationsDue,
    RunsReady,
    RunsTransitioned,
    StepProgressed,
)
from actwheel.storage.records import RunStatus
from tests.node_packages import NPM_PREFIX, npm_install

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "asyncapi.yaml"
SPECS_PACKAGE = "@asyncapi/specs@6"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(DOC.read_text(encoding="utf-8"))
    return loaded


def _unavailable(reason: str) -> None:
    message = f"!!! the official AsyncAPI schema is not available ({reason}) !!! install node/npm, or set " \
              "ACTWHEEL_ASYNCAPI_SPECS to the schemas folder of @asyncapi/specs"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@cache
def _schemas_dir() -> Path | str:
    """The ``schemas`` folder of @asyncapi/specs, or why there is none."""
    if given := os.environ.get("ACTWHEEL_ASYNCAPI_SPECS"):
        return Path(given)
    folder = NPM_PREFIX / "node_modules" / "@asyncapi" / "specs" / "schemas"
    failed = npm_install(SPECS_PACKAGE, present=folder.is_dir)
    return folder if failed is None else failed


def official_validator(version: str) -> jsonschema.protocols.Validator:
    folder = _schemas_dir()
    if isinstance(folder, str):
        _unavailable(folder)
        raise AssertionError("unreachable")
    path = Path(folder) / f"{version}.json"
    if not path.is_file():
        pytest.fail(f"@asyncapi/specs has no schema for AsyncAPI {version} ({path})", pytrace=False)
    schema = json.loads(path.read_text(encoding="utf-8"))
    return validator_for(schema)(schema)  # type: ignore[no-any-return]


def _problems(validator: jsonschema.protocols.Validator, document: dict[str, Any]) -> list[str]:
    """Each error at its most specific place (AsyncAPI's oneOf/anyOf nest the real cause)."""
    found = set()
    for error in validator.iter_errors(document):
        deepest = jsonschema.exceptions.best_match([error])
        while deepest.context:
            deepest = jsonschema.exceptions.best_match(deepest.context)
        found.add(f"{'/'.join(map(str, deepest.absolute_path))}: {deepest.message[:300]}")
    return sorted(found)


def test_the_document_is_valid_for_the_official_asyncapi_schema_of_its_version(doc: dict[str, Any]) -> None:
    validator = official_validator(doc["asyncapi"])
    assert _problems(validator, doc) == []


@pytest.mark.parametrize(("where", "change"), [
    ("a channel binding that is a $ref inside amqp", lambda d: d["channels"]["runFailed"].update(
        bindings={"amqp": {"$ref": "#/components/channelBindings/eventsExchange"}})),
    ("no info", lambda d: d.pop("info")),
    ("an operation without action", lambda d: d["operations"]["runFailed"].pop("action")),
    ("an unknown top-level field", lambda d: d.update(servers_typo={})),
])
def test_the_validator_refuses_a_broken_document(doc: dict[str, Any], where: str, change: Any) -> None:
    validator = official_validator(doc["asyncapi"])
    broken = copy.deepcopy(doc)
    change(broken)
    assert _problems(validator, broken), f"the official schema accepted {where}"


# --- every message the engine publishes, with its routing key --------------------------------------------


def _published() -> list[tuple[str, str, str]]:
    """(exchange, routing key, envelope type) of everything the engine publishes on its own."""
    events = [(EVENTS, f"run.{s.value.lower()}", RunsTransitioned.TYPE) for s in RunStatus]
    events += [(EVENTS, AutomationChanged(automation_id="a", change=c).routing_key, AutomationChanged.TYPE)
               for c in AUTOMATION_CHANGES]
    events += [(EVENTS, "action.completed", ActionsCompleted.TYPE), (EVENTS, AutomationsDue.TYPE, AutomationsDue.TYPE),
               (EVENTS, RunsReady.TYPE, RunsReady.TYPE), (EVENTS, StepProgressed.TYPE, StepProgressed.TYPE),
               (EVENTS, AutomationsDue.QUIET_KEY, AutomationsDue.TYPE), (EVENTS, RunsReady.QUIET_KEY, RunsReady.TYPE)]
    changed = OntologyChanged.TYPE
    cdc = [(CDC, cdc_routing_key("object", "Order", c), changed) for c in ("created", "updated", "deleted")]
    cdc += [(CDC, cdc_routing_key("relation", "owns", c), changed) for c in ("created", "deleted")]
    return events + cdc


def _resolve(doc: dict[str, Any], node: Any) -> Any:
    """``node``, or what its local ``$ref`` points at."""
    while isinstance(node, dict) and set(node) == {"$ref"}:
        target: Any = doc
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _address_pattern(channel: dict[str, Any]) -> re.Pattern[str] | None:
    """The routing keys a channel's address stands for (a parameter is one word, or one of its enum);
    ``None`` for an address that is a parameter alone (your own routing keys)."""
    address: str = channel["address"]
    if re.fullmatch(r"\{\w+\}", address):
        return None
    parameters = channel.get("parameters", {})

    def word(match: re.Match[str]) -> str:
        enum = parameters.get(match.group(1), {}).get("enum")
        return "(" + "|".join(map(re.escape, enum)) + ")" if enum else r"[^.]+"

    return re.compile(re.sub(r"\\\{(\w+)\\\}", word, re.escape(address)))


def _channel_types(doc: dict[str, Any], channel: dict[str, Any]) -> set[str]:
    types = set()
    for message in channel.get("messages", {}).values():
        message = _resolve(doc, message)
        types.update(example["payload"]["type"] for example in message.get("examples", []))
        for part in message.get("payload", {}).get("allOf", []):
            if const := part.get("properties", {}).get("type", {}).get("const"):
                types.add(const)
    return types


@pytest.mark.parametrize(("exchange", "routing_key", "type_"), _published(), ids=lambda v: str(v))
def test_every_message_the_engine_publishes_is_documented_with_its_routing_key(
        doc: dict[str, Any], exchange: str, routing_key: str, type_: str) -> None:
    homes = []
    for name, channel in doc["channels"].items():
        pattern = _address_pattern(channel)
        binding = _resolve(doc, channel.get("bindings", {})).get("amqp", {})
        if pattern is None or binding.get("exchange", {}).get("name") != exchange:
            continue
        if pattern.fullmatch(routing_key):
            homes.append((name, _channel_types(doc, channel)))
    assert homes, f"no channel on {exchange} has the address {routing_key}"
    assert any(type_ in types for _, types in homes), f"{routing_key} is documented without type {type_}: {homes}"
