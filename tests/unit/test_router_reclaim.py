"""The router's claim at the instant of runs planned ahead (fire-ahead): what is still PENDING after a claim
is claimed again every ``AHEAD_RECLAIM_S``, at most ``AHEAD_RECLAIMS`` times, and then left to the recovery
sweeper at once — with no sleep after the last try, which would hold the delivery for nothing.

The router's collaborators that the loop does not reach are left out (``None``); its claim and its PENDING
read are replaced by recorders, so that the loop's timing is what is measured. The real claim and read are
tested on both stores in tests/storage/test_storage_fire_ahead.py and end to end in
tests/engine/test_fire_ahead.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, cast

import pytest
from structlog.testing import capture_logs

from actwheel.actors.router import AHEAD_HELD, AHEAD_RECLAIM_S, AHEAD_RECLAIMS, ExecutorRouter
from actwheel.clock import VirtualClock
from actwheel.storage.records import Run
from tests.clocks import FastClock


class _Router(ExecutorRouter):
    """Claims nothing; every run stays PENDING (a database clock behind this one, say)."""

    def __init__(self, clock: FastClock, *, claimable_at_try: int | None = None) -> None:
        nothing = cast(Any, None)
        super().__init__(bus=nothing, store=nothing, pipeline=nothing, actions=nothing, events=nothing,
                         clock=clock, metrics=nothing, instance="i1")
        self.claims: list[list[str]] = []
        self._claimable_at_try = claimable_at_try

    async def claim_and_start(self, run_ids: Sequence[str]) -> list[Run]:
        self.claims.append(list(run_ids))
        return []

    async def _still_pending(self, run_ids: Sequence[str]) -> list[str]:
        if self._claimable_at_try is not None and len(self.claims) >= self._claimable_at_try:
            return []  # claimed elsewhere, or withdrawn: nothing left
        return list(run_ids)


async def test_runs_left_pending_are_claimed_again_then_left_to_recovery_without_a_last_sleep() -> None:
    clock = FastClock()
    router = _Router(clock)
    instant = clock.now() + timedelta(seconds=1)
    with capture_logs() as logs:
        await router._claim_at(["r1", "r2"], instant)
    assert router.claims == [["r1", "r2"]] * (AHEAD_RECLAIMS + 1)  # the claim at the instant, then the re-claims
    assert clock.slept == [1.0] + [AHEAD_RECLAIM_S] * AHEAD_RECLAIMS  # to the instant, then between tries only
    assert clock.now() == instant + timedelta(seconds=AHEAD_RECLAIM_S * AHEAD_RECLAIMS)
    [left] = [e for e in logs if e["event"] == "ahead_runs_left_to_recovery"]
    assert left["runs"] == 2


async def test_the_re_claims_stop_as_soon_as_nothing_is_pending() -> None:
    clock = FastClock()
    router = _Router(clock, claimable_at_try=3)
    with capture_logs() as logs:
        await router._claim_at(["r1"], clock.now())
    assert len(router.claims) == 3
    assert clock.slept == [AHEAD_RECLAIM_S] * 2
    assert not [e for e in logs if e["event"] == "ahead_runs_left_to_recovery"]


@pytest.mark.parametrize(("ahead_held", "expected"), [(0, 64), (AHEAD_HELD, 64 + AHEAD_HELD)])
def test_deliveries_held_for_their_instant_have_prefetch_of_their_own(ahead_held: int, expected: int) -> None:
    nothing = cast(Any, None)

    class _Topology:
        events, commands = "actwheel.events", "actwheel.commands"

    class _Bus:
        topology = _Topology()

    router = ExecutorRouter(bus=cast(Any, _Bus()), store=nothing, pipeline=nothing, actions=nothing,
                            events=nothing, clock=VirtualClock(), metrics=nothing, instance="i1",
                            ahead_held=ahead_held)
    ready, quiet, requests = router.intake()
    # the quiet lane's deliveries are held until their instant too; run requests keep their prefetch
    assert (ready.prefetch, quiet.prefetch, requests.prefetch) == (expected, expected, 64)
