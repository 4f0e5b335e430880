"""The CI-cheap fault scenarios (issue 14): small versions of ``bench/chaos.py``'s, on throwaway
PostgreSQL and RabbitMQ servers of their own (started once for this module, ~20 s), never the
shared dev services (single-role SIGKILL churn is in bench/chaos.py; tests/engine kills a router-only
process already). They share the ``faults`` xdist group with test_bus_links.py, so that ``make pytest``
(``--dist loadgroup``) runs them on one worker, beside the other tests, with one pair of servers.
Budget: about 2 minutes for the module on a 2-CPU machine.

Every scenario asserts the invariants of :mod:`scenarios` (one run or one recorded SKIPPED per
instant, every run terminal, the STRONG effect once per run, nothing left in the outbox) plus its
own promise (consumers back within 30 s, /readyz 503 while the database stalls, 507 on a full disk,
no recovered run under clock skew).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from instances import Instances
from scenarios import broker_restarts, clock_skew, disk_full, network_faults

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.slow, pytest.mark.xdist_group("faults")]


@pytest.fixture
def services(fault_services: Instances) -> Instances:
    return fault_services


async def test_broker_killed_three_times_in_a_row_consumers_are_back_within_30_s_and_nothing_is_lost(
        services: Instances, tmp_path: Path) -> None:
    figures = await broker_restarts(services, tmp_path, rounds=3, automations=20, restore_within_s=30.0)
    print(figures.as_dict())
    figures.assert_invariants()
    assert all(figures.details["alive"]), figures.details
    assert figures.recovery_s < 30.0, figures.details


async def test_a_stalled_database_makes_readyz_503_and_the_engine_recovers_without_duplicates(
        services: Instances, tmp_path: Path) -> None:
    figures = await network_faults(services, tmp_path, link="postgres", kind="stall", fault_s=5.0,
                                   automations=20, window_s=10)
    print(figures.as_dict())
    figures.assert_invariants()
    assert figures.details["readyz_503_during_fault"] == [True], figures.details


async def test_database_and_broker_connections_reset_twice_lose_nothing(services: Instances, tmp_path: Path) -> None:
    figures = await network_faults(services, tmp_path, link="both", kind="reset", fault_s=1.0,
                                   automations=20, window_s=10, repeats=2)
    print(figures.as_dict())
    figures.assert_invariants()
    assert all(stats["resets"] >= 2 for stats in figures.details["proxy"]), figures.details


async def test_a_half_open_broker_link_is_torn_down_and_runs_finish_again_without_duplicates(
        services: Instances, tmp_path: Path) -> None:
    """The proxy swallows the AMQP link for 5 s, no FIN, no RST; the silent connection stays silent after.
    With aiormq's default 60 s heartbeat the engine held it for ~3 min and no run finished within 60 s.

    The window outlasts the recovery: the broker keeps handing messages to the silent connection's
    consumers until it misses two of their heartbeats (5 s each here), so the window outlasts that.

    It once stalled for good (3 full-size runs of 5 after other scenarios): the ticker's publish timed
    out, and the cancel of its change feed in its ``finally`` raised a CancelledError of a future the
    closing connection cancelled, which replaced the crash; the supervisor took it for a stop, and the
    ticker was gone while /readyz still said ready. Fixed in the bus (a stray cancel in a cleanup is a
    failed cleanup) and in the supervisor (an unasked CancelledError is a crash, restarted)."""
    figures = await network_faults(services, tmp_path, link="rabbitmq", kind="half_open", fault_s=5.0,
                                   automations=20, window_s=30)
    print(figures.as_dict())
    figures.assert_invariants()
    assert figures.details["proxy"][0]["silenced"] >= 1, figures.details
    assert figures.recovery_s < 30.0, figures.details


async def test_clocks_seconds_apart_fire_every_instant_once_and_take_no_live_lease(services: Instances) -> None:
    figures = await clock_skew(services, skew_s=4.0, automations=20, window_s=6)
    print(figures.as_dict())
    figures.assert_invariants()
    assert figures.details["recovered"] == 0, figures.details


async def test_a_full_disk_under_sqlite_refuses_new_work_with_507_and_keeps_what_was_committed(
        tmp_path: Path) -> None:
    figures = await disk_full(tmp_path)
    print(figures.as_dict())
    assert figures.details["refused_status"] == 507, figures.details
    error = figures.details["refused_body"]["error"]
    assert error["code"] == "storage_full", error
    assert "disk" in error["message"], error
    assert figures.details["kept_readable"], figures.details
    assert figures.details["kept_after"], figures.details
    assert figures.details["alive"], figures.details
