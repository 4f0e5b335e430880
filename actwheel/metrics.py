"""Prometheus metrics, one registry per engine (tests build their own).

The four seed metrics keep their names: ``action_dispatched_total``,
``action_execution_duration_seconds``, ``action_compensation_total``,
``action_dead_letter_total``; the rest are prefixed ``actwheel_``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from actwheel.run_context import instants_of
from actwheel.storage.records import RunStatus

if TYPE_CHECKING:
    from actwheel.storage.records import InsertedRun, Run

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    """Every metric the engine exports, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.action_dispatched = Counter(
            "action_dispatched_total", "Actions dispatched, by executor type and final status",
            ["executor_type", "status"], registry=r)
        self.action_duration = Histogram(
            "action_execution_duration_seconds", "Executor wall time", ["executor_type"],
            buckets=_LATENCY_BUCKETS, registry=r)
        self.action_compensation = Counter(
            "action_compensation_total", "Compensations run (saga steps undone)", ["executor_type"],
            registry=r)
        self.action_dead_letter = Counter(
            "action_dead_letter_total", "Runs or messages sent to the dead-letter table", ["reason"],
            registry=r)
        self.fire_lateness = Histogram(
            "actwheel_fire_lateness_seconds", "From scheduled_for until the run is committed",
            buckets=_LATENCY_BUCKETS, registry=r)
        self.start_lateness = Histogram(
            "actwheel_start_lateness_seconds", "From scheduled_for until execution starts",
            buckets=_LATENCY_BUCKETS, registry=r)
        self.runs = Counter("actwheel_runs_total", "Runs reaching a status", ["status"], registry=r)
        self.wheel_size = Gauge("actwheel_wheel_size", "Timers held by this instance's wheel", registry=r)
        self.outbox_backlog = Gauge("actwheel_outbox_backlog", "Unpublished outbox rows", registry=r)
        self.bus_redeliveries = Counter(
            "actwheel_bus_redeliveries_total", "Messages delivered again", ["queue"], registry=r)
        self.bus_dead_letters = Counter(
            "actwheel_bus_dead_letters_total", "Messages dead-lettered by the bus", ["reason"], registry=r)
        self.actor_restarts = Counter(
            "actwheel_actor_restarts_total", "Actor restarts after a crash", ["actor"], registry=r)
        self.skipped = Counter("actwheel_skipped_total", "Instants recorded SKIPPED", ["reason"], registry=r)

    def observe_planned(self, inserted: Iterable[InsertedRun], committed_at: Callable[[Run], datetime]) -> None:
        """Count a committed planning batch: SKIPPED runs by reason, fire lateness of the others
        (``committed_at(run)`` − ``scheduled_for``); runs that already existed are not counted."""
        for item in inserted:
            run = item.run
            if not item.created:
                continue
            if run.status is RunStatus.SKIPPED:
                self.skipped.labels(run.reason or "").inc(instants_of(run.context))
            elif run.scheduled_for is not None:
                self.fire_lateness.observe(max(0.0, (committed_at(run) - run.scheduled_for).total_seconds()))

    def render(self) -> bytes:
        """The text exposition format, for ``/metrics``."""
        return generate_latest(self.registry)
