"""Pure parts of the bus: the envelope codec, topic matching, topology validation, open_bus, the surface."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest
from aiormq.exceptions import DeliveryError
from hypothesis import given
from hypothesis import strategies as st

import actwheel.bus as bus_module
from actwheel.bus import (
    AmqpBus,
    Delivery,
    Envelope,
    InvalidMessage,
    MemoryBus,
    QueueSpec,
    Retry,
    Topology,
    decode,
    encode,
    open_bus,
)
from actwheel.bus.envelope import new_id
from actwheel.clock import VirtualClock
from actwheel.errors import BusUnavailable, InvalidInput
from actwheel.topics import topic_matches

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


def test_envelope_round_trips_through_the_codec() -> None:
    clock = VirtualClock(T0)
    sent = Envelope.new(type="run.succeeded", data={"run_id": "r1", "n": [1, 2.5, None]}, source="aw/1",
                        correlation_id="c", clock=clock)
    body = encode(sent)
    assert decode(body) == sent
    raw = orjson.loads(body)
    assert raw["occurred_at"] == "2030-01-01T09:00:00Z"
    assert set(raw) == {"id", "type", "occurred_at", "source", "correlation_id", "data"}


def test_envelope_normalises_occurred_at_to_utc_and_refuses_naive_times() -> None:
    shanghai = timezone(timedelta(hours=8))
    env = Envelope(id="x", type="t", occurred_at=datetime(2030, 1, 1, 17, tzinfo=shanghai), source="s")
    assert env.occurred_at == T0
    assert env.occurred_at.tzinfo is UTC
    with pytest.raises(InvalidMessage) as caught:
        Envelope(id="x", type="t", occurred_at=datetime(2030, 1, 1), source="s")
    assert caught.value.field == "occurred_at"


def test_new_ids_are_uuid7_ordered_by_the_clock() -> None:
    clock = VirtualClock(T0)
    first = new_id(clock)
    clock.advance(0.002)
    second = new_id(clock)
    assert re.fullmatch(r"[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}", first)
    assert first < second
    assert int(first[:12], 16) == int(T0.timestamp() * 1000)


_GOOD = {"id": "x", "type": "t", "occurred_at": "2030-01-01T00:00:00Z", "source": "s", "data": {}}


def _body(**changes: object) -> bytes:
    fields = {**_GOOD, **changes}
    return orjson.dumps({k: v for k, v in fields.items() if v is not _DROP})


_DROP = object()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"nope", "body"),
        (b"[]", "body"),
        (_body(occurred_at=_DROP), "occurred_at"),
        (_body(occurred_at="2030-01-01T00:00:00"), "occurred_at"),
        (_body(occurred_at="yesterday"), "occurred_at"),
        (_body(id=""), "id"),
        (_body(type="a..b"), "type"),
        (_body(data=[]), "data"),
        (_body(data=_DROP), "data"),
        (_body(source=3), "source"),
        (_body(correlation_id=7), "correlation_id"),
    ],
)
def test_decode_names_the_bad_field(body: bytes, field: str) -> None:
    with pytest.raises(InvalidMessage) as caught:
        decode(body)
    assert caught.value.field == field


def test_decode_refuses_oversized_bodies_before_parsing() -> None:
    with pytest.raises(InvalidMessage) as caught:
        decode(b" " * 101, max_bytes=100)
    assert (caught.value.field, caught.value.value) == ("body.size", 101)


def test_decode_ignores_unknown_top_level_keys() -> None:
    body = b'{"id": "x", "type": "t", "occurred_at": "2030-01-01T00:00:00+08:00", "source": "s", ' \
           b'"data": {}, "extra": 1}'
    assert decode(body).occurred_at == datetime(2029, 12, 31, 16, tzinfo=UTC)


def test_encode_refuses_data_json_cannot_carry() -> None:
    env = Envelope(id="x", type="t", occurred_at=T0, source="s", data={"x": object()})
    with pytest.raises(InvalidMessage) as caught:
        encode(env)
    assert caught.value.field == "data"


# -- topic matching: against a brute-force reference ---------------------------------------------

def _reference(pattern: list[str], key: list[str]) -> bool:
    if not pattern:
        return not key
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(_reference(rest, key[i:]) for i in range(len(key) + 1))
    return bool(key) and head in ("*", key[0]) and _reference(rest, key[1:])


_WORDS = st.sampled_from(["a", "b", "", "xy"])


@given(st.lists(st.one_of(_WORDS, st.sampled_from(["*", "#"])), max_size=6), st.lists(_WORDS, max_size=6))
def test_topic_matching_agrees_with_the_definition(pattern: list[str], key: list[str]) -> None:
    pattern_text, key_text = ".".join(pattern), ".".join(key)
    # "" is zero words for both, so a list holding one empty word is not representable
    if pattern == [""] or key == [""]:
        return
    assert topic_matches(pattern_text, key_text) == _reference(pattern, key)


def test_many_hashes_against_a_long_key_stay_linear() -> None:
    pattern = ".".join(["#"] * 40 + ["z"])
    key = ".".join(["a"] * 200)
    assert topic_matches(pattern, key) is False
    assert topic_matches(pattern, key + ".z") is True


# -- topology and open_bus ------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "amq.x"}, "queue.name"),
        ({"name": "has space"}, "queue.name"),
        ({"name": "q", "bindings": (("actwheel.events",),)}, "queue.bindings[0]"),
        ({"name": "q", "bindings": (("bad exchange", "a"),)}, "queue.bindings[0].exchange"),
        ({"name": "q", "bindings": (("actwheel.events", "x" * 300),)}, "queue.bindings[0].pattern"),
        ({"name": "q", "delivery_limit": -1}, "queue.delivery_limit"),
        ({"name": "q", "max_length": 0}, "queue.max_length"),
    ],
)
def test_queue_spec_refuses_bad_input_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        QueueSpec(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_prefixed_topology_prefixes_every_name() -> None:
    topology = Topology.prefixed("t1.")
    assert topology.exchanges == ("t1.actwheel.events", "t1.actwheel.commands", "t1.actwheel.cdc")
    assert (topology.dlx, topology.dead_letters) == ("t1.actwheel.dlx", "t1.actwheel.dead-letters")


def test_open_bus_picks_the_adapter_and_names_the_broker_on_bad_urls() -> None:
    assert isinstance(open_bus(None), MemoryBus)
    assert isinstance(open_bus("memory://"), MemoryBus)
    amqp = open_bus("amqp://user:s3cret@localhost:5672/")
    assert isinstance(amqp, AmqpBus)
    assert "s3cret" not in repr(amqp)
    with pytest.raises(InvalidInput) as caught:
        open_bus("kafka://user:s3cret@host:9092")
    assert caught.value.field == "broker"
    assert "s3cret" not in str(caught.value)


def test_public_surface() -> None:
    assert sorted(bus_module.__all__) == sorted(set(bus_module.__all__))
    for name in bus_module.__all__:
        assert hasattr(bus_module, name), name


async def test_an_unreachable_broker_is_bus_unavailable_without_the_password() -> None:
    bus = AmqpBus("amqp://u:s3cret@127.0.0.1:1/", connect_timeout=2)
    with pytest.raises(BusUnavailable) as caught:
        await bus.start()
    assert "s3cret" not in str(caught.value)
    await bus.stop()


async def test_memory_bus_refuses_work_before_start() -> None:
    bus = MemoryBus()
    with pytest.raises(BusUnavailable):
        await bus.publish(bus.topology.events, "a", Envelope.new(type="t", data={}, source="s"))


async def test_retry_delay_waits_on_the_injected_clock() -> None:
    clock = VirtualClock(T0)
    bus = MemoryBus(clock=clock)
    await bus.start()
    await bus.declare_queue(QueueSpec("delayed", ((bus.topology.events, "d"),)))
    seen: list[int] = []
    second = asyncio.Event()

    first = asyncio.Event()

    async def later(delivery: Delivery) -> None:
        seen.append(delivery.delivery_count)
        if delivery.delivery_count == 1:
            first.set()
            raise Retry(delay=30)
        second.set()

    await bus.consume("delayed", later, prefetch=1)
    await bus.publish(bus.topology.events, "d", Envelope.new(type="t", data={}, source="s"))
    async with asyncio.timeout(5):
        await first.wait()
    await clock.advance_and_settle(0)  # the handler's task parks on the clock
    assert clock.sleepers == 1
    assert seen == [1]
    await clock.advance_and_settle(29)
    assert seen == [1], "not before the delay"
    clock.advance(1)
    async with asyncio.timeout(5):
        await second.wait()
    assert seen == [1, 2]
    await bus.stop()


# --- the AMQP heartbeat -------------------------------------------------------------------------

def test_the_heartbeat_goes_into_the_url_query_as_whole_seconds_where_aiormq_reads_it() -> None:
    from actwheel.bus.amqp import with_heartbeat

    assert with_heartbeat("amqp://u:p%40ss@h:5672/v%2Fx", 10.0) == "amqp://u:p%40ss@h:5672/v%2Fx?heartbeat=10"
    assert with_heartbeat("amqp://u:p@h/?name=a", 15) == "amqp://u:p@h/?name=a&heartbeat=15"
    assert with_heartbeat("amqp://u:p@h/?heartbeat=30", 10) == "amqp://u:p@h/?heartbeat=30"  # the URL's wins
    assert with_heartbeat("amqp://u:p@h/", 0) == "amqp://u:p@h/?heartbeat=0"  # off, explicitly


@pytest.mark.parametrize("seconds", [-1.0, 65535.0, float("nan"), float("inf")])
def test_a_heartbeat_out_of_range_is_refused_naming_the_field(seconds: float) -> None:
    from actwheel.bus.amqp import with_heartbeat

    with pytest.raises(InvalidInput) as caught:
        with_heartbeat("amqp://u:p@h/", seconds)
    assert caught.value.field == "heartbeat_s"


def test_the_bus_connects_with_the_heartbeat_of_the_setting_and_aiormq_parses_it() -> None:
    from aiormq.connection import parse_heartbeat
    from yarl import URL

    from actwheel.settings import Settings

    settings = Settings.from_env({"ACTWHEEL_AMQP_HEARTBEAT_S": "12"})
    assert settings.amqp_heartbeat_s == 12.0
    assert Settings.from_env({}).amqp_heartbeat_s == 10.0
    bus = bus_module.open_bus("amqp://u:p@h/", heartbeat_s=settings.amqp_heartbeat_s)
    assert isinstance(bus, bus_module.AmqpBus)
    assert parse_heartbeat(URL(bus._connect_url).query["heartbeat"]) == 12
    assert isinstance(bus_module.open_bus("memory://", heartbeat_s=12), bus_module.MemoryBus)  # ignored there
    with pytest.raises(InvalidInput) as caught:
        Settings.from_env({"ACTWHEEL_AMQP_HEARTBEAT_S": "2.5"})
    assert caught.value.field == "amqp_heartbeat_s"


class _FlakyChannel:
    """An aiormq channel stand-in whose first write of each body ends as ``first`` says, then confirms."""

    def __init__(self, first: BaseException) -> None:
        self.first = first
        self.writes: list[bytes] = []

    async def basic_publish(self, body: bytes, **_: object) -> None:
        self.writes.append(body)
        if self.writes.count(body) == 1:
            raise self.first


@pytest.mark.parametrize(("first", "resent"), [
    (ConnectionResetError(104, "Connection reset by peer"), True),  # the link dropped under the write
    (asyncio.CancelledError(), True),  # its confirm future, cancelled as the connection closed
    (DeliveryError(None, None), False),  # a nack is an answer
])
async def test_a_frame_whose_link_dropped_is_written_again_and_an_answer_is_not(
        first: BaseException, resent: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from actwheel.bus import amqp

    monkeypatch.setattr(amqp, "_RESEND_PAUSE_S", 0.0)
    bus = amqp.AmqpBus("amqp://guest:guest@127.0.0.1:1/")  # never started: only the write loop is driven
    channel = _FlakyChannel(first)

    async def writable() -> _FlakyChannel:
        return channel

    monkeypatch.setattr(bus, "_writable_channel", writable)
    frames = [("a.b", b"one", None), ("a.b", b"two", None)]
    outcomes = await bus._write_until_confirmed("actwheel.events", frames, True)
    assert channel.writes == ([b"one", b"two", b"one", b"two"] if resent else [b"one", b"two"])
    assert outcomes == ([None, None] if resent else [first, first])
