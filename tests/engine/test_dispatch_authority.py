"""Issue 11, authority at execution time: every run is authorised when it is dispatched, against its owner
as they are *now* (actors/router.py ``authority_of``).

A missing or banned owner's run is SKIPPED(owner_inactive) with a PERMISSION audit row and its executor
is never called; a scheduled, event or retried run acts with the owner's ceiling, a manual run or an ad
hoc request with its requester's snapshot ∩ the owner's ceiling; revoking the key that created an
automation changes nothing.

"Planned but not claimed" is made deterministic by running the engine without its router role: the
planner, the ticker, the relay and the sweeper work as usual, the ``run.ready`` messages wait in the
router's queue, and the test claims with an :class:`ExecutorRouter` of its own (built from the engine's
parts, exactly as the engine builds its own) after changing the owner. One test runs the whole engine,
router role included, to show the live path decides the same way.

Memory bus and a VirtualClock on SQLite and PostgreSQL (which keeps its own clock: the virtual clock
starts at the real now, and nothing here needs the database's time to move).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from engine_harness import Stack
from procs import eventually
from services import isolated_postgres_url

from actwheel.actions.base import ActionContext, ActionDefinition, ActionResult, Idempotency
from actwheel.actors.router import OWNER_INACTIVE, ExecutorRouter
from actwheel.bus import Topology
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import PermissionDenied
from actwheel.messages import ActionRequested
from actwheel.service import Caller
from actwheel.storage.records import AuditEntry, NewPrincipal, NewRun, Origin, PrincipalKind, Run, RunStatus

SCOPE = "notification:send"
OWNER_CEILING = ("automation:read", "automation:write", "action:request", "key:read", "key:write", SCOPE)
ALICE = Caller("alice", frozenset(OWNER_CEILING))
#: Everything but the router: runs are planned and announced, never claimed until the test claims them.
NO_ROUTER = ("ticker", "planner", "recovery", "cdc")


class Spy(ActionDefinition):
    """Records each execution; a config with ``fail_first`` fails retryably on a run's first attempt."""

    type: ClassVar[str] = "test.spy"
    display_name: ClassVar[str] = "Spy"
    description: ClassVar[str] = "records its executions"
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object", "properties": {"fail_first": {"type": "boolean"}}, "additionalProperties": False}
    idempotency: ClassVar[Idempotency] = Idempotency.STRONG
    required_scopes: ClassVar[frozenset[str]] = frozenset({SCOPE})

    def __init__(self) -> None:
        self.executed: list[str] = []

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        self.executed.append(ctx.run_id)
        if config.get("fail_first") and self.executed.count(ctx.run_id) == 1:
            return ActionResult.fail("the first attempt fails", retryable=True, code="flaky")
        return ActionResult.ok("spied")


SPY_ACTION = {"type": Spy.type, "config": {}}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def stack(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stack]:
    clock = VirtualClock(datetime.now(UTC))
    if request.param == "sqlite":
        yield Stack(kind="embedded", clock=clock, database_url=f"sqlite:///{tmp_path / 'actwheel.db'}",
                    broker_url=None, topology=Topology(), prefix="")
        return
    async with isolated_postgres_url() as database:
        yield Stack(kind="embedded", clock=clock, database_url=database, broker_url=None, topology=Topology(),
                    prefix="")


