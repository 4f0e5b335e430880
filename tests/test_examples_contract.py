"""The documented bus contract (docs/asyncapi.yaml) against the code, and the examples against a real engine.

Part 1 needs no services: every message type the engine consumes is documented; every
documented example validates against its JSON schema AND decodes with actwheel's codec;
the schema's required fields are exactly the ones the code refuses to do without; the
documented routing keys and exchanges are the engine's.

Part 2 runs ``examples/publisher.py`` and ``examples/subscriber.py`` (plain aio-pika)
against a real RabbitMQ and an in-process engine on a unique name prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import jsonschema
import pytest
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7
from services import rabbitmq_url

from actwheel.actions.storage_ontology import OntologyChanged
from actwheel.actors.consumer import ConsumerActor
from actwheel.actors.queues import AUTOMATION_CHANGES as _AUTOMATION_CHANGES
from actwheel.bus.envelope import decode
from actwheel.bus.topology import CDC, COMMANDS, DLX, EVENTS, Topology
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import InvalidMessage
from actwheel.events import EventFactory
from actwheel.messages import (
    COMMANDS as COMMAND_NAMES,
)
from actwheel.messages import (
    MESSAGE_TYPES,
    ActionRequested,
    ActionsCompleted,
    AutomationCommandRequested,
    RunsTransitioned,
    message_from_data,
)
from actwheel.settings import Settings
from actwheel.storage.records import NewPrincipal, Origin, PrincipalKind, RunStatus
from actwheel.triggers import parse as parse_trigger

ROOT = Path(__file__).resolve().parent.parent
DOC_PATH = ROOT / "docs" / "asyncapi.yaml"
DOC_URI = "urn:actwheel:asyncapi"
WAIT_S = 20.0  # an upper bound for one awaited event, never a sleep


# --- the document -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(DOC_PATH.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def registry(doc: dict[str, Any]) -> Registry[Any]:
    return Registry().with_resource(DOC_URI, Resource.from_contents(doc, default_specification=DRAFT7))


def resolve(doc: dict[str, Any], node: Any) -> Any:
    """Follow ``$ref`` chains (local JSON pointers) until a node without one."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node:
        node = pointer(doc, node["$ref"])
        seen += 1
        assert seen < 20, "a $ref cycle"
    return node


def pointer(doc: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), f"only local references are used, got {ref}"
    node: Any = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict), f"$ref {ref} goes through a non-object at {part!r}"
        assert part in node, f"$ref {ref} does not resolve (at {part!r})"
        node = node[part]
    return node


