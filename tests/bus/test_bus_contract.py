"""One contract, every adapter: each test runs on the memory bus and on RabbitMQ."""

from __future__ import annotations

import asyncio
import contextlib

import orjson
import pytest
from bus_harness import Collector, DeadLetters, Harness, envelope, unique_envelopes

from actwheel.bus import Delivery, Envelope, InvalidMessage, PublishRefused, Reject, Retry, Unroutable
from actwheel.errors import InvalidInput

# pattern -> routing keys it must receive, worked out by hand from the AMQP rules
ROUTING_TABLE: dict[str, set[str]] = {
    "a.*": {"a.b"},
    "a.#": {"a", "a.b", "a.x.b", "a.x.y.b", "a.b.c", "a..b"},
    "#": {"", "a", "b", "a.b", "a.x.b", "a.x.y.b", "a.b.c", "x.b", "a..b"},
    "*": {"a", "b"},
    "a.#.b": {"a.b", "a.x.b", "a.x.y.b", "a..b"},
    "a.*.b": {"a.x.b", "a..b"},
    "#.b": {"b", "a.b", "a.x.b", "a.x.y.b", "x.b", "a..b"},
    "a.b.#": {"a.b", "a.b.c"},
    "*.*": {"a.b", "x.b"},
    "#.#.b.#": {"b", "a.b", "a.x.b", "a.x.y.b", "x.b", "a..b", "a.b.c"},
}
KEYS = ["", "a", "b", "a.b", "a.x.b", "a.x.y.b", "a.b.c", "x.b", "a..b"]
END_KEY = "zz-end"


async def test_topic_routing_follows_amqp_rules(harness: Harness) -> None:
    queues: dict[str, str] = {}
    for i, pattern in enumerate(ROUTING_TABLE):
        bindings = ((harness.events, pattern), (harness.events, END_KEY))
        queues[pattern] = await harness.queue(f"route{i}", *bindings)
    got: dict[str, list[str]] = {pattern: [] for pattern in ROUTING_TABLE}
    ended = {pattern: asyncio.Event() for pattern in ROUTING_TABLE}
    for pattern, queue in queues.items():
        await harness.bus.consume(queue, _recorder(got[pattern], ended[pattern]), prefetch=50)

    for key in KEYS:
        await harness.bus.publish(harness.events, key, envelope(key=key), mandatory=False)
    await harness.bus.publish(harness.events, END_KEY, envelope())  # queues are FIFO: this comes last
    async with asyncio.timeout(15):
        await asyncio.gather(*(event.wait() for event in ended.values()))

    assert {pattern: set(keys) for pattern, keys in got.items()} == ROUTING_TABLE
    assert all(len(keys) == len(set(keys)) for keys in got.values()), "one copy per queue"


def _recorder(sink: list[str], ended: asyncio.Event):  # type: ignore[no-untyped-def]
    async def handle(delivery: Delivery) -> None:
        if delivery.routing_key == END_KEY:
            ended.set()
        else:
            sink.append(delivery.routing_key)

    return handle


async def test_publish_consume_round_trip_preserves_the_envelope(harness: Harness) -> None:
    queue = await harness.queue("rt", (harness.events, "order.*"))
    collector = Collector()
    sub = await harness.bus.consume(queue, collector, prefetch=5)
    assert sub.ready.is_set()
    sent = Envelope.new(type="order.created", data={"id": 7, "items": [1, 2], "note": "ü"}, source="shop",
                        correlation_id="corr-1")
    await harness.bus.publish(harness.events, "order.created", sent, headers={"x-tenant": "acme"})

    [delivery] = await collector.wait_for(1)
    assert delivery.envelope == sent
    assert delivery.routing_key == "order.created"
    assert delivery.exchange == harness.events
    assert delivery.queue == queue
    assert (delivery.redelivered, delivery.delivery_count) == (False, 1)
    assert delivery.headers["x-tenant"] == "acme"
    assert delivery.headers["x-schema-version"] == 1
    assert harness.bus.stats.published == 1


async def test_ack_after_success_means_no_redelivery(harness: Harness) -> None:
    queue = await harness.queue("ack", (harness.events, "a.#"))
    first = Collector()
    sub = await harness.bus.consume(queue, first, prefetch=5)
    await harness.bus.publish_many(harness.events, [("a.1", e) for e in unique_envelopes(3)])
    await first.wait_for(3)
    await sub.cancel(grace=5)  # drains: the three acks are settled

    second = Collector()
    await harness.bus.consume(queue, second, prefetch=5)
    marker = envelope()
    await harness.bus.publish(harness.events, "a.marker", marker)
    await second.wait_for(1)
    assert second.ids() == [marker.id], "acked messages never come back"
    assert harness.bus.stats.acked >= 3


