"""The fault scenarios of issue 14, shared by the CI-cheap tests (tests/faults/test_faults.py, small
parameters) and ``bench/chaos.py`` (the full ones). Each one drives real ``actwheel run``
processes (or in-process engines, for the clock) against throwaway servers (:mod:`instances`),
injects its faults, waits until everything has settled and returns :class:`Figures`: what the
design promises, counted from the database.

The invariants counted for every scenario (docs/design.md invariants 1, 3, 4, 7):

- every (automation, instant) of the workload's triggers has exactly one run, SUCCEEDED or a
  recorded SKIPPED: ``duplicates`` (more than one), ``missing`` (none) and ``extra`` (an instant
  the trigger never had) must all be 0;
- every run ends terminal: ``unsettled`` counts the others (PENDING, RUNNING, UNKNOWN, ...);
- the STRONG effect (``ontology.create_object``, one object per run) happened exactly once per
  succeeded run: ``effects_extra`` / ``effects_missing``;
- nothing is lost from the outbox: ``lost`` counts rows never published.

Scenario durations (how long a fault lasts) are the scenario; every wait for an outcome polls
a condition with a bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
from instances import Instances, unavailable
from procs import EngineProcess, engine_processes, eventually
from proxy import FaultProxy, proxied
from services import with_search_path

from actwheel.actions.defaults import default_registry
from actwheel.actions.ontology_port import ObjectType
from actwheel.actions.storage_ontology import StorageOntology
from actwheel.bus import AmqpBus
from actwheel.bus.topology import DEFAULT_TOPOLOGY
from actwheel.clock import Clock, SystemClock
from actwheel.engine import Engine
from actwheel.events import EventFactory
from actwheel.run_context import instants_of
from actwheel.service import AutomationService, Caller
from actwheel.settings import ALL_ROLES, Settings
from actwheel.storage import open_store
from actwheel.triggers import preview
from tests.instants import recorded_instants

STRONG_ACTION = {"type": "ontology.create_object", "config": {"object_type": "Tick", "properties": {"n": 1}}}
SETTLED = ("SUCCEEDED", "SKIPPED")
ENGINE_ENV = {"ACTWHEEL_LEASE_S": "5"}


@dataclass
class Figures:
    """One scenario's outcome: the invariants' counts and its own figures."""

    scenario: str
    faults: str
    expected: int = 0
    duplicates: int = 0
    missing: int = 0
    extra: int = 0
    unsettled: int = 0
    effects_extra: int = 0
    effects_missing: int = 0
    lost: int = 0
    #: the longest recovery (seconds from the end of a fault until the engine works again)
    recovery_s: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def violations(self) -> list[str]:
        counts = {"duplicates": self.duplicates, "missing": self.missing, "extra": self.extra,
                  "unsettled": self.unsettled, "effects_extra": self.effects_extra,
                  "effects_missing": self.effects_missing, "lost": self.lost}
        found = [f"{name}={value}" for name, value in counts.items() if value]
        if self.expected == 0:
            found.append("expected=0 (the workload fired nothing)")
        return found

    def assert_invariants(self) -> None:
        assert not self.violations(), f"{self.scenario}: {self.violations()} {self.as_dict()}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- the database of one scenario -----------------------------------------------------------------

@contextlib.asynccontextmanager
async def fresh_schema(services: Instances) -> AsyncIterator[str]:
    """A schema of its own on the throwaway PostgreSQL; yields its URL (direct, not proxied)."""
    schema = f"f_{uuid.uuid4().hex[:12]}"
    await _execute(services.database_url, f'CREATE SCHEMA "{schema}"')
    try:
        yield with_search_path(services.database_url, schema)
    finally:
        with contextlib.suppress(OSError, asyncpg.PostgresError):
            await _execute(services.database_url, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _execute(url: str, statement: str) -> None:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def via(url: str, proxy: FaultProxy) -> str:
    """``url`` with its host:port replaced by the proxy's."""
    scheme, rest = url.split("://", 1)
    credentials, _, tail = rest.partition("@")
    _, _, path = tail.partition("/")
    return f"{scheme}://{credentials}@127.0.0.1:{proxy.port}/{path}"


@contextlib.asynccontextmanager
async def fresh_vhost(services: Instances) -> AsyncIterator[str]:
    """A vhost of its own on the throwaway broker (``actwheel run`` declares production names)."""
    vhost = f"f-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(services.rabbitmqctl, "add_vhost", vhost)
    await asyncio.to_thread(services.rabbitmqctl, "set_permissions", "-p", vhost, "actwheel", ".*", ".*", ".*")
    try:
        yield f"{services.broker_url.rstrip('/')}/{vhost}"
    finally:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(services.rabbitmqctl, "delete_vhost", vhost)


