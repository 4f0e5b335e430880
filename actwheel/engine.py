"""The composition root: one engine = one store, one bus, the actors of the chosen roles.

Nothing here decides anything: it builds the parts, hands each its
dependencies, and starts and stops them in order (bus and store first up,
last down; actors stop intake first).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import datetime
from typing import Any

from actwheel.actions.base import ActionContext, AuditSink, StepEvent
from actwheel.actions.config import policy_rules_from_env, registry_from_env
from actwheel.actions.pipeline import DispatchPipeline, DispatchRequest
from actwheel.actions.registry import ActionRegistry
from actwheel.actions.secrets import NoSecrets, SecretCipher, SecretResolver
from actwheel.actions.storage_ontology import StorageOntology
from actwheel.actions.storage_secrets import SecretStore, secret_resolver_from_env
from actwheel.actors.auditor import Auditor
from actwheel.actors.base import Actor
from actwheel.actors.cdc import CdcEmitter
from actwheel.actors.metrics_sampler import MetricsSampler
from actwheel.actors.partitions import AllPartitions, PartitionLeases
from actwheel.actors.planner import Planner
from actwheel.actors.queues import automation_changes, role_queues
from actwheel.actors.recovery import RecoverySweeper
from actwheel.actors.retention import RetentionSweeper
from actwheel.actors.router import AHEAD_HELD, ExecutorRouter
from actwheel.actors.supervisor import Supervisor
from actwheel.actors.ticker import ScheduledAutomation, WheelTicker, scheduled_of
from actwheel.actors.transient import TransientTimers
from actwheel.auth.authenticator import Authenticator
from actwheel.auth.bootstrap import ensure_admin
from actwheel.auth.insecure import NoAuthentication
from actwheel.batching import GroupCommitter
from actwheel.bus import open_bus
from actwheel.bus.base import Bus, Delivery, Subscription
from actwheel.bus.envelope import Envelope
from actwheel.bus.topology import DEFAULT_TOPOLOGY, QueueSpec, Topology
from actwheel.clock import Clock, SystemClock
from actwheel.errors import InvalidInput, NotFound
from actwheel.events import EventFactory
from actwheel.logs import get_logger
from actwheel.messages import AutomationChanged, AutomationsDue, StepProgressed, message_from_data
from actwheel.metrics import Metrics
from actwheel.service import (
    ActionService,
    AutomationService,
    ControlPlane,
    KeyService,
    OntologyService,
    PrincipalService,
    RunService,
    SecretService,
    TriggerService,
)
from actwheel.service.confirmations import ConfirmationService
from actwheel.service.history import HistoryService
from actwheel.service.operations import OperationsService
from actwheel.service.sessions import SessionService
from actwheel.service.stats import StatsService
from actwheel.service.stream import StreamHub
from actwheel.settings import Settings
from actwheel.storage import open_store
from actwheel.storage.base import Store
from actwheel.storage.health import StoreWatch
from actwheel.transient import TransientRegistry

__all__ = ["Engine"]

_log = get_logger("actwheel.engine")


class Engine:
    """Everything ``actwheel run`` starts. Tests build one with a VirtualClock and their own store/bus."""

    def __init__(self, settings: Settings, *, clock: Clock | None = None, store: Store | None = None,
                 bus: Bus | None = None, registry: ActionRegistry | None = None,
                 topology: Topology = DEFAULT_TOPOLOGY, queue_prefix: str = "",
                 secrets: SecretResolver | None = None) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.store = store or open_store(settings.database_url, clock=self.clock, partitions=settings.partitions)
        self.bus = bus or open_bus(settings.broker_url, topology=topology, clock=self.clock,
                                   heartbeat_s=settings.amqp_heartbeat_s)
        self.registry = registry or registry_from_env()
        self.metrics = Metrics()
        self.events = EventFactory(topology=self.bus.topology, clock=self.clock, source=f"actwheel/{settings.instance}")
        # durable: false automations live in this process, fired by its ticker: none without one
        self.transients = TransientRegistry(clock=self.clock) if "ticker" in settings.roles else None
        self._secrets: SecretResolver = secrets or NoSecrets()
        self._secrets_injected = secrets is not None
        self.ontology = StorageOntology(self.store, self.events)
        self.secret_store: SecretStore | None = None
        #: The one seam every face calls (HTTP, bus commands, MCP, dashboard).
        self.control = self._control_plane()
        self.service = self.control.automations
        self._prefix = queue_prefix
        self._schedule: _StoreSchedule | None = None  # the ticker's reads, when this instance ticks
        self.pipeline = DispatchPipeline(self.registry, make_context=self._make_context, clock=self.clock,
                                         metrics=self.metrics, rules=policy_rules_from_env())
        self.actors: dict[str, Actor] = self._build_actors()
        self.supervisor = Supervisor(list(self.actors.values()), clock=self.clock, grace_s=settings.grace_s,
                                     on_restart=lambda name: self.metrics.actor_restarts.labels(name).inc())
        #: /readyz is 503 while the database does not answer (a stall, a partition), not only when an actor is down.
        self.store_watch = StoreWatch(self.store)
        self._stack = AsyncExitStack()
        self.started = False

    async def start(self, *, ready_timeout_s: float = 30.0) -> None:
        """Start store, bus and every actor; returns once all are ready.

        Each piece registers its teardown on a local exit stack as it comes up, and the engine
        keeps that stack (``pop_all()``) only once everything is up: a start that fails half-way
        (a bus that cannot connect, a queue declaration refused, actors not ready in time) tears
        down what it had started, in reverse order, and re-raises, leaving the engine stopped.

        :raises TimeoutError: an actor is not ready within ``ready_timeout_s``
        """
        async with AsyncExitStack() as stack:
            await self.store.start()
            stack.push_async_callback(_shielded(self.store.stop))
            self.store_watch.start()
            stack.push_async_callback(self.store_watch.stop)
            if self.settings.auth:
                await ensure_admin(self.store, self.settings)
            else:
                _log.warning("authentication_disabled", http=f"{self.settings.http_host}:{self.settings.http_port}",
                             detail="--insecure-no-auth: every request acts as the local owner with every scope")
            await self._open_secrets()
            await self.bus.start()
            stack.push_async_callback(_shielded(self.bus.stop))
            await self._declare_role_queues()
            if self._schedule is not None:  # after the ticker stops, before the store does
                stack.push_async_callback(self._schedule.close)
            stack.push_async_callback(_shielded(self.supervisor.stop))  # before start: a timeout stops the actors
            await self.supervisor.start(ready_timeout_s=ready_timeout_s)
            self._stack = stack.pop_all()
        self.started = True
        _log.info("engine_started", instance=self.settings.instance, roles=list(self.actors),
                  database=self.store.dialect, broker=type(self.bus).__name__)

    async def _declare_role_queues(self) -> None:
        """Every queue the roles consume, even those run elsewhere: their messages wait for them."""
        for spec in role_queues(self.bus.topology, self._prefix):
            await self.bus.declare_queue(spec)

    async def _open_secrets(self) -> None:
        """Refuses to start when secrets are stored but no key is configured (they could not be read)."""
        if self._secrets_injected:
            return
        self._secrets = await secret_resolver_from_env(self.store, owners=[self.settings.local_owner])
        if not isinstance(self._secrets, NoSecrets):
            self.secret_store = SecretStore(self.store, SecretCipher.from_env())

    async def stop(self) -> None:
        """Stop actors (intake first, grace, cancel), then the bus, then the store. Idempotent:
        a no-op when the engine never started or its start failed (that start cleaned up)."""
        await self.control.stream.close()  # an open dashboard tab must not hold the drain up
        stack, self._stack = self._stack, AsyncExitStack()
        self.started = False
        await stack.aclose()

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    @property
    def ready(self) -> bool:
        return self.started and self.supervisor.is_ready and self.store_watch.available

    def actor_states(self) -> dict[str, str]:
        return {name: actor.state.value for name, actor in self.actors.items()}

    def metrics_text(self) -> bytes:
        return self.metrics.render()

    # --- construction ------------------------------------------------------------------

    def _control_plane(self) -> ControlPlane:
        authenticator = Authenticator(store=self.store, clock=self.clock)
        automations = AutomationService.build(store=self.store, registry=self.registry, events=self.events,
                                              clock=self.clock, transients=self.transients)
        runs = RunService(store=self.store)
        return ControlPlane(
            settings=self.settings, clock=self.clock,
            automations=automations,
            runs=runs,
            actions=ActionService(store=self.store, registry=self.registry, events=self.events),
            triggers=TriggerService(clock=self.clock),
            ontology=OntologyService(ontology=self.ontology),
            secrets=SecretService(store=self.store, writer=lambda: self.secret_store),
            principals=PrincipalService(store=self.store, on_change=authenticator.forget),
            keys=KeyService(store=self.store, clock=self.clock, on_change=authenticator.forget),
            authenticator=authenticator if self.settings.auth else NoAuthentication(self.settings.local_owner),
            status=self,
            confirmations=ConfirmationService(store=self.store, clock=self.clock, registry=self.registry,
                                              automations=automations),
            operations=OperationsService(store=self.store, events=self.events, registry=self.registry,
                                         automations=automations, runs=runs),
            history=HistoryService(store=self.store),
            stats=StatsService(store=self.store, instance=self.settings.instance, roles=self.settings.roles,
                               started_at=self.clock.now(), actor_states=self.actor_states,
                               bus_stats=lambda: self.bus.stats,
                               wheel_size=lambda: _gauge(self.metrics, "actwheel_wheel_size")),
            sessions=SessionService(store=self.store, clock=self.clock, authenticator=authenticator),
            stream=self._stream_hub())

    def _stream_hub(self) -> StreamHub:
        """The live stream's hub, with this instance's cap, per-client buffer and keep-alive interval."""
        s = self.settings
        return StreamHub(store=self.store, subscribe=self._subscribe_stream, max_clients=s.stream_max_clients,
                         buffer=s.stream_buffer, keepalive_s=s.stream_keepalive_s)

    def _build_actors(self) -> dict[str, Actor]:
        s = self.settings
        builders = {
            "ticker": self._ticker, "planner": self._planner, "router": self._router, "recovery": self._recovery,
            "cdc": self._relay, "auditor": self._auditor, "metrics": self._sampler,
        }
        actors = {role: builders[role]() for role in s.roles}
        ticker, planner = actors.get("ticker"), actors.get("planner")
        if isinstance(ticker, WheelTicker) and isinstance(planner, Planner):
            ticker.keep = planner.keep_announced  # parked automations' instants stay in this process
            ticker.at_instant = planner.at_instant  # fire-ahead: a parked one's instants come at them
        if "recovery" in s.roles:  # history is swept by the instances that sweep leases (one at a time: a lease)
            actors["retention"] = self._retention()
        return actors

    def _ticker(self) -> Actor:
        s = self.settings
        leases = (PartitionLeases(store=self.store, instance=s.instance, partitions=s.partitions)
                  if s.partition_leases else AllPartitions())
        assert self.transients is not None
        transients = TransientTimers(registry=self.transients, store=self.store, events=self.events,
                                     metrics=self.metrics)
        self._schedule = _StoreSchedule(self.store)
        ticker = WheelTicker(source=self._schedule, publish=self._publish_due, clock=self.clock,
                             horizon_s=s.horizon_s, partitions=leases,
                             on_wheel_size=self.metrics.wheel_size.set, changes=self._subscribe_changes,
                             transients=transients, lead_s=s.fire_ahead_s)
        return ticker

    def _planner(self) -> Actor:
        return Planner(bus=self.bus, store=self.store, service=self.service, events=self.events, clock=self.clock,
                       metrics=self.metrics, queue_prefix=self._prefix, backlog_limit=self.settings.plan_backlog,
                       parking=self.settings.plan_parking,
                       fire_ahead=self.settings.fire_ahead_s > 0)

    def _router(self) -> Actor:
        s = self.settings
        return ExecutorRouter(bus=self.bus, store=self.store, pipeline=self.pipeline, actions=self.control.actions,
                              events=self.events, clock=self.clock, metrics=self.metrics, instance=s.instance,
                              lease_s=s.lease_s, concurrency=s.router_concurrency, queue_prefix=self._prefix,
                              implicit_owners=not s.auth, ahead_held=AHEAD_HELD if s.fire_ahead_s else 0)

    def _recovery(self) -> Actor:
        s = self.settings
        return RecoverySweeper(store=self.store, registry=self.registry, events=self.events, clock=self.clock,
                               instance=s.instance, interval_s=s.sweep_interval_s,
                               stale_pending_s=s.stale_pending_s)

    def _retention(self) -> Actor:
        s = self.settings
        return RetentionSweeper(store=self.store, clock=self.clock, instance=s.instance, retention_s=s.retention_s,
                                interval_s=s.retention_sweep_s)

    def _relay(self) -> Actor:
        return CdcEmitter(store=self.store, bus=self.bus, clock=self.clock,
                           on_dead_letter=lambda reason: self.metrics.action_dead_letter.labels(reason).inc(),
                           on_backlog=self.metrics.outbox_backlog.set)

    def _auditor(self) -> Actor:
        return Auditor(bus=self.bus, store=self.store, queue_prefix=self._prefix)

    def _sampler(self) -> Actor:
        return MetricsSampler(bus=self.bus, metrics=self.metrics, clock=self.clock, heartbeat=self.control.stats.beat)

    # --- wiring --------------------------------------------------------------------------

    async def _publish_due(self, message: AutomationsDue) -> None:
        envelope = Envelope.new(type=message.TYPE, data=message.to_data(), source=self.events_source,
                                clock=self.clock)
        await self.bus.publish(self.bus.topology.events, message.routing_key, envelope)

    @property
    def events_source(self) -> str:
        return f"actwheel/{self.settings.instance}"

    async def _subscribe_changes(self, apply: Any) -> Subscription:
        """A per-instance change feed for the ticker: old changes are worthless, so drop-head; it expires
        when its instance is gone."""
        topology = self.bus.topology
        spec = QueueSpec(f"{self._prefix}actwheel.ticker.{self.settings.instance}",
                         automation_changes(topology),
                         max_length=10_000, overflow="drop-head", expires_s=600)
        await self.bus.declare_queue(spec)

        async def handle(delivery: Delivery) -> None:
            message = message_from_data(delivery.envelope.type, delivery.envelope.data)
            if isinstance(message, AutomationChanged):
                await apply(message)

        return await self.bus.consume(spec.name, handle, prefetch=64)

    async def _subscribe_stream(self, deliver: Callable[[str, Mapping[str, Any]], Awaitable[None]]) -> Subscription:
        """This instance's feed for the live stream (``GET /v1/stream``): drop-head like the ticker's."""
        topology = self.bus.topology
        spec = QueueSpec(f"{self._prefix}actwheel.stream.{self.settings.instance}",
                         ((topology.events, "run.#"), *automation_changes(topology)),
                         max_length=10_000, overflow="drop-head", expires_s=600)
        await self.bus.declare_queue(spec)

        async def handle(delivery: Delivery) -> None:
            await deliver(delivery.envelope.type, delivery.envelope.data)

        return await self.bus.consume(spec.name, handle, prefetch=64)

    def _make_context(self, request: DispatchRequest, audit: AuditSink) -> ActionContext:
        async def publish(routing_key: str, data: Mapping[str, Any]) -> None:
            envelope = Envelope.new(type="notification", data=dict(data), source=self.events_source,
                                    correlation_id=request.run_id, clock=self.clock)
            await self.bus.publish(self.bus.topology.events, routing_key, envelope, mandatory=False)

        async def step_event(event: StepEvent) -> None:
            message = StepProgressed(run_id=event.run_id, step=event.step, state=event.state, detail=event.detail)
            envelope = Envelope.new(type=message.TYPE, data=message.to_data(), source=self.events_source,
                                    correlation_id=request.run_id, clock=self.clock)
            await self.bus.publish(self.bus.topology.events, StepProgressed.TYPE, envelope, mandatory=False)

        return ActionContext(
            run_id=request.run_id, owner_id=request.owner_id, automation_id=request.automation_id,
            scopes=request.scopes, attempt=request.attempt, idempotency_key=request.idempotency_key,
            variables=request.variables, timeout=request.timeout_s, clock=self.clock, secrets=self._secrets,
            ontology=self.ontology, publish=publish, emit_step_event=step_event, audit=audit)


def _gauge(metrics: Metrics, name: str) -> int | None:
    value = metrics.registry.get_sample_value(name)
    return None if value is None else int(value)


def _shielded(teardown: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    """``teardown`` run to its end even if the caller is cancelled meanwhile (the cancellation is
    re-raised once it is done): a cancel must not leave a store or a bus half-closed. Every
    teardown the engine registers is itself bounded, so waiting it out cannot hang."""

    async def run() -> None:
        task = asyncio.ensure_future(teardown())
        cancelled = False
        while not task.done():
            try:
                await asyncio.wait({task})  # unlike awaiting it, a cancelled wait leaves the task running
            except asyncio.CancelledError:
                cancelled = True
        task.result()
        if cancelled:
            raise asyncio.CancelledError

    return run


_READS_DRAIN_S = 5.0
#: One read's outcome inside a batch: the row, None (gone), or the error that is that read's alone.
_Read = ScheduledAutomation | None | ValueError


class _StoreSchedule:
    """The ticker's view of storage."""

    def __init__(self, store: Store, page: int = 5_000) -> None:
        self._store = store
        self._page = page
        self._reads: GroupCommitter[str, _Read] = GroupCommitter(self._read_scheduled)

    async def due_before(self, before: datetime, partitions: frozenset[int] | None) -> list[ScheduledAutomation]:
        found: list[ScheduledAutomation] = []
        after_id = ""
        while True:
            async with self._store.transaction() as tx:
                page = await tx.automations.due_schedule(
                    before, partitions=sorted(partitions) if partitions is not None else None, after_id=after_id,
                    limit=self._page)
            found.extend(ScheduledAutomation(id=d.id, next_run_at=d.next_run_at, trigger_spec=d.trigger,
                                             partition=d.partition) for d in page)
            if len(page) < self._page:
                return found
            after_id = page[-1].id

    async def get_scheduled(self, automation_id: str) -> ScheduledAutomation | None:
        """The automation's row as the ticker loads it, or None if it is gone. Concurrent reads (the
        change feed is consumed 64 at a time) share one transaction and one statement."""
        read = await self._reads.submit(automation_id)
        if isinstance(read, Exception):
            raise read
        return read

    async def _read_scheduled(self, automation_ids: Sequence[str]) -> list[_Read]:
        try:
            async with self._store.transaction() as tx:
                found = await tx.automations.get_many(automation_ids)
        except ValueError as exc:  # an id the store refuses (InvalidInput) or a row it cannot decode: each
            _log.warning("ticker_reads_one_by_one", reads=len(automation_ids), error=type(exc).__name__)
            return [await self._read_one(i) for i in automation_ids]  # read alone, so only its own fails
        return [scheduled_of(found[i]) if i in found else None for i in automation_ids]

    async def close(self) -> None:
        """Let the reads in flight finish (at engine stop, before the store closes). A read after
        this starts a new batcher, so a restarted engine batches again."""
        reads, self._reads = self._reads, GroupCommitter(self._read_scheduled)
        try:
            await asyncio.wait_for(reads.close(), timeout=_READS_DRAIN_S)
        except TimeoutError:  # a database that does not answer must not hold the stop up: reads cancelled
            _log.warning("ticker_reads_not_drained", timeout_s=_READS_DRAIN_S)

    async def _read_one(self, automation_id: str) -> _Read:
        try:
            async with self._store.transaction() as tx:
                return scheduled_of(await tx.automations.get(automation_id))
        except (NotFound, InvalidInput):
            return None
        except ValueError as exc:  # its row cannot be decoded: this read fails, the batch's others do not
            return exc