async def test_retry_redelivers_with_a_rising_delivery_count(harness: Harness) -> None:
    queue = await harness.queue("retry", (harness.events, "job.*"), delivery_limit=5)

    async def fail_twice(delivery: Delivery) -> None:
        if delivery.delivery_count < 3:
            raise Retry()

    collector = Collector(fail_twice)
    await harness.bus.consume(queue, collector, prefetch=1)
    await harness.bus.publish(harness.events, "job.run", envelope())
    deliveries = await collector.wait_for(3)

    assert [d.delivery_count for d in deliveries] == [1, 2, 3]
    assert [d.redelivered for d in deliveries] == [False, True, True]
    assert len({d.envelope.id for d in deliveries}) == 1


async def test_a_failing_handler_does_not_kill_the_consumer(harness: Harness) -> None:
    queue = await harness.queue("boom", (harness.events, "boom.*"), delivery_limit=1)

    async def explode_on_first(delivery: Delivery) -> None:
        if delivery.envelope.data.get("explode") and delivery.delivery_count == 1:
            raise RuntimeError("handler bug")

    collector = Collector(explode_on_first)
    await harness.bus.consume(queue, collector, prefetch=1)
    await harness.bus.publish(harness.events, "boom.1", envelope(explode=True))
    await harness.bus.publish(harness.events, "boom.2", envelope(explode=False))
    deliveries = await collector.wait_for(3)
    assert sorted((d.routing_key, d.delivery_count) for d in deliveries) == [
        ("boom.1", 1), ("boom.1", 2), ("boom.2", 1)]


async def test_delivery_limit_dead_letters_with_the_broker_reason(harness: Harness) -> None:
    queue = await harness.queue("limit", (harness.events, "poison.#"), delivery_limit=2)

    async def always_fail(delivery: Delivery) -> None:
        raise RuntimeError("cannot process")

    collector = Collector(always_fail)
    dead = DeadLetters()
    await harness.bus.consume(queue, collector, prefetch=1)
    await harness.bus.consume_dead_letters(dead, prefetch=10)
    poison = envelope("poison.pill", n=1)
    await harness.bus.publish(harness.events, "poison.pill", poison)

    [letter] = await dead.wait_for(1)
    assert [d.delivery_count for d in collector.deliveries] == [1, 2, 3], "limit 2 = at most 3 deliveries"
    assert letter.reason == "delivery_limit"
    assert letter.queue == queue
    assert letter.routing_key == "poison.pill"
    assert letter.envelope == poison
    assert harness.bus.stats.dead_lettered["delivery_limit"] == 1


@pytest.mark.parametrize(
    ("error", "reason", "detail"),
    [(Reject("customer 42 is unknown"), "rejected", "customer 42 is unknown"),
     (InvalidMessage("data.x", 3, "a string"), "invalid_message", "data.x=3: expected a string")],
)
async def test_reject_dead_letters_at_once_with_the_reason(
    harness: Harness, error: Exception, reason: str, detail: str
) -> None:
    queue = await harness.queue("reject", (harness.events, "r.*"))

    async def refuse(delivery: Delivery) -> None:
        raise error

    collector = Collector(refuse)
    dead = DeadLetters()
    await harness.bus.consume(queue, collector, prefetch=1)
    await harness.bus.consume_dead_letters(dead, prefetch=10)
    sent = envelope("r.x")
    await harness.bus.publish(harness.events, "r.x", sent)

    [letter] = await dead.wait_for(1)
    assert len(collector.deliveries) == 1, "no redelivery before dead-lettering"
    assert (letter.reason, letter.detail, letter.queue, letter.routing_key) == (reason, detail, queue, "r.x")
    assert letter.headers["x-actwheel-reason"] == reason
    assert letter.envelope == sent
    # The consumer counts the letter once the broker confirms it, and the broker may hand it to the
    # dead-letter consumer first: wait for the count (bounded), not for an arbitrary delay.
    await _counted(harness, reason)
    assert harness.bus.stats.dead_lettered[reason] == 1