class Harness:
    """An authenticating engine (``auth=True``, the default) with the spy registered and alice a user."""

    def __init__(self, stack: Stack, tmp_path: Path, roles: tuple[str, ...], *, auth: bool = True) -> None:
        self.stack = stack
        self.engine: Engine = stack.engine(roles=roles, auth=auth, admin_key_file=str(tmp_path / "admin.key"))
        self.spy = Spy()
        self.engine.registry.register(self.spy)

    async def __aenter__(self) -> Harness:
        await self.engine.start()
        async with self.engine.store.transaction() as tx:
            await tx.principals.create(NewPrincipal(id="alice", kind=PrincipalKind.USER, scopes=OWNER_CEILING))
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.engine.stop()

    def router(self, concurrency: int = 256) -> ExecutorRouter:
        """A router like the engine's own (same store, pipeline, clock; owners not implicit)."""
        e = self.engine
        return ExecutorRouter(bus=e.bus, store=e.store, pipeline=e.pipeline, actions=e.control.actions,
                              events=e.events, clock=e.clock, metrics=e.metrics, instance=e.settings.instance,
                              lease_s=e.settings.lease_s, concurrency=concurrency,
                              implicit_owners=not e.settings.auth)

    async def dispatch(self, run_ids: Sequence[str], *, concurrency: int = 256) -> list[Run]:
        """Claim ``run_ids`` and wait until every claimed run has finished (committed); the runs after."""
        router = self.router(concurrency)
        claimed = await router.claim_and_start(run_ids)
        assert {r.id for r in claimed} == set(run_ids), "every run was PENDING and claimable"
        await router.drain()  # awaits the runs in flight, then their group-committed finishes
        return [await self.run(run_id) for run_id in run_ids]

    async def run(self, run_id: str) -> Run:
        async with self.engine.store.transaction() as tx:
            return await tx.runs.get(run_id)

    async def trail(self, run_id: str) -> list[AuditEntry]:
        async with self.engine.store.transaction() as tx:
            return await tx.audit.trail(run_id)

    async def ban(self, principal_id: str = "alice") -> None:
        async with self.engine.store.transaction() as tx:
            await tx.principals.ban(principal_id, reason="test", by="admin")

    async def set_ceiling(self, scopes: Sequence[str], principal_id: str = "alice") -> None:
        async with self.engine.store.transaction() as tx:
            await tx.principals.set_scopes(principal_id, scopes)

    async def automation(self, *, policy: Mapping[str, Any] | None = None, trigger: Mapping[str, Any] | None = None,
                         caller: Caller = ALICE, config: Mapping[str, Any] | None = None) -> str:
        """An automation of alice's running the spy; by default it fires only when run by hand."""
        payload: dict[str, Any] = {
            "trigger": trigger or {"type": "once", "at": _iso(self.stack.clock.now() + timedelta(days=30))},
            "action": {"type": Spy.type, "config": dict(config or {})}, "policy": dict(policy or {})}
        return (await self.engine.control.automations.create(caller, payload)).id

    async def runs_of(self, automation_id: str) -> list[Run]:
        async with self.engine.store.transaction() as tx:
            return await tx.runs.query(automation_id=automation_id)


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).replace(microsecond=0).isoformat()


async def assert_owner_inactive(harness: Harness, run: Run) -> None:
    """SKIPPED(owner_inactive), one PERMISSION row refusing it, the executor never called for it."""
    assert (run.status, run.reason) == (RunStatus.SKIPPED, OWNER_INACTIVE)
    assert run.id not in harness.spy.executed
    rows = [e for e in await harness.trail(run.id) if e.phase == "PERMISSION"]
    assert [(e.details["granted"], e.details["reason"], e.details["owner_id"]) for e in rows] == [
        (False, OWNER_INACTIVE, run.owner_id)]
    assert all(e.phase != "EXECUTE" for e in await harness.trail(run.id))


def permission_row(trail: list[AuditEntry]) -> dict[str, Any]:
    [row] = [e.details for e in trail if e.phase == "PERMISSION"]
    return row


# --- 1. a ban after planning, before the claim ----------------------------------------------------------