# --- the workload ---------------------------------------------------------------------------------

@dataclass
class Workload:
    """``count`` automations firing every second for ``window_s`` seconds, each run one STRONG effect."""

    database: str
    triggers: dict[str, tuple[dict[str, Any], datetime]]
    window_s: int
    start: datetime

    @classmethod
    async def create(cls, database: str, *, count: int, window_s: int, lead_s: float = 3.0,
                     clock: Clock | None = None) -> Workload:
        clock = clock or SystemClock()
        start = clock.now().replace(microsecond=0) + timedelta(seconds=lead_s + count / 200)
        end = start + timedelta(seconds=window_s - 1)
        store = open_store(database, clock=clock)
        await store.start()
        try:
            events = EventFactory(topology=DEFAULT_TOPOLOGY, clock=clock, source="faults")
            tick = ObjectType(name="Tick", properties={"n": {"type": "integer"}})
            await StorageOntology(store, events).put_type(tick)
            service = AutomationService.build(store=store, registry=default_registry(), clock=clock, events=events)
            trigger = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                       "start_date_time": start.isoformat(), "end_date_time": end.isoformat()}
            triggers = {}
            for i in range(count):
                automation = await service.create(Caller("local"), {"name": f"f{i}", "trigger": trigger,
                                                                    "action": STRONG_ACTION})
                assert automation.next_run_at is not None
                triggers[automation.id] = (trigger, automation.next_run_at)
        finally:
            await store.stop()
        return cls(database=database, triggers=triggers, window_s=window_s, start=start)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.window_s)

    async def wait_firing(self, within: float = 30.0) -> None:
        """Until the first run of the window has succeeded."""
        async with _connection(self.database) as conn:
            async def fired() -> bool:
                return bool(await conn.fetchval("SELECT count(*) FROM runs WHERE status = 'SUCCEEDED'"))
            await eventually(fired, within=within, every=0.2, what="the workload firing")

    async def wait_settled(self, within: float) -> None:
        """Every automation COMPLETED, every run settled and the outbox published."""
        async with _connection(self.database) as conn:
            async def settled() -> bool:
                return await conn.fetchval(
                    "SELECT (SELECT count(*) FROM automations WHERE status <> 'COMPLETED') = 0"
                    " AND (SELECT count(*) FROM runs WHERE status <> ALL($1::text[])) = 0"
                    " AND (SELECT count(*) FROM outbox WHERE published_at IS NULL) = 0", list(SETTLED))
            with contextlib.suppress(AssertionError):  # the audit reports what did not settle
                await eventually(settled, within=within, every=0.5, what="everything settled")

    async def audit(self, figures: Figures) -> Figures:
        async with _connection(self.database) as conn:
            rows = await conn.fetch("SELECT automation_id, scheduled_for, status, reason, context FROM runs "
                                    "WHERE automation_id IS NOT NULL")
            objects = await conn.fetchval("SELECT count(*) FROM objects WHERE object_type = 'Tick'")
            figures.lost = await conn.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL")
            figures.details["retried"] = await conn.fetchval("SELECT count(*) FROM runs WHERE attempt > 1")
        by_automation: dict[str, list[asyncpg.Record]] = defaultdict(list)
        for row in rows:
            by_automation[row["automation_id"]].append(row)
        for automation_id, (trigger, first) in self.triggers.items():
            expected = {at.astimezone(UTC) for at in
                        preview(trigger, after=first - timedelta(microseconds=1), count=self.window_s + 10)}
            seen = recorded_instants(((r["scheduled_for"], r["context"]) for r in by_automation[automation_id]),
                                     sorted(expected))
            figures.expected += len(expected)
            figures.missing += len(expected - seen.keys())
            figures.extra += len(seen.keys() - expected)
            figures.duplicates += sum(n - 1 for n in seen.values())
        statuses: Counter[str] = Counter()
        for r in rows:  # instants, not rows: a SKIPPED(overlap) range stands for several
            statuses[f"{r['status']}" + (f"({r['reason']})" if r["reason"] else "")] += instants_of(
                orjson.loads(r["context"]))
        figures.statuses = dict(statuses)
        figures.unsettled = sum(1 for r in rows if r["status"] not in SETTLED)
        succeeded = sum(1 for r in rows if r["status"] == "SUCCEEDED")
        figures.effects_extra = max(0, objects - succeeded)
        figures.effects_missing = max(0, succeeded - objects)
        return figures


