"""The router writes the lifecycle rows of its own finishes (issue 15): in the finish transaction, with the
ids, actor, time and details the auditor would give them, and marks those messages so that the auditor
acknowledges them without writing. On both stacks: the mark must survive the relay and the broker.

What must not change is the trail: one LIFECYCLE row and one ACTION row per succeeded run, keyed
``<envelope id>:<run id>`` by the message on the bus."""

from __future__ import annotations

from datetime import UTC, timedelta

from engine_harness import Stack, pass_time
from procs import eventually

from actwheel.actors.audit_rows import AUDITED_HEADER
from actwheel.actors.auditor import Auditor
from actwheel.service import Caller

ALICE = Caller("alice")
ACTION = {"type": "simple.op", "config": {"op": "set_variable", "name": "x", "value": 1}}


async def test_a_finished_run_has_its_lifecycle_rows_once_and_the_auditor_writes_none(stack: Stack) -> None:
    engine = stack.engine()
    async with engine, stack.watch(engine, "run.#", "action.#") as log:
        at = (stack.clock.now() + timedelta(seconds=2)).astimezone(UTC).replace(microsecond=0)
        automation = await engine.service.create(ALICE, {"trigger": {"type": "once", "at": at.isoformat()},
                                                         "action": ACTION})
        await pass_time(stack, 2)
        [succeeded] = await log.wait_count("run.succeeded", 1, within=20)
        await log.wait_count("action.completed", 1, within=20)
        auditor = engine.actors["auditor"]
        assert isinstance(auditor, Auditor)

        async def acknowledged() -> bool:
            return auditor.pre_audited >= 2  # run.succeeded and action.completed

        await eventually(acknowledged, within=20, every=0.05, what="the auditor to see both marked messages")
        run_id = succeeded["run_id"]
        async with engine.store.transaction() as tx:
            trail = await tx.audit.trail(run_id)
        marked = {d.routing_key: d for d in log.deliveries if d.routing_key in ("run.succeeded", "action.completed")}
        assert all(d.headers.get(AUDITED_HEADER) is True for d in marked.values())
        lifecycle = [e for e in trail if e.phase == "LIFECYCLE"]
        action = [e for e in trail if e.phase == "ACTION"]
        assert [e.event_id for e in lifecycle] == [f"{marked['run.succeeded'].envelope.id}:{run_id}"]
        assert [e.event_id for e in action] == [f"{marked['action.completed'].envelope.id}:{run_id}"]
        assert lifecycle[0].details["status"] == "SUCCEEDED"
        assert lifecycle[0].details["event"] == "run.succeeded"
        assert lifecycle[0].automation_id == automation.id
        assert lifecycle[0].actor == marked["run.succeeded"].envelope.source
        assert lifecycle[0].occurred_at == marked["run.succeeded"].envelope.occurred_at
        assert action[0].details["result"]["data"]["set_variables"] == {"x": 1}
