"""The metrics actor: samples what is not counted where it happens.

Bus counters (redeliveries, dead letters) are copied into Prometheus as
deltas. Everything else is counted where it happens (the pipeline, the
planner, the router, the ticker's wheel size).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from actwheel.actors.base import Actor
from actwheel.actors.sleeping import sleep_or_wake
from actwheel.bus.base import Bus
from actwheel.clock import Clock
from actwheel.errors import StorageUnavailable
from actwheel.logs import get_logger
from actwheel.metrics import Metrics

__all__ = ["MetricsSampler"]

_log = get_logger("actwheel.metrics")


class MetricsSampler(Actor):
    name = "metrics"

    def __init__(self, *, bus: Bus, metrics: Metrics, clock: Clock, interval_s: float = 5.0,
                 heartbeat: Callable[[], Awaitable[object]] | None = None) -> None:
        """``heartbeat``: called every sample — the engine's row of ``instances`` (the ops dashboard's
        system view); a database that is down skips a beat, never the sampler."""
        super().__init__()
        self._heartbeat = heartbeat
        self._bus = bus
        self._metrics = metrics
        self._clock = clock
        self._interval_s = interval_s
        self._seen_redeliveries: dict[str, int] = {}
        self._seen_dead: dict[str, int] = {}

    async def run(self) -> None:
        self.mark_ready()
        while not self.stopping.is_set():
            self.sample()
            await self._beat()
            await sleep_or_wake(self._clock, self._interval_s, self.stopping)

    def sample(self) -> None:
        stats = self._bus.stats
        _copy_deltas(dict(stats.redelivered), self._seen_redeliveries,
                     lambda key, n: self._metrics.bus_redeliveries.labels(key).inc(n))
        _copy_deltas(dict(stats.dead_lettered), self._seen_dead,
                     lambda key, n: self._metrics.bus_dead_letters.labels(key).inc(n))


    async def _beat(self) -> None:
        if self._heartbeat is None:
            return
        try:
            await self._heartbeat()
        except StorageUnavailable as exc:
            _log.warning("heartbeat_skipped", error=str(exc))


def _copy_deltas(current: dict[str, int], seen: dict[str, int], inc: Callable[[str, int], None]) -> None:
    for key, value in current.items():
        delta = value - seen.get(key, 0)
        if delta > 0:
            inc(key, delta)
        seen[key] = value