@contextlib.asynccontextmanager
async def _connection(url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        yield conn
    finally:
        await conn.close(timeout=5)


async def _ready(client: httpx.AsyncClient, proc: EngineProcess) -> int | None:
    with contextlib.suppress(httpx.HTTPError):
        return (await client.get(f"{proc.url}/readyz")).status_code
    return None


async def _progress_after(database: str, since: datetime, within: float) -> float:
    """Seconds until a run finishes after ``since`` (the engine works again)."""
    began = time.monotonic()
    async with _connection(database) as conn:
        async def finished() -> bool:
            return bool(await conn.fetchval("SELECT count(*) FROM runs WHERE finished_at > $1", since))
        await eventually(finished, within=within, every=0.1, what=f"a run finished after {since}")
    return time.monotonic() - began


def _settle_budget(workload: Workload) -> float:
    return max(0.0, (workload.end - datetime.now(UTC)).total_seconds()) + 60.0


# --- SIGKILL churn --------------------------------------------------------------------------------

async def sigkill_churn(services: Instances, log_dir: Path, *, victim_roles: Sequence[str] | None,
                        kills: int = 2, automations: int = 50, window_s: int = 20) -> Figures:
    """A process running ``victim_roles`` (all when None) is SIGKILLed and restarted ``kills`` times
    while the workload fires; a second process runs every role throughout."""
    label = ",".join(victim_roles) if victim_roles else "all roles"
    figures = Figures(f"sigkill {label}", f"{kills} x SIGKILL")
    async with fresh_schema(services) as database, fresh_vhost(services) as broker:
        victim = EngineProcess(f"victim-{uuid.uuid4().hex[:4]}", database=database, broker=broker,
                               log_dir=log_dir, actors=victim_roles, env=ENGINE_ENV)
        steady = EngineProcess(f"steady-{uuid.uuid4().hex[:4]}", database=database, broker=broker,
                               log_dir=log_dir, env=ENGINE_ENV)
        async with engine_processes([steady, victim]):
            workload = await Workload.create(database, count=automations, window_s=window_s)
            await workload.wait_firing()
            recoveries = []
            for k in range(kills):
                mark = workload.start + timedelta(seconds=window_s * (k + 1) / (kills + 1))
                await _until_wall(mark)
                victim.kill()
                killed_at = time.monotonic()
                victim.start()
                await victim.wait_ready(60)
                recoveries.append(time.monotonic() - killed_at)
            await workload.wait_settled(_settle_budget(workload) + 30)
        figures.recovery_s = max(recoveries)
        figures.details["restart_s"] = [round(r, 2) for r in recoveries]
        return await workload.audit(figures)


async def _until_wall(instant: datetime) -> None:
    delay = (instant - datetime.now(UTC)).total_seconds()
    if delay > 0:
        await asyncio.sleep(delay)  # the scenario's schedule: the next fault lands at this instant


# --- broker killed and restarted ------------------------------------------------------------------

async def broker_restarts(services: Instances, log_dir: Path, *, rounds: int = 3, automations: int = 20,
                          restore_within_s: float = 30.0) -> Figures:
    """SIGKILL the RabbitMQ node and start it again, ``rounds`` times in a row, while automations
    fire; after each restart the consumers must be back (``rabbitmqctl list_consumers``) within
    ``restore_within_s``."""
    figures = Figures("broker SIGKILL+restart", f"{rounds} x kill -9 beam")
    async with fresh_schema(services) as database, fresh_vhost(services) as broker:
        vhost = broker.rsplit("/", 1)[1]
        procs = [EngineProcess(f"b{i}-{uuid.uuid4().hex[:4]}", database=database, broker=broker, log_dir=log_dir,
                               env=ENGINE_ENV) for i in range(2)]
        async with engine_processes(procs):
            baseline = await asyncio.to_thread(services.consumers, vhost)
            window_s = int(rounds * 6 + 4)
            workload = await Workload.create(database, count=automations, window_s=window_s)
            await workload.wait_firing()
            restores: list[float] = []
            boots: list[float] = []
            for round_ in range(1, rounds + 1):
                killed_at = time.monotonic()
                await asyncio.to_thread(services.kill_broker)
                boots.append(await asyncio.to_thread(services.restart_broker))
                try:
                    restores.append(await _consumers_back(services, vhost, baseline, killed_at, restore_within_s))
                except AssertionError:  # the row says which round and what the broker had instead
                    restores.append(time.monotonic() - killed_at)
                    figures.details["failed_round"] = round_
                    figures.details["consumers_then"] = await asyncio.to_thread(services.consumers, vhost)
                    break
            await workload.wait_settled(_settle_budget(workload) + 30)
            ready = [p.alive for p in procs]
        figures.recovery_s = max(restores)
        figures.details.update({"consumers": sum(baseline.values()), "broker_boot_s": [round(b, 1) for b in boots],
                                "consumers_back_s": [round(r, 1) for r in restores], "alive": ready})
        return await workload.audit(figures)


async def _consumers_back(services: Instances, vhost: str, baseline: dict[str, int], since: float,
                          within: float) -> float:
    """Seconds from ``since`` until every queue has its baseline consumers again."""
    async def back() -> bool:
        with contextlib.suppress(Exception):
            now = await asyncio.to_thread(services.consumers, vhost)
            return all(now.get(queue, 0) >= n for queue, n in baseline.items())
        return False
    deadline = within - (time.monotonic() - since)
    await eventually(back, within=max(deadline, 0.1), every=0.2, what=f"consumers back on {sorted(baseline)}")
    return time.monotonic() - since


# --- network faults through the proxy -------------------------------------------------------------

Fault = Callable[[FaultProxy], Awaitable[None]]


async def network_faults(services: Instances, log_dir: Path, *, link: str, kind: str, fault_s: float = 6.0,
                         automations: int = 20, window_s: int = 20, repeats: int = 1) -> Figures:
    """One engine process whose ``link`` (``postgres``, ``rabbitmq`` or ``both``) goes through a
    :class:`~proxy.FaultProxy` that injects ``kind`` (``stall``, ``reset``, ``latency``,
    ``half_open``) for ``fault_s`` seconds, ``repeats`` times. A stalled or silent database must
    make ``/readyz`` answer 503 during the fault; after it the engine recovers by itself."""
    figures = Figures(f"{link} {kind}", f"{repeats} x {kind} {fault_s:g}s" if kind != "reset" else f"{repeats} x RST")
    async with fresh_schema(services) as database, fresh_vhost(services) as broker:
        async with proxied("127.0.0.1", services.pg_port) as pg_proxy, \
                proxied("127.0.0.1", services.rmq_port) as amqp_proxy:
            db_url = via(database, pg_proxy) if link in ("postgres", "both") else database
            broker_url = via(broker, amqp_proxy) if link in ("rabbitmq", "both") else broker
            proxies = [p for p, on in ((pg_proxy, link != "rabbitmq"), (amqp_proxy, link != "postgres")) if on]
            proc = EngineProcess(f"n-{link}-{kind}-{uuid.uuid4().hex[:4]}", database=db_url, broker=broker_url,
                                 log_dir=log_dir, env=_engine_env(kind))
            async with engine_processes([proc]), httpx.AsyncClient(timeout=2.0) as client:
                workload = await Workload.create(database, count=automations, window_s=window_s)
                await workload.wait_firing()
                not_ready, recoveries = [], []
                for _ in range(repeats):
                    seen = await _inject(proxies, kind, fault_s, client, proc)
                    healed = datetime.now(UTC)
                    began = time.monotonic()
                    not_ready.append(503 in seen)
                    try:
                        await eventually(lambda: _is(client, proc, 200), within=60, what=f"{proc.instance} ready")
                        await _progress_after(database, healed, within=60)
                    except AssertionError as exc:  # what the engine said is what a reader of CI's log needs
                        state = await _engine_state(client, proc)
                        broker_state = await _broker_state(services, broker.rsplit("/", 1)[1])
                        runs = await _run_state(database)
                        tasks = await proc.task_dump()
                        raise AssertionError(f"{exc}\n{state}\n{broker_state}\n{runs}\n{proc.tail(80)}\n{tasks}") \
                            from None
                    recoveries.append(time.monotonic() - began)
                await workload.wait_settled(_settle_budget(workload) + 30)
        figures.recovery_s = max(recoveries)
        figures.details.update({"readyz_503_during_fault": not_ready, "recovery_s": [round(r, 2) for r in recoveries],
                                "proxy": [asdict(p.stats) for p in proxies]})
        return await workload.audit(figures)


async def _engine_state(client: httpx.AsyncClient, proc: EngineProcess) -> str:
    """The engine's own view when a recovery timed out: its actors (/readyz) and its bus and run metrics."""
    lines = []
    for path in ("/readyz", "/metrics"):
        try:
            text = (await client.get(f"{proc.url}{path}")).text
        except httpx.HTTPError as exc:
            text = f"unreachable: {exc!r}"
        if path == "/metrics":
            text = "\n".join(line for line in text.splitlines()
                             if line.startswith(("actwheel_bus", "actwheel_runs", "actwheel_actor", "actwheel_outbox")))
        lines.append(f"--- {path} ---\n{text}")
    return "\n".join(lines)


async def _broker_state(services: Instances, vhost: str) -> str:
    """The broker's view when a recovery timed out: each queue's ready / unacked counts and
    consumers, and the connections it still holds."""
    lines = []
    for what, columns in (("list_queues", ("name", "messages_ready", "messages_unacknowledged", "consumers")),
                          ("list_consumers", ("queue_name", "channel_pid", "ack_required", "prefetch_count")),
                          ("list_connections", ("name", "state", "channels", "recv_oct", "send_oct")),
                          ("list_channels", ("connection", "number", "consumer_count", "messages_unacknowledged",
                                             "prefetch_count"))):
        try:
            text = await asyncio.to_thread(services.rabbitmqctl, what, "-p", vhost, *columns)
        except Exception as exc:  # a diagnostic must not hide the failure it explains
            text = f"unavailable: {exc!r}"
        lines.append(f"--- rabbitmqctl {what} ---\n{text}")
    return "\n".join(lines)


async def _run_state(database: str) -> str:
    """The runs' statuses, their leases and the unpublished outbox when a recovery timed out."""
    try:
        return await _run_counts(database)
    except (OSError, asyncpg.PostgresError) as exc:  # a diagnostic must not hide the failure it explains
        return f"--- runs: unavailable: {exc!r} ---"


async def _run_counts(database: str) -> str:
    async with _connection(database) as conn:
        rows = await conn.fetch("SELECT status, count(*) AS n, min(scheduled_for) AS first, max(updated_at) AS last,"
                                " count(lease_owner) AS leased, max(lease_expires_at) AS lease_until"
                                " FROM runs GROUP BY status")
        outbox = await conn.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL")
        now = await conn.fetchval("SELECT now()")
    return f"--- runs (database now {now}, outbox unpublished {outbox}) ---\n" + "\n".join(map(str, rows))


def _engine_env(kind: str) -> dict[str, str]:
    """A half-open link is noticed within about three heartbeats on the engine's side and two on the
    broker's (which holds the silent consumers' messages until then): 5 s, not the default 10, keeps
    the scenario short without changing what it proves."""
    return {**ENGINE_ENV, "ACTWHEEL_AMQP_HEARTBEAT_S": "5"} if kind == "half_open" else ENGINE_ENV


async def _is(client: httpx.AsyncClient, proc: EngineProcess, status: int) -> bool:
    return await _ready(client, proc) == status


async def _inject(proxies: Sequence[FaultProxy], kind: str, fault_s: float, client: httpx.AsyncClient,
                  proc: EngineProcess) -> set[int | None]:
    """The fault for ``fault_s`` seconds; returns the /readyz answers seen meanwhile (polled each 0.5 s)."""
    seen: set[int | None] = set()
    for proxy in proxies:
        if kind == "reset":
            proxy.reset_all()
            proxy.refuse()
        elif kind == "stall":
            proxy.stall()
        elif kind == "latency":
            proxy.set_latency(0.2)
        elif kind == "half_open":
            proxy.half_open()
        else:
            raise ValueError(f"unknown fault {kind!r}")
    deadline = time.monotonic() + fault_s
    while time.monotonic() < deadline:  # the fault lasts fault_s: that is the scenario
        seen.add(await _ready(client, proc))
        await asyncio.sleep(0.5)
    for proxy in proxies:
        proxy.heal()
    return seen


# --- a full disk under the SQLite file ------------------------------------------------------------

@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "8m") -> Any:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        unavailable(f"!!! cannot mount a tmpfs at {path} (root needed): {done.stderr.strip()} !!!")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