async def test_a_scheduled_run_of_an_owner_banned_before_its_claim_is_skipped(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        at = stack.clock.now().replace(microsecond=0) + timedelta(seconds=2)
        automation_id = await h.automation(trigger={"type": "once", "at": _iso(at)})

        async def planned() -> list[Run]:
            await stack.clock.advance_and_settle(0.5)  # the wheel fires once the virtual clock reaches ``at``
            return await h.runs_of(automation_id)

        [run] = await eventually(planned, within=10, what="the wheel to fire and the planner to plan")
        assert (run.origin, run.status) == (Origin.SCHEDULE, RunStatus.PENDING)
        await h.ban()
        [done] = await h.dispatch([run.id])
        await assert_owner_inactive(h, done)
        assert h.spy.executed == []


async def test_a_manual_run_of_an_owner_banned_before_its_claim_is_skipped(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        run = await h.engine.control.automations.run_now(ALICE, await h.automation())
        assert run.origin is Origin.MANUAL
        await h.ban()
        [done] = await h.dispatch([run.id])
        await assert_owner_inactive(h, done)
        assert h.spy.executed == []


async def test_an_ad_hoc_request_of_an_owner_banned_before_its_claim_is_skipped(stack: Stack,
                                                                                 tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        inserted = await h.engine.control.actions.submit(ALICE, ActionRequested(
            type=Spy.type, config={}, owner_id="alice", idempotency_key="k-1"))
        assert inserted.run.origin is Origin.REQUEST
        await h.ban()
        [done] = await h.dispatch([inserted.run.id])
        await assert_owner_inactive(h, done)
        assert h.spy.executed == []


async def test_a_retry_of_an_owner_banned_after_the_first_attempt_is_skipped(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        automation_id = await h.automation(config={"fail_first": True}, policy={
            "retry": {"max_attempts": 3, "backoff_initial_s": 0, "jitter": 0}})
        run = await h.engine.control.automations.run_now(ALICE, automation_id)
        [first] = await h.dispatch([run.id])
        assert (first.status, first.attempt) == (RunStatus.RETRY_WAIT, 1)
        assert h.spy.executed == [run.id]
        await h.ban()
        sweep = await h.engine.actors["recovery"].sweep()  # type: ignore[attr-defined]
        assert sweep["retries"] == 1
        assert (await h.run(run.id)).status is RunStatus.PENDING
        [retried] = await h.dispatch([run.id])
        assert retried.attempt == 2
        await assert_owner_inactive_retry(h, retried)
        assert h.spy.executed == [run.id]  # the first attempt only


async def assert_owner_inactive_retry(harness: Harness, run: Run) -> None:
    """The retry's own PERMISSION row refuses it; the first attempt's granted one stays in the trail."""
    assert (run.status, run.reason) == (RunStatus.SKIPPED, OWNER_INACTIVE)
    rows = [e for e in await harness.trail(run.id) if e.phase == "PERMISSION"]
    assert [e.details["granted"] for e in rows] == [True, False]
    assert (rows[1].details["reason"], rows[1].event_id.split(":")[1]) == (OWNER_INACTIVE, "2")



async def test_a_run_recovered_from_an_expired_lease_is_authorised_again(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        run = await h.engine.control.automations.run_now(ALICE, await h.automation())
        async with h.engine.store.transaction() as tx:  # a worker claims it, then dies without finishing
            [claimed] = await tx.runs.claim_many([run.id], "crashed-instance", 0.05)
        assert claimed.attempt == 1
        await h.ban()
        recovery = h.engine.actors["recovery"]

        async def recovered() -> bool:
            await stack.clock.advance_and_settle(1)  # SQLite's clock; PostgreSQL's moves by itself
            await recovery.sweep()  # type: ignore[attr-defined]
            return (await h.run(run.id)).status is RunStatus.PENDING

        await eventually(recovered, within=10, what="recovery to hand the expired run back")
        [retried] = await h.dispatch([run.id])
        assert retried.attempt == 2
        await assert_owner_inactive(h, retried)
        assert (await h.trail(run.id))[0].phase == "RECOVERY"
        assert h.spy.executed == []

# --- 2. a missing owner ---------------------------------------------------------------------------------


async def test_a_run_of_an_owner_without_a_principal_is_skipped(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        ghost = Caller("ghost", frozenset(OWNER_CEILING))
        inserted = await h.engine.control.actions.submit(ghost, ActionRequested(
            type=Spy.type, config={}, owner_id="ghost"))
        manual = await h.engine.control.automations.run_now(ghost, await h.automation(caller=ghost))
        done = await h.dispatch([inserted.run.id, manual.id])
        for run in done:
            await assert_owner_inactive(h, run)
        assert h.spy.executed == []


async def test_the_live_router_skips_a_missing_owner_and_runs_a_present_one(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, ("planner", "router", "cdc")) as h:
        ghost = await h.engine.control.actions.submit(Caller("ghost"), ActionRequested(
            type=Spy.type, config={}, owner_id="ghost"))
        alice = await h.engine.control.actions.submit(ALICE, ActionRequested(
            type=Spy.type, config={}, owner_id="alice"))

        async def finished() -> list[Run]:
            runs = [await h.run(ghost.run.id), await h.run(alice.run.id)]
            return runs if all(r.finished_at is not None for r in runs) else []

        skipped, succeeded = await eventually(finished, within=10, what="both runs to finish")
        await assert_owner_inactive(h, skipped)
        assert succeeded.status is RunStatus.SUCCEEDED
        assert h.spy.executed == [alice.run.id]


# --- 3. revoking the creating key changes nothing -------------------------------------------------------


async def test_revoking_the_key_that_created_an_automation_leaves_it_firing(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        keys = h.engine.control.keys
        minted = await keys.create(ALICE, {"name": "creator", "scopes": list(OWNER_CEILING)})
        with_key = Caller("alice", frozenset(OWNER_CEILING), key_id=minted.key.id)
        automation_id = await h.automation(caller=with_key)
        created = await h.engine.control.automations.get(ALICE, automation_id)
        assert created.created_by_key == minted.key.id
        revoked = await keys.revoke(ALICE, minted.key.id)
        assert revoked.revoked
        run = await h.engine.control.automations.run_now(ALICE, automation_id)
        [done] = await h.dispatch([run.id])
        assert done.status is RunStatus.SUCCEEDED
        assert h.spy.executed == [run.id]


# --- 4. a lowered ceiling -------------------------------------------------------------------------------


async def test_a_lowered_ceiling_fails_the_next_run_and_disabling_still_works(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        at = stack.clock.now().replace(microsecond=0) + timedelta(seconds=2)
        automation_id = await h.automation(trigger={"type": "once", "at": _iso(at)})

        async def planned() -> list[Run]:
            await stack.clock.advance_and_settle(0.5)
            return await h.runs_of(automation_id)

        [run] = await eventually(planned, within=10, what="the wheel to fire and the planner to plan")
        await h.set_ceiling(["automation:read", "automation:write"])
        [done] = await h.dispatch([run.id])
        assert (done.status, done.reason) == (RunStatus.FAILED, "permission")
        assert h.spy.executed == []
        row = permission_row(await h.trail(run.id))
        assert row["granted"] is False
        assert row["required"] == [SCOPE]
        assert SCOPE in row["reason"]
        writer = Caller("alice", frozenset({"automation:write"}))
        disabled, _ = await h.engine.control.automations.set_enabled(writer, automation_id, False)
        assert disabled.enabled is False


async def test_a_restored_ceiling_runs_again(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        automation_id = await h.automation()
        first = await h.engine.control.automations.run_now(ALICE, automation_id)
        second = await h.engine.control.automations.run_now(ALICE, automation_id)
        await h.set_ceiling(["automation:write"])
        [failed] = await h.dispatch([first.id])
        await h.set_ceiling(OWNER_CEILING)
        [succeeded] = await h.dispatch([second.id])
        assert [failed.status, succeeded.status] == [RunStatus.FAILED, RunStatus.SUCCEEDED]
        assert h.spy.executed == [second.id]


# --- 5. manual runs and requests: snapshot ∩ ceiling ----------------------------------------------------


async def test_a_manual_run_needs_the_requester_to_hold_the_scope(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        automation_id = await h.automation()
        lacking = Caller("alice", frozenset({"automation:read", "automation:write"}))
        with pytest.raises(PermissionDenied):  # the front door refuses it first
            await h.engine.control.automations.run_now(lacking, automation_id)
        # Whatever reaches the router with a snapshot lacking the scope is refused there too.
        without = await _manual_run(h, automation_id, snapshot=["automation:write"], key="without")
        with_scope = await h.engine.control.automations.run_now(ALICE, automation_id)
        failed, succeeded = await h.dispatch([without.id, with_scope.id])
        assert (failed.status, failed.reason) == (RunStatus.FAILED, "permission")
        assert SCOPE in permission_row(await h.trail(failed.id))["reason"]
        assert succeeded.status is RunStatus.SUCCEEDED
        assert h.spy.executed == [with_scope.id]


async def test_a_published_request_runs_with_its_snapshot_within_the_ceiling(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        actions = h.engine.control.actions

        def request(key: str, scopes: tuple[str, ...]) -> ActionRequested:
            return ActionRequested(type=Spy.type, config={}, owner_id="alice", idempotency_key=key, scopes=scopes)

        lacking = await actions.submit_published(request("lacking", ("action:request",)))
        holding = await actions.submit_published(request("holding", ("action:request", SCOPE)))
        done = await h.dispatch([lacking.run.id, holding.run.id])
        assert [(r.status, r.reason) for r in done] == [(RunStatus.FAILED, "permission"), (RunStatus.SUCCEEDED, None)]
        assert h.spy.executed == [holding.run.id]
        # The other side of the intersection: the snapshot holds the scope, the ceiling no longer does.
        later = await actions.submit_published(request("later", ("action:request", SCOPE)))
        await h.set_ceiling(["action:request"])
        [refused] = await h.dispatch([later.run.id])
        assert (refused.status, refused.reason) == (RunStatus.FAILED, "permission")
        assert h.spy.executed == [holding.run.id]


async def _manual_run(h: Harness, automation_id: str, *, snapshot: list[str], key: str) -> Run:
    """A MANUAL run as one asked by a requester holding ``snapshot`` would be stored, announced nowhere."""
    async with h.engine.store.transaction() as tx:
        automation = await tx.automations.get(automation_id)
        inserted = await tx.runs.insert(NewRun(
            automation_id=automation_id, dedupe_key=f"manual:{key}", owner_id="alice",
            action_type=automation.action_type, action_config=automation.action_config, policy=automation.policy,
            origin=Origin.MANUAL, scheduled_for=await tx.now(),
            context={"$owner": {"id": "alice", "scopes": snapshot}}))
    return inserted.run



async def test_implicit_owners_have_every_scope_as_ceiling_not_beyond_the_snapshot(stack: Stack,
                                                                                 tmp_path: Path) -> None:
    """``--insecure-no-auth``: an owner without a principal row has every scope as ceiling, so a request
    runs with what it declared (snapshot ∩ everything), no more."""
    async with Harness(stack, tmp_path, NO_ROUTER, auth=False) as h:
        actions = h.engine.control.actions

        def request(key: str, scopes: tuple[str, ...]) -> ActionRequested:
            return ActionRequested(type=Spy.type, config={}, owner_id="local", idempotency_key=key, scopes=scopes)

        lacking = await actions.submit_published(request("lacking", ("action:request",)))
        holding = await actions.submit_published(request("holding", ("action:request", SCOPE)))
        done = await h.dispatch([lacking.run.id, holding.run.id])
        assert [(r.status, r.reason) for r in done] == [(RunStatus.FAILED, "permission"), (RunStatus.SUCCEEDED, None)]
        assert h.spy.executed == [holding.run.id]

# --- 6. owners read once per claimed batch --------------------------------------------------------------


async def test_owners_are_read_once_per_batch_and_a_ban_bites_on_the_next(stack: Stack, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        async with h.engine.store.transaction() as tx:
            await tx.principals.create(NewPrincipal(id="bob", kind=PrincipalKind.USER, scopes=OWNER_CEILING))
            repository = type(tx.principals)
        reads: list[list[str]] = []
        original = repository.get_many

        async def counted(self: Any, principal_ids: Sequence[str]) -> Any:
            reads.append(list(principal_ids))
            return await original(self, principal_ids)

        monkeypatch.setattr(repository, "get_many", counted)
        actions = h.engine.control.actions

        async def submitted(owner: str, key: str) -> str:
            caller = Caller(owner, frozenset(OWNER_CEILING))
            return (await actions.submit(caller, ActionRequested(
                type=Spy.type, config={}, owner_id=owner, idempotency_key=key))).run.id

        batch_1 = [await submitted(owner, f"{owner}-{i}") for owner in ("alice", "bob") for i in range(2)]
        batch_2 = [await submitted(owner, f"{owner}-{i}") for owner in ("alice", "bob") for i in range(2, 4)]
        reads.clear()
        first = await h.dispatch(batch_1, concurrency=8)  # one chunk of 4
        assert reads == [["alice", "bob"]]
        assert {r.status for r in first} == {RunStatus.SUCCEEDED}
        await h.ban("alice")
        second = await h.dispatch(batch_2, concurrency=8)
        assert reads == [["alice", "bob"], ["alice", "bob"]]
        by_owner = {(r.owner_id, r.status) for r in second}
        assert by_owner == {("alice", RunStatus.SKIPPED), ("bob", RunStatus.SUCCEEDED)}
        for run in second:
            if run.owner_id == "alice":
                await assert_owner_inactive(h, run)


async def test_a_claim_split_in_chunks_reads_the_owners_once_per_chunk(stack: Stack, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        async with h.engine.store.transaction() as tx:
            repository = type(tx.principals)
        reads: list[list[str]] = []
        original = repository.get_many

        async def counted(self: Any, principal_ids: Sequence[str]) -> Any:
            reads.append(list(principal_ids))
            return await original(self, principal_ids)

        monkeypatch.setattr(repository, "get_many", counted)
        automation_id = await h.automation()
        runs = [(await h.engine.control.automations.run_now(ALICE, automation_id)).id for _ in range(6)]
        reads.clear()
        done = await h.dispatch(runs, concurrency=4)  # chunks of 2: three claims, three reads
        assert reads == [["alice"]] * 3
        assert {r.status for r in done} == {RunStatus.SUCCEEDED}
        assert sorted(h.spy.executed) == sorted(runs)


# --- an agent's runs: the agent's own ban and ceiling bite at dispatch too ------------------------------

BOT = Caller("alice", frozenset(OWNER_CEILING), principal_id="bot", kind="agent", agent_id="bot")


async def add_agent(h: Harness, agent_id: str = "bot", parent: str = "alice") -> None:
    async with h.engine.store.transaction() as tx:
        await tx.principals.create(NewPrincipal(id=agent_id, kind=PrincipalKind.AGENT, parent_id=parent,
                                                scopes=OWNER_CEILING))


async def test_a_banned_agents_runs_are_skipped_while_its_owners_own_run_on(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        await add_agent(h)
        agents = await h.engine.control.automations.run_now(BOT, await h.automation(caller=BOT))
        owners = await h.engine.control.automations.run_now(ALICE, await h.automation())
        assert agents.context["$owner"]["agent_id"] == "bot"
        await h.ban("bot")
        skipped, ran = await h.dispatch([agents.id, owners.id])
        await assert_owner_inactive(h, skipped)
        assert permission_row(await h.trail(skipped.id))["agent_id"] == "bot"
        assert "agent 'bot'" in (skipped.error or "")
        assert (ran.status, h.spy.executed) == (RunStatus.SUCCEEDED, [owners.id])


async def test_a_scheduled_run_of_an_agents_automation_is_held_to_the_agents_ceiling(stack: Stack,
                                                                                      tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        await add_agent(h)
        at = stack.clock.now().replace(microsecond=0) + timedelta(seconds=2)
        automation_id = await h.automation(trigger={"type": "once", "at": _iso(at)}, caller=BOT)

        async def planned() -> list[Run]:
            await stack.clock.advance_and_settle(0.5)
            return await h.runs_of(automation_id)

        [run] = await eventually(planned, within=10, what="the wheel to fire and the planner to plan")
        assert run.context["$owner"] == {"id": "alice", "scopes": [], "agent_id": "bot"}
        await h.set_ceiling(["automation:read", "automation:write"], principal_id="bot")  # the owner keeps SCOPE
        [done] = await h.dispatch([run.id])
        assert (done.status, done.reason) == (RunStatus.FAILED, "permission")
        assert h.spy.executed == []
        assert permission_row(await h.trail(run.id))["required"] == [SCOPE]


async def test_an_agent_id_label_naming_no_agent_of_the_owner_is_only_a_label(stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        async with h.engine.store.transaction() as tx:  # someone else's agent, banned
            await tx.principals.create(NewPrincipal(id="bob", kind=PrincipalKind.USER, scopes=OWNER_CEILING))
        await add_agent(h, "bobs-bot", parent="bob")
        await h.ban("bobs-bot")
        at = stack.clock.now().replace(microsecond=0) + timedelta(seconds=2)
        payload = {"trigger": {"type": "once", "at": _iso(at)}, "action": SPY_ACTION,
                   "labels": {"agent_id": "bobs-bot"}}
        automation = await h.engine.control.automations.create(ALICE, payload)

        async def planned() -> list[Run]:
            await stack.clock.advance_and_settle(0.5)
            return await h.runs_of(automation.id)

        [run] = await eventually(planned, within=10, what="the wheel to fire and the planner to plan")
        assert run.context["$owner"]["agent_id"] == "bobs-bot"  # the label is carried ...
        [done] = await h.dispatch([run.id])
        assert done.status is RunStatus.SUCCEEDED  # ... and names no agent of alice's: no effect


async def test_an_instant_of_an_owner_banned_before_it_is_planned_is_skipped_with_its_permission_row(
        stack: Stack, tmp_path: Path) -> None:
    async with Harness(stack, tmp_path, NO_ROUTER) as h:
        at = stack.clock.now().replace(microsecond=0) + timedelta(seconds=2)
        automation_id = await h.automation(trigger={"type": "once", "at": _iso(at)})
        await h.ban()

        async def planned() -> list[Run]:
            await stack.clock.advance_and_settle(0.5)
            return await h.runs_of(automation_id)

        [run] = await eventually(planned, within=10, what="the wheel to fire and the planner to plan")
        assert (run.status, run.reason) == (RunStatus.SKIPPED, OWNER_INACTIVE)  # never PENDING, never claimed
        row = permission_row(await h.trail(run.id))
        assert (row["granted"], row["reason"], row["owner_id"], row["at"]) == (False, OWNER_INACTIVE, "alice",
                                                                              "planning")
        assert h.spy.executed == []