def validator(registry: Registry[Any], ref: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator({"$ref": DOC_URI + ref}, registry=registry)


def envelope_messages(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, message) for every documented message whose payload is an envelope."""
    for name, message in doc["components"]["messages"].items():
        payload = message.get("payload", {})
        if any(part.get("$ref") == "#/components/schemas/Envelope" for part in payload.get("allOf", [])):
            yield name, message


def examples(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    for name, message in envelope_messages(doc):
        for example in message.get("examples", []):
            yield name, message, example


def channel_addresses(doc: dict[str, Any], exchange: str) -> set[str]:
    found = set()
    for channel in doc["channels"].values():
        binding = resolve(doc, channel.get("bindings", {})).get("amqp", {})
        if binding.get("exchange", {}).get("name") == exchange:
            found.add(channel["address"])
    return found


def test_every_reference_resolves(doc: dict[str, Any]) -> None:
    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                yield node["$ref"]
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    refs = list(walk(doc))
    assert len(refs) > 100
    for ref in refs:
        pointer(doc, ref)


def test_document_is_asyncapi_3_with_operations_on_known_channels(doc: dict[str, Any]) -> None:
    assert doc["asyncapi"] == "3.0.0"
    assert {s["protocol"] for s in doc["servers"].values()} == {"amqp"}
    assert doc["defaultContentType"] == "application/json"
    for name, operation in doc["operations"].items():
        assert operation["action"] in ("send", "receive"), name
        channel_ref = operation["channel"]["$ref"]
        channel = pointer(doc, channel_ref)
        for message_ref in operation["messages"]:
            assert message_ref["$ref"].startswith(channel_ref + "/messages/"), (name, message_ref)
            pointer(doc, message_ref["$ref"])
        assert channel, name


def test_every_engine_message_type_is_documented_with_an_example(doc: dict[str, Any]) -> None:
    documented = {example["payload"]["type"] for _, _, example in examples(doc)}
    missing = set(MESSAGE_TYPES) - documented
    assert not missing, f"message types without a documented example: {sorted(missing)}"


def test_exchanges_are_the_topology_defaults(doc: dict[str, Any]) -> None:
    bindings = doc["components"]["channelBindings"]
    names = {b["amqp"]["exchange"]["name"] for b in bindings.values()}
    assert names == {EVENTS, COMMANDS, CDC}
    for binding in bindings.values():
        exchange = binding["amqp"]["exchange"]
        assert (exchange["type"], exchange["durable"], exchange["autoDelete"]) == ("topic", True, False)
    assert doc["channels"]["deadLetter"]["bindings"]["amqp"]["exchange"]["name"] == DLX
    assert doc["channels"]["deadLetterQueue"]["bindings"]["amqp"]["queue"]["name"] == Topology().dead_letters


def test_every_routing_key_the_engine_uses_is_documented(doc: dict[str, Any]) -> None:
    commands = channel_addresses(doc, COMMANDS)
    assert commands == {f"command.{c}" for c in COMMAND_NAMES} | {ActionRequested.TYPE}
    events = channel_addresses(doc, EVENTS)
    expected = ({f"run.{s.value.lower()}" for s in RunStatus}
                | {f"automation.{c}" for c in _AUTOMATION_CHANGES}
                | {"automation.due", "run.ready", "run.step", "action.completed"})
    assert expected <= events, sorted(expected - events)
    assert any(address.startswith("cdc.ontology.") for address in channel_addresses(doc, CDC))


def test_status_and_change_enums_match_the_code(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]
    assert schemas["RunStatus"]["enum"] == [s.value for s in RunStatus]
    for schema in ("RunsTransitionedData", "RunTransition"):
        assert schemas[schema]["properties"]["status"] == {"$ref": "#/components/schemas/RunStatus"}, schema
    assert tuple(schemas["AutomationChangedData"]["properties"]["change"]["enum"]) == _AUTOMATION_CHANGES
    assert schemas["AutomationCommandData"]["properties"]["command"]["enum"] == list(COMMAND_NAMES)


def test_publishing_bindings_are_persistent_mandatory_and_confirmed(doc: dict[str, Any]) -> None:
    for name, operation in doc["operations"].items():
        if operation["action"] != "receive":
            continue
        amqp = resolve(doc, operation["bindings"])["amqp"]
        assert (amqp["deliveryMode"], amqp["mandatory"], amqp["ack"]) == (2, True, True), name
        assert operation["x-publisher-confirms"] is True, name


@pytest.mark.parametrize("kind", ["once", "cron", "event"])
def test_trigger_schemas_list_exactly_the_fields_the_parser_accepts(doc: dict[str, Any], kind: str) -> None:
    module = importlib.import_module(f"actwheel.triggers.{kind}")
    schema = doc["components"]["schemas"][f"{kind.capitalize()}Trigger"]
    assert set(schema["properties"]) == set(module._FIELDS)


def test_repeat_schema_lists_every_field_some_repeat_kind_accepts(doc: dict[str, Any]) -> None:
    from actwheel.triggers.repeat import _FIELDS

    accepted = {name for fields in _FIELDS.values() for name in fields}
    assert set(doc["components"]["schemas"]["RepeatTrigger"]["properties"]) == accepted


# --- the examples against the code ------------------------------------------------------------


def _example_ids(doc_path: Path = DOC_PATH) -> list[str]:
    loaded = yaml.safe_load(doc_path.read_text(encoding="utf-8"))
    return [f"{name}:{example['name']}" for name, _, example in examples(loaded)]


@pytest.fixture(params=_example_ids())
def example(request: pytest.FixtureRequest,
            doc: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    wanted = request.param
    for name, message, ex in examples(doc):
        if f"{name}:{ex['name']}" == wanted:
            return name, message, ex
    raise AssertionError(wanted)


def test_example_matches_its_schema(example: tuple[str, dict[str, Any], dict[str, Any]],
                                    registry: Registry[Any]) -> None:
    name, _, ex = example
    validator(registry, f"#/components/messages/{name}/payload").validate(ex["payload"])
    validator(registry, "#/components/schemas/Headers").validate(ex.get("headers", {}))


def test_example_decodes_with_the_engine_codec(example: tuple[str, dict[str, Any], dict[str, Any]],
                                               registry: Registry[Any]) -> None:
    name, _, ex = example
    envelope = decode(json.dumps(ex["payload"]).encode())
    assert envelope.id == ex["payload"]["id"]
    if envelope.type == OntologyChanged.TYPE:  # published only (CDC): its record is the codec
        change = OntologyChanged(**envelope.data)
        assert change.to_data() == envelope.data
        assert ex["summary"] == f"Routing key `{change.routing_key}`."
        return
    if envelope.type not in MESSAGE_TYPES:
        assert name in ("BusinessEvent", "Notification"), f"{name} documents an unknown type {envelope.type}"
        return
    message = message_from_data(envelope.type, envelope.data)
    # What the engine would send back for it conforms to the documented schema too.
    again = {**ex["payload"], "data": message.to_data()}
    validator(registry, f"#/components/messages/{name}/payload").validate(again)


def test_schema_requires_exactly_what_the_code_requires(example: tuple[str, dict[str, Any], dict[str, Any]],
                                                        registry: Registry[Any]) -> None:
    """Drop each field of the example's data: the schema and the codec must agree on whether that is fine.

    Fields listed in the message's ``x-checked-after-decoding`` are required by the consuming actor
    (the planner checks command ``args``), not by the codec: the schema refuses their absence, the codec not.
    """
    name, message, ex = example
    type_ = ex["payload"]["type"]
    if type_ not in MESSAGE_TYPES:
        pytest.skip(f"{type_} is not a type the engine decodes")
    check = validator(registry, f"#/components/messages/{name}/payload")
    after_decoding = set(message.get("x-checked-after-decoding", []))
    for where, data in _without_each_field(ex["payload"]["data"]):
        schema_ok = check.is_valid({**ex["payload"], "data": data})
        code_ok = _decodes(type_, data)
        if where.removeprefix("data.") in after_decoding:
            assert (schema_ok, code_ok) == (False, True), f"{name}: {where} is checked after decoding"
        else:
            assert schema_ok == code_ok, (f"{name}: without {where} the schema says "
                                          f"{'valid' if schema_ok else 'invalid'}, the codec "
                                          f"{'accepts' if code_ok else 'refuses'}")


def _without_each_field(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``data`` minus one field at a time: its own fields, then those of the first entry of each list of
    objects (``runs``, ``actions``, ``items``), since batched messages carry their fields in entries."""
    for key in data:
        yield f"data.{key}", {k: v for k, v in data.items() if k != key}
    for key, value in data.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            for field in value[0]:
                first = {k: v for k, v in value[0].items() if k != field}
                yield f"data.{key}[0].{field}", {**data, key: [first, *value[1:]]}


def _decodes(type_: str, data: dict[str, Any]) -> bool:
    try:
        message_from_data(type_, data)
    except InvalidMessage:
        return False
    return True


def test_schema_refuses_what_the_codec_refuses(registry: Registry[Any], doc: dict[str, Any]) -> None:
    _, _, ex = next(e for e in examples(doc) if e[0] == "RunsTransitioned")
    check = validator(registry, "#/components/messages/RunsTransitioned/payload")
    runs = ex["payload"]["data"]["runs"]
    assert runs[0].get("scheduled_for"), "the first example's first run is scheduled"
    naive_run = {**runs[0], "scheduled_for": "2030-01-01T10:30:00"}
    naive = {**ex["payload"], "data": {**ex["payload"]["data"], "runs": [naive_run, *runs[1:]]}}
    assert not check.is_valid(naive)
    with pytest.raises(InvalidMessage) as caught:
        message_from_data(naive["type"], naive["data"])
    assert caught.value.field == "data.runs[0].scheduled_for"
    not_a_list = {**ex["payload"], "data": {**ex["payload"]["data"], "runs": runs[0]}}
    assert not check.is_valid(not_a_list)
    with pytest.raises(InvalidMessage) as caught:
        message_from_data(not_a_list["type"], not_a_list["data"])
    assert caught.value.field == "data.runs"
    wrong_type = {**ex["payload"], "type": "run transitioned"}
    assert not check.is_valid(wrong_type)
    with pytest.raises(InvalidMessage):
        decode(json.dumps(wrong_type).encode())


@pytest.mark.parametrize("name", ["RunsTransitioned", "ActionsCompleted"])
def test_batched_examples_are_what_the_engine_writes_for_their_entries(doc: dict[str, Any], name: str) -> None:
    """Hand each documented batch's entries to the engine's EventFactory: it writes exactly one message, with
    the documented routing key (a channel of that message), correlation id and data."""
    events = EventFactory(topology=Topology(), clock=VirtualClock(), source="actwheel/pid-4242")
    channels = {c["address"]: c for c in doc["channels"].values()}
    shapes = doc["components"]["messages"][name]["examples"]
    assert {len(_entries(ex["payload"])) > 1 for ex in shapes} == {True, False}, "a batch and a single example"
    for ex in shapes:
        payload = ex["payload"]
        message = message_from_data(payload["type"], payload["data"])
        if isinstance(message, RunsTransitioned):
            rows = events.runs_transitioned(message.runs)
        else:
            assert isinstance(message, ActionsCompleted)
            rows = events.actions_completed(message.actions)
        assert len(rows) == 1, ex["name"]
        written = decode(rows[0].body)
        assert (written.type, written.data) == (payload["type"], message.to_data()), ex["name"]
        assert written.correlation_id == payload.get("correlation_id"), ex["name"]
        channel = channels[rows[0].routing_key]
        assert [m["$ref"] for m in channel["messages"].values()] == [f"#/components/messages/{name}"], ex["name"]


def _entries(payload: dict[str, Any]) -> list[dict[str, Any]]:
    data = payload["data"]
    entries: list[dict[str, Any]] = data["runs"] if "runs" in data else data["actions"]
    return entries


def test_dead_letter_example_states_the_codec_s_own_reason(doc: dict[str, Any]) -> None:
    example = doc["components"]["messages"]["DeadLetter"]["examples"][0]
    body = example["payload"]
    with pytest.raises(InvalidMessage) as caught:
        message_from_data(body["type"], body["data"])
    assert example["headers"]["x-actwheel-detail"] == str(caught.value)


def test_documented_automation_examples_use_valid_triggers(doc: dict[str, Any],
                                                            registry: Registry[Any]) -> None:
    creates = doc["components"]["messages"]["CreateAutomation"]["examples"]
    assert len(creates) >= 2
    for ex in creates:
        parse_trigger(ex["payload"]["data"]["args"]["automation"]["trigger"])
    update = doc["components"]["messages"]["UpdateAutomation"]["examples"][0]
    parse_trigger(update["payload"]["data"]["args"]["changes"]["trigger"])
    bad = {"type": "once", "at": "2030-01-01T09:00:00+08:00", "cron": "x"}
    assert not validator(registry, "#/components/schemas/Trigger").is_valid(bad)


MESSAGES_MD = ROOT / "docs" / "messages.md"


def _json_blocks(markdown: str) -> list[dict[str, Any]]:
    blocks = re.findall(r"```json\n(.*?)```", markdown, flags=re.DOTALL)
    return [json.loads(block) for block in blocks]


def test_messages_md_examples_decode_with_the_engine_codec(registry: Registry[Any]) -> None:
    blocks = _json_blocks(MESSAGES_MD.read_text(encoding="utf-8"))
    assert len(blocks) >= 10
    seen = set()
    for body in blocks:
        envelope = decode(json.dumps(body).encode())
        if envelope.type in MESSAGE_TYPES:
            message_from_data(envelope.type, envelope.data)
            seen.add(envelope.type)
        validator(registry, "#/components/schemas/Envelope").validate(body)
    assert seen == set(MESSAGE_TYPES)


def test_messages_md_names_every_documented_routing_key(doc: dict[str, Any]) -> None:
    text = MESSAGES_MD.read_text(encoding="utf-8")
    addresses = {c["address"] for c in doc["channels"].values() if "{" not in c["address"]}
    missing = sorted(a for a in addresses if f"`{a}`" not in text)
    assert not missing, f"docs/messages.md does not mention {missing}"
    for exchange in (EVENTS, COMMANDS, CDC, DLX, Topology().dead_letters):
        assert f"`{exchange}`" in text


# --- the examples' messages, without a broker -----------------------------------------------------


def _load_example(name: str) -> ModuleType:
    module_name = f"actwheel_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "examples" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def publisher() -> ModuleType:
    return _load_example("publisher")


@pytest.fixture(scope="module")
def subscriber() -> ModuleType:
    return _load_example("subscriber")


def test_examples_import_nothing_from_actwheel() -> None:
    for name in ("publisher", "subscriber"):
        source = (ROOT / "examples" / f"{name}.py").read_text(encoding="utf-8")
        imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
        assert imports
        assert not [line for line in imports if "actwheel" in line], imports


def test_publisher_messages_match_the_documented_schemas(publisher: ModuleType,
                                                         registry: Registry[Any]) -> None:
    create = publisher.create_automation("alice", publisher.example_automation())
    request = publisher.request_action("alice", "simple.op", {"op": "log", "message": "hi"},
                                       idempotency_key="k-1")
    assert (create.routing_key, request.routing_key) == ("command.create", "action.request")
    validator(registry, "#/components/messages/CreateAutomation/payload").validate(create.envelope)
    validator(registry, "#/components/messages/ActionRequested/payload").validate(request.envelope)
    amqp_message = publisher.to_amqp(request)
    assert amqp_message.content_type == "application/json"
    assert amqp_message.headers == {"x-schema-version": 1}
    assert amqp_message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    decoded = message_from_data(*_type_and_data(decode(amqp_message.body)))
    assert isinstance(decoded, ActionRequested)
    assert decoded.idempotency_key == "k-1"


def _type_and_data(envelope: Any) -> tuple[str, dict[str, Any]]:
    return envelope.type, envelope.data


def test_subscriber_prints_one_line_per_entry_of_documented_events(doc: dict[str, Any],
                                                                    subscriber: ModuleType) -> None:
    messages = doc["components"]["messages"]
    batched = [(f"run.{ex['payload']['data']['status'].lower()}", ex["payload"])
               for ex in messages["RunsTransitioned"]["examples"]]
    batched += [("action.completed", ex["payload"]) for ex in messages["ActionsCompleted"]["examples"]]
    assert max(len(_entries(payload)) for _, payload in batched) > 1
    for routing_key, payload in batched:
        event = subscriber.parse_event(routing_key, json.dumps(payload).encode(), {"x-schema-version": 1})
        assert subscriber.entries(event) == _entries(payload)
        lines = subscriber.format_lines(event)
        assert len(lines) == len(_entries(payload)), routing_key
        for line, entry in zip(lines, _entries(payload), strict=True):
            assert routing_key in line
            assert f"run={entry['run_id']}" in line
            if "status" in entry:
                assert f"status={entry['status']}" in line
            else:
                assert f"summary={entry['result']['summary']!r}" in line
    ready = messages["RunsReady"]["examples"][0]["payload"]
    event = subscriber.parse_event("run.ready", json.dumps(ready).encode())
    assert subscriber.entries(event) == [ready["data"]]
    assert [line.split()[1:] for line in subscriber.format_lines(event)] == [
        ["run.ready", *json.dumps(ready["data"], sort_keys=True).split()]]


@pytest.mark.parametrize(("body", "headers"), [
    (b"not json", {}),
    (b"[1, 2]", {}),
    (b'{"id": "x", "type": "run.succeeded"}', {}),
    (b'{"id": "x", "type": "a", "occurred_at": "2030-01-01T00:00:00Z", "source": "s", "data": {}}',
     {"x-schema-version": 2}),
])
def test_subscriber_refuses_what_is_not_an_envelope(subscriber: ModuleType, body: bytes,
                                                    headers: dict[str, Any]) -> None:
    with pytest.raises(subscriber.NotAnEnvelope):
        subscriber.parse_event("run.succeeded", body, headers)


# --- against RabbitMQ and a real engine -----------------------------------------------------------


class Recorder:
    """Collects the subscriber's events; ``wait_for`` wakes on each new one (no polling, no sleeps)."""

    def __init__(self, format_lines: Callable[[Any], list[str]]) -> None:
        self.events: list[Any] = []
        self.lines: list[str] = []
        self._format = format_lines
        self._new = asyncio.Event()

    def __call__(self, event: Any) -> None:
        self.events.append(event)
        self.lines.extend(self._format(event))
        self._new.set()

    async def wait_for(self, predicate: Callable[[list[Any]], Any]) -> Any:
        async with asyncio.timeout(WAIT_S):
            while not (found := predicate(self.events)):
                self._new.clear()
                await self._new.wait()
        return found


class RawTap:
    """A throwaway classic queue that keeps the raw bytes and properties of what arrives."""

    def __init__(self) -> None:
        self.messages: list[aio_pika.abc.AbstractIncomingMessage] = []
        self._new = asyncio.Event()

    async def on_message(self, message: aio_pika.abc.AbstractIncomingMessage) -> None:
        await message.ack()
        self.messages.append(message)
        self._new.set()

    async def wait_count(self, count: int) -> None:
        async with asyncio.timeout(WAIT_S):
            while len(self.messages) < count:
                self._new.clear()
                await self._new.wait()


@contextlib.asynccontextmanager
async def raw_tap(url: str, exchange: str, pattern: str) -> AsyncIterator[RawTap]:
    tap = RawTap()
    connection = await aio_pika.connect(url, timeout=10)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(exclusive=True, auto_delete=True)
        await queue.bind(exchange, pattern)
        await queue.consume(tap.on_message)
        yield tap


@contextlib.asynccontextmanager
async def running_subscriber(subscriber: ModuleType, url: str, prefix: str, recorder: Recorder,
                             patterns: tuple[str, ...]) -> AsyncIterator[str]:
    queue_name = f"{prefix}example.run-printer"
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(subscriber.subscribe(url, prefix, queue_name=queue_name, patterns=patterns,
                                                    on_event=recorder, ready=ready, stop=stop))
    try:
        waiter = asyncio.create_task(ready.wait())
        async with asyncio.timeout(15):
            await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if task.done():
            task.result()  # raises the reason it could not start
        yield queue_name
    finally:
        stop.set()
        async with asyncio.timeout(15):
            await task


async def delete_names(url: str, queues: list[str], exchanges: list[str]) -> None:
    """Remove what a test declared on the shared broker (best effort, bounded)."""
    connection = await aio_pika.connect(url, timeout=5)
    async with connection:
        channel = await connection.channel()
        for queue in queues:
            with contextlib.suppress(Exception):
                await channel.queue_delete(queue)
        for exchange in exchanges:
            with contextlib.suppress(Exception):
                await channel.exchange_delete(exchange)


def _engine_queues(engine: Engine, prefix: str) -> list[str]:
    names = [intake.spec.name for actor in engine.actors.values() if isinstance(actor, ConsumerActor)
             for intake in actor.intake()]
    return [*names, f"{prefix}actwheel.ticker.{engine.settings.instance}"]


@pytest.mark.rabbitmq
async def test_publisher_fails_loudly_when_no_engine_listens(publisher: ModuleType) -> None:
    url = rabbitmq_url()
    prefix = f"t-{uuid.uuid4().hex[:8]}."
    try:
        with pytest.raises(aio_pika.exceptions.PublishError):
            await publisher.publish_all(url, prefix, [publisher.create_automation("alice", {"name": "x"})])
    finally:
        await delete_names(url, [], [prefix + COMMANDS])


@pytest.mark.rabbitmq
async def test_subscriber_dead_letters_a_body_that_is_not_an_envelope(subscriber: ModuleType) -> None:
    url = rabbitmq_url()
    prefix = f"t-{uuid.uuid4().hex[:8]}."
    recorder = Recorder(subscriber.format_lines)
    queue_name = ""
    try:
        async with (raw_tap_declared(url, prefix + DLX) as dead,
                    running_subscriber(subscriber, url, prefix, recorder, ("run.#",)) as queue_name):
            good = {"id": "e-1", "type": "runs.transitioned", "occurred_at": "2030-01-01T00:00:00Z",
                    "source": "test", "data": {"status": "FAILED", "runs": [{"run_id": "r-1", "status": "FAILED"}]}}
            await publish_raw(url, prefix + EVENTS, [
                ("run.bogus", b"not json"),
                ("run.failed", json.dumps(good).encode()),
                ("run.failed", json.dumps(good).encode()),  # a duplicate: same envelope id
                ("run.failed", json.dumps({**good, "id": "e-2"}).encode()),
            ])
            await dead.wait_count(1)
            await recorder.wait_for(lambda events: any(e.envelope["id"] == "e-2" for e in events))
        letter = dead.messages[0]
        assert letter.body == b"not json"
        assert letter.routing_key == queue_name
        assert (letter.headers or {}).get("x-first-death-reason") == "rejected"
        # The duplicate (same envelope id) was acked, not handed to on_event a second time.
        assert sorted(e.envelope["id"] for e in recorder.events) == ["e-1", "e-2"]
    finally:
        await delete_names(url, [queue_name] if queue_name else [], [prefix + EVENTS, prefix + DLX])


async def publish_raw(url: str, exchange: str, messages: list[tuple[str, bytes]]) -> None:
    connection = await aio_pika.connect(url, timeout=10)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        target = await channel.get_exchange(exchange)
        for routing_key, body in messages:
            await target.publish(aio_pika.Message(body), routing_key=routing_key, mandatory=True)


@contextlib.asynccontextmanager
async def raw_tap_declared(url: str, exchange: str) -> AsyncIterator[RawTap]:
    connection = await aio_pika.connect(url, timeout=10)
    async with connection:
        channel = await connection.channel()
        await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
    async with raw_tap(url, exchange, "#") as tap:
        yield tap


#: The examples' RabbitMQ user (ops/dev-services; password = user name).
EXAMPLE_USER = "svc-example"


def as_user(url: str, user: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{user}:{user}@{parts.hostname}:{parts.port}"))


@pytest.mark.rabbitmq
async def test_examples_drive_a_real_engine(tmp_path: Path, publisher: ModuleType,
                                            subscriber: ModuleType) -> None:
    url = rabbitmq_url()
    prefix = f"t-{uuid.uuid4().hex[:8]}."
    topology = Topology.prefixed(prefix)
    owner = f"owner-{uuid.uuid4().hex[:8]}"
    key = f"key-{uuid.uuid4().hex[:8]}"
    token = uuid.uuid4().hex
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path / 'actwheel.db'}", broker_url=url,
                             instance=f"examples-{uuid.uuid4().hex[:6]}", grace_s=2.0),
                    topology=topology, queue_prefix=prefix)
    messages = [
        publisher.create_automation(owner, publisher.example_automation("examples test")),
        publisher.request_action(owner, "simple.op", {"op": "log", "message": f"token {token}"},
                                 idempotency_key=key),
    ]
    recorder = Recorder(subscriber.format_lines)
    queue_name = ""
    try:
        await engine.start()
        async with engine.store.transaction() as tx:  # runs are authorised against their owner at dispatch
            await tx.principals.create(NewPrincipal(id=owner, kind=PrincipalKind.USER,
                                                    scopes=("automation:*", "run:read", "action:request")))
            # The examples connect as their own RabbitMQ user: the service principal of the same id.
            await tx.principals.create(NewPrincipal(id=EXAMPLE_USER, kind=PrincipalKind.SERVICE,
                                                    scopes=("automation:*", "action:request"), on_behalf_of=(owner,)))
        example_url = as_user(url, EXAMPLE_USER)
        async with (raw_tap(url, topology.commands, "#") as tap,
                    running_subscriber(subscriber, example_url, prefix, recorder,
                                       (*subscriber.DEFAULT_PATTERNS, "automation.created")) as queue_name):
            await publisher.publish_all(example_url, prefix, messages)

            completed_event, completed = await recorder.wait_for(lambda events: next(
                ((e, entry) for e in events if e.routing_key == "action.completed"
                 for entry in subscriber.entries(e) if token in json.dumps(entry.get("result"))), None))
            run_id = completed["run_id"]
            succeeded_event, succeeded = await recorder.wait_for(lambda events: next(
                ((e, entry) for e in events if e.routing_key == "run.succeeded"
                 for entry in subscriber.entries(e) if entry["run_id"] == run_id), None))
            created = await recorder.wait_for(lambda events: next(
                (e for e in events if e.routing_key == "automation.created"), None))
            await tap.wait_count(2)

        # The subscriber saw the documented (batched) run event for the run the publisher's request made...
        assert (succeeded["status"], succeeded["automation_id"], succeeded["action_type"]) == (
            "SUCCEEDED", None, "simple.op")
        assert (completed["automation_id"], completed["action_type"]) == (None, "simple.op")
        for event, kind in ((succeeded_event, RunsTransitioned), (completed_event, ActionsCompleted)):
            decoded_event = message_from_data(event.envelope["type"], event.data)
            assert isinstance(decoded_event, kind)
            entries = subscriber.entries(event)
            assert event.envelope["correlation_id"] == (entries[0]["run_id"] if len(entries) == 1 else None)
        assert succeeded_event.data["status"] == "SUCCEEDED"
        assert [line for line in recorder.lines if "run.succeeded" in line and f"run={run_id}" in line
                and "status=SUCCEEDED" in line]
        assert [line for line in recorder.lines if "action.completed" in line and f"run={run_id}" in line]
        # ...which is the run of that idempotency key, and the automation belongs to the publisher's owner.
        async with engine.store.transaction() as tx:
            runs = await tx.runs.query(owner_id=owner)
            automation = await tx.automations.get(created.data["automation_id"])
        requests = [r for r in runs if r.origin is Origin.REQUEST]
        assert [(r.id, r.dedupe_key, r.status) for r in requests] == [
            (run_id, f"request:{owner}:{key}", RunStatus.SUCCEEDED)]
        assert (automation.owner_id, automation.name, automation.action_type) == (
            owner, "examples test", "simple.op")
        assert automation.labels["agent_id"] == "example-agent"

        # What went over the wire is exactly what actwheel's codec accepts.
        decoded = []
        for raw in tap.messages:
            assert raw.content_type == "application/json"
            assert raw.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
            assert (raw.headers or {}).get("x-schema-version") == 1
            envelope = decode(raw.body)
            decoded.append((raw.routing_key, message_from_data(envelope.type, envelope.data)))
        by_key = dict(decoded)
        assert isinstance(by_key["command.create"], AutomationCommandRequested)
        assert by_key["command.create"].owner_id == owner
        assert isinstance(by_key["action.request"], ActionRequested)
        assert by_key["action.request"].idempotency_key == key
    finally:
        await engine.stop()
        queues = [*_engine_queues(engine, prefix), topology.dead_letters]
        queues += [queue_name] if queue_name else []
        await delete_names(url, queues, [*topology.exchanges, topology.dlx])