async def disk_full(log_dir: Path, *, automations: int = 5) -> Figures:
    """An embedded engine (SQLite + in-process bus) whose file lives on an 8 MiB tmpfs that is then
    filled: a new automation is refused with 507 ``storage_full``, what was committed stays readable,
    and once space is freed the engine takes new work again without a restart."""
    figures = Figures("sqlite disk full", "tmpfs 8 MiB filled")
    with small_tmpfs(log_dir / "disk") as disk:
        proc = EngineProcess(f"disk-{uuid.uuid4().hex[:4]}", database=f"sqlite:///{disk / 'actwheel.db'}",
                             broker="memory://", log_dir=log_dir, env=ENGINE_ENV)
        async with engine_processes([proc]), httpx.AsyncClient(base_url=proc.url, timeout=10.0) as client:
            trigger = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "HOURS",
                       "start_date_time": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}
            body = {"trigger": trigger, "action": {"type": "simple.op",
                                                   "config": {"op": "set_variable", "name": "x", "value": 1}}}
            created = []
            for i in range(automations):
                answer = await client.post("/v1/automations", json={**body, "name": f"kept{i}"})
                assert answer.status_code == 201, answer.text
                created.append(answer.json()["id"])
            filler = disk / "filler"
            _fill(filler)
            refused = await client.post("/v1/automations", json={**body, "name": "refused", "labels": {
                "pad": "x" * 2000}})
            figures.details["refused_status"] = refused.status_code
            figures.details["refused_body"] = refused.json() if refused.status_code != 201 else None
            listed = await client.get("/v1/automations")
            figures.details["kept_readable"] = (listed.status_code == 200 and
                                                {a["id"] for a in listed.json()["items"]} >= set(created))
            filler.unlink()
            began = time.monotonic()
            async def accepted() -> bool:
                answer = await client.post("/v1/automations", json={**body, "name": "after"})
                return answer.status_code == 201
            await eventually(accepted, within=30, every=0.5, what="a new automation accepted after space was freed")
            figures.recovery_s = time.monotonic() - began
            figures.details["alive"] = proc.alive
            final = await client.get("/v1/automations")
            figures.details["kept_after"] = {a["id"] for a in final.json()["items"]} >= set(created)
    figures.expected = automations
    return figures


