"""The router's lane (issue 15, the sentinel): a small ``run.ready`` — one quiet automation's instant, a run
now — starts on slots of its own while a burst holds every shared slot, instead of queueing behind it.
Embedded stack, virtual time: the burst's runs wait on the clock, which the test does not move."""

from __future__ import annotations

from datetime import UTC, timedelta

from engine_harness import Stack
from procs import eventually

from actwheel.actors.router import LANE_RUNS
from actwheel.actors.ticker import WheelTicker
from actwheel.service import Caller
from actwheel.storage.records import RunStatus

ALICE = Caller("alice")
SLOW = {"type": "simple.op", "config": {"op": "delay", "seconds": 600}}
QUICK = {"type": "simple.op", "config": {"op": "log", "message": "on time"}}


async def test_a_single_run_starts_while_a_burst_holds_every_shared_slot(embedded: Stack) -> None:
    engine = embedded.engine(router_concurrency=2)
    async with engine, embedded.watch(engine) as log:
        at = (embedded.clock.now() + timedelta(seconds=2)).astimezone(UTC).replace(microsecond=0)
        once = {"type": "once", "at": at.isoformat()}
        burst = [await engine.service.create(ALICE, {"name": f"slow{i}", "trigger": once, "action": SLOW})
                 for i in range(LANE_RUNS + 2)]
        quick = await engine.service.create(ALICE, {"name": "quick", "action": QUICK,
                                                    "trigger": {"type": "event", "routing_key": "x.y"}})
        ticker = engine.actors["ticker"]
        assert isinstance(ticker, WheelTicker)

        async def loaded() -> bool:  # every timer loaded: the burst is one announcement, one run.ready
            return ticker.wheel_size >= len(burst)

        await eventually(loaded, within=15, every=0.01, what="every burst timer in the wheel")
        await embedded.clock.advance_and_settle(2.0)
        await log.wait_for(lambda lg: any(len(e["run_ids"]) > LANE_RUNS for e in lg.of("run.ready")), within=15)
        run = await engine.service.run_now(ALICE, quick.id)  # one run: the lane
        done = await log.wait_count("run.succeeded", 1, within=15)
        assert [e["run_id"] for e in done] == [run.id]
        async with engine.store.transaction() as tx:
            statuses = [(await tx.runs.query(automation_id=a.id))[0].status.value for a in burst]
        assert statuses.count(RunStatus.RUNNING.value) == 2  # the shared slots: still held by the burst
        assert statuses.count(RunStatus.PENDING.value) == len(burst) - 2  # the rest of the burst waits for them
