"""Fault scenarios (issue 14): they kill, stall and fill their own throwaway servers
(:mod:`instances`), never the shared dev services, so they run beside the other tests: in the
``faults`` xdist group, which ``make pytest`` (``--dist loadgroup``) keeps on one worker, so that the
session's one pair of servers below is booted once. ``tests/engine`` holds the process harness."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from instances import Instances  # after the sys.path entries above


@pytest.fixture(scope="session")
def fault_services() -> Iterator[Instances]:
    """One throwaway PostgreSQL + RabbitMQ pair for every fault module (~18 s to boot, once).
    A scenario may kill or stall them; each one leaves them running for the next."""
    with Instances.create() as started:
        yield started