def _fill(path: Path) -> None:
    """Write until the filesystem says ENOSPC."""
    chunk = b"\0" * (64 * 1024)
    with path.open("wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(chunk)
            out.flush()
            os.fsync(out.fileno())


# --- clocks that disagree -------------------------------------------------------------------------

class SkewedClock(SystemClock):
    """The system clock, ``offset_s`` off: an instance whose clock disagrees with the others'."""

    def __init__(self, offset_s: float) -> None:
        super().__init__()
        self.offset = timedelta(seconds=offset_s)

    def now(self) -> datetime:
        return super().now() + self.offset

    def now_ms(self) -> int:
        return super().now_ms() + int(self.offset.total_seconds() * 1000)


async def clock_skew(services: Instances, *, skew_s: float = 4.0, automations: int = 30,
                     window_s: int = 15) -> Figures:
    """Three in-process engines whose clocks read −skew, 0 and +skew seconds, against one PostgreSQL
    and one broker: leases and fencing are decided on the database clock, so no instant fires twice
    or goes missing and no lease is taken from a live owner (no run is recovered: attempt 1 only)."""
    figures = Figures(f"clock skew ±{skew_s:g}s", f"3 engines at -{skew_s:g}/0/+{skew_s:g} s")
    async with fresh_schema(services) as database, fresh_vhost(services) as broker:
        engines = []
        for i, offset in enumerate((-skew_s, 0.0, skew_s)):
            clock = SkewedClock(offset)
            settings = Settings(database_url=database, broker_url=broker, instance=f"skew{i}", lease_s=5.0,
                                sweep_interval_s=1.0, grace_s=3.0, stale_pending_s=5.0, auth=False, roles=ALL_ROLES)
            engines.append(Engine(settings, clock=clock, store=open_store(database, clock=clock),
                                  bus=AmqpBus(broker, topology=DEFAULT_TOPOLOGY, grace=2.0, reconnect_interval=0.2)))
        async with contextlib.AsyncExitStack() as stack:
            for engine in engines:
                await stack.enter_async_context(engine)
            workload = await Workload.create(database, count=automations, window_s=window_s, lead_s=3.0 + skew_s)
            await workload.wait_firing()
            await workload.wait_settled(_settle_budget(workload))
        async with _connection(database) as conn:
            figures.details["recovered"] = await conn.fetchval("SELECT count(*) FROM audit WHERE phase = 'RECOVERY'")
            figures.details["runs_by_instance"] = {r["actor"]: r["n"] for r in await conn.fetch(
                "SELECT actor, count(DISTINCT run_id) AS n FROM audit WHERE run_id IS NOT NULL GROUP BY actor")}
        return await workload.audit(figures)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