async def _counted(harness: Harness, reason: str, within_s: float = 5.0) -> None:
    """Until the bus has counted a letter for ``reason`` (bounded; the loop yields between looks)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        if harness.bus.stats.dead_lettered[reason] or loop.time() >= deadline:
            return
        await asyncio.sleep(0.005)


async def test_undecodable_bodies_are_dead_lettered_and_traffic_flows(harness: Harness) -> None:
    queue = await harness.queue("raw", (harness.events, "in.*"))
    collector = Collector()
    dead = DeadLetters()
    await harness.bus.consume(queue, collector, prefetch=4)
    await harness.bus.consume_dead_letters(dead, prefetch=10)

    good = envelope("in.good")
    valid_body = orjson.dumps({"id": "x1", "type": "in.big", "occurred_at": "2030-01-01T00:00:00Z",
                               "source": "t", "correlation_id": None, "data": {"pad": "x" * 70_000}})
    await harness.bus.publish_raw(harness.events, "in.junk", b"{not json")
    await harness.bus.publish_raw(harness.events, "in.list", b"[1, 2]")
    await harness.bus.publish_raw(harness.events, "in.nodata", b'{"id": "x", "type": "t"}')
    await harness.bus.publish_raw(harness.events, "in.big", valid_body)
    await harness.bus.publish_raw(harness.events, "in.v2", b"{}", headers={"x-schema-version": 2})
    await harness.bus.publish(harness.events, "in.good", good)

    letters = await dead.wait_for(5)
    await collector.wait_for(1)
    assert collector.ids() == [good.id]
    assert sorted((x.routing_key, x.reason) for x in letters) == [
        ("in.big", "oversized"), ("in.junk", "malformed"), ("in.list", "malformed"),
        ("in.nodata", "malformed"), ("in.v2", "unsupported_schema")]
    junk = next(x for x in letters if x.routing_key == "in.junk")
    assert junk.body == b"{not json"
    assert junk.envelope is None
    assert "body" in junk.detail
    assert harness.bus.stats.dead_lettered["malformed"] == 3


async def test_mandatory_unroutable_raises(harness: Harness) -> None:
    await harness.queue("some", (harness.events, "known.*"))
    with pytest.raises(Unroutable) as caught:
        await harness.bus.publish(harness.events, "nobody.listens", envelope())
    assert (caught.value.exchange, caught.value.routing_key) == (harness.events, "nobody.listens")
    await harness.bus.publish(harness.events, "nobody.listens", envelope(), mandatory=False)
    with pytest.raises(Unroutable):
        await harness.bus.publish_many(harness.events, [("known.x", envelope()), ("nobody.x", envelope())])


async def test_publish_many_carries_each_items_headers(harness: Harness) -> None:
    queue = await harness.queue("many-headers", (harness.events, "h.*"))
    collector = Collector()
    await harness.bus.consume(queue, collector, prefetch=10)
    sent = unique_envelopes(3)
    await harness.bus.publish_many(harness.events, [("h.x", e) for e in sent],
                                   headers=[{"x-actwheel-audited": True}, None, {"x-n": 2}])
    deliveries = await collector.wait_for(3)
    by_id = {d.envelope.id: d.headers for d in deliveries}
    assert by_id[sent[0].id]["x-actwheel-audited"] is True  # a boolean stays a boolean through the broker
    assert "x-actwheel-audited" not in by_id[sent[1].id]
    assert by_id[sent[2].id]["x-n"] == 2
    assert all(h["x-schema-version"] == 1 for h in by_id.values())
    with pytest.raises(InvalidInput) as short:
        await harness.bus.publish_many(harness.events, [("h.y", e) for e in unique_envelopes(2)], headers=[None])
    assert short.value.field == "headers"
    marker = envelope()
    await harness.bus.publish(harness.events, "h.marker", marker)
    after = await collector.wait_for(4)
    assert [d.envelope.id for d in after[3:]] == [marker.id]  # a FIFO queue: nothing of the refused call came


async def test_bad_publish_arguments_are_refused_naming_the_field(harness: Harness) -> None:
    with pytest.raises(InvalidInput) as caught:
        await harness.bus.publish("actwheel.nope", "a", envelope())
    assert caught.value.field == "exchange"
    with pytest.raises(InvalidMessage) as too_big:
        await harness.bus.publish(harness.events, "a", envelope(pad="x" * 70_000))
    assert too_big.value.field == "body.size"
    with pytest.raises(InvalidInput) as bad_header:
        await harness.bus.publish(harness.events, "a", envelope(), headers={"x-obj": {"a": 1}})
    assert bad_header.value.field == "headers.x-obj"
    with pytest.raises(InvalidInput) as no_queue:
        await harness.bus.consume(harness.name("never-declared"), Collector(), prefetch=1)
    assert no_queue.value.field == "queue"
    with pytest.raises(InvalidInput) as prefetch:
        await harness.bus.consume(harness.name("x"), Collector(), prefetch=0)
    assert prefetch.value.field == "prefetch"


async def test_redeclaring_a_queue_with_other_arguments_is_refused(harness: Harness) -> None:
    await harness.queue("same", (harness.events, "s.*"), delivery_limit=3)
    await harness.queue("same", (harness.events, "s.*"), delivery_limit=3)  # idempotent
    with pytest.raises(InvalidInput) as caught:
        await harness.queue("same", (harness.events, "s.*"), delivery_limit=4)
    assert caught.value.field == "queue"
    await harness.bus.publish(harness.events, "s.ok", envelope())  # the bus still works


async def test_a_full_queue_refuses_publishes(harness: Harness) -> None:
    await harness.queue("full", (harness.events, "f.*"), max_length=2)
    await harness.bus.publish(harness.events, "f.1", envelope())
    await harness.bus.publish(harness.events, "f.2", envelope())
    with contextlib.suppress(PublishRefused):  # RabbitMQ's quorum queues take one past the limit
        await harness.bus.publish(harness.events, "f.3", envelope())
    with pytest.raises(PublishRefused):
        await harness.bus.publish(harness.events, "f.4", envelope())


async def test_prefetch_bounds_deliveries_in_flight(harness: Harness) -> None:
    queue = await harness.queue("prefetch", (harness.events, "p.*"))
    gate = asyncio.Event()
    in_flight = 0
    peak = 0
    three_in = asyncio.Event()

    async def hold(delivery: Delivery) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 3:
            three_in.set()
        await gate.wait()
        in_flight -= 1

    collector = Collector(hold)
    await harness.bus.consume(queue, collector, prefetch=3)
    await harness.bus.publish_many(harness.events, [("p.x", e) for e in unique_envelopes(12)])
    async with asyncio.timeout(15):
        await three_in.wait()
    # A round trip through the broker: anything beyond the prefetch would have been pushed by now.
    await harness.bus.publish(harness.events, "p.x", envelope())
    assert len(collector.deliveries) == 3
    gate.set()
    await collector.wait_for(13)
    assert peak == 3


async def test_cancelled_consumer_hands_unacked_messages_to_another(harness: Harness) -> None:
    queue = await harness.queue("handover", (harness.events, "h.*"))
    started = asyncio.Event()

    async def hang(delivery: Delivery) -> None:
        started.set()
        await asyncio.Event().wait()  # never finishes on its own

    stuck = Collector(hang)
    first = await harness.bus.consume(queue, stuck, prefetch=1)
    sent = envelope("h.x")
    await harness.bus.publish(harness.events, "h.x", sent)
    async with asyncio.timeout(15):
        await started.wait()

    taker = Collector()
    await harness.bus.consume(queue, taker, prefetch=1)
    await first.cancel(grace=0)
    [delivery] = await taker.wait_for(1)
    assert delivery.envelope == sent
    assert delivery.redelivered is True
    assert delivery.delivery_count == 2
    assert first.cancelled


async def test_publish_many_keeps_order(harness: Harness) -> None:
    queue = await harness.queue("order", (harness.events, "o.#"))
    collector = Collector()
    await harness.bus.consume(queue, collector, prefetch=1)
    batch = unique_envelopes(200)
    await harness.bus.publish_many(harness.events, [(f"o.{i % 7}", e) for i, e in enumerate(batch)])
    await collector.wait_for(200)
    assert collector.ids() == [e.id for e in batch]
    assert harness.bus.stats.published == 200


async def test_stop_drains_in_flight_handlers_then_is_idempotent(harness: Harness) -> None:
    queue = await harness.queue("drain", (harness.events, "d.*"))
    finished: list[str] = []
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow(delivery: Delivery) -> None:
        started.set()
        await release.wait()
        finished.append(delivery.envelope.id)

    await harness.bus.consume(queue, Collector(slow), prefetch=1)
    sent = envelope()
    await harness.bus.publish(harness.events, "d.x", sent)
    async with asyncio.timeout(15):
        await started.wait()
    stopping = asyncio.ensure_future(harness.bus.stop(grace=10))
    asyncio.get_running_loop().call_soon(release.set)  # after stop() has begun
    async with asyncio.timeout(15):
        await stopping
    assert finished == [sent.id], "the in-flight handler finished within the grace period"
    await harness.bus.stop()
    assert harness.bus.stats.acked == 1
