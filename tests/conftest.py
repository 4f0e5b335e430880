"""Shared fixtures and collection order. Service fixtures (PostgreSQL, RabbitMQ) live in tests/services.py.

``process_logging_restored`` is for a test that configures the process's logging (``actwheel run``,
``actwheel users|keys``, ``configure_logging`` itself).

Tests marked ``restart`` stop and restart the shared dev RabbitMQ and PostgreSQL, so they run
after every other test whatever their file names: a test sharing those services must never see
them go down under it. The sort is stable, so the order within each group is unchanged. Under
pytest-xdist (``make pytest`` runs the others on two workers) a selected ``restart`` test is refused:
it would take the services down under the other worker's tests.
"""

from __future__ import annotations

import asyncio
import logging
import os
import warnings
from collections.abc import Iterator

import pytest
import structlog
from pytest_asyncio import is_async_test


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("restart") is not None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Close the idle event loop pytest-asyncio (<1.4) leaves as the thread's current loop after an async
    test (its ``_provide_clean_event_loop`` finalizer), before a sync test. Otherwise a sync test calling
    ``asyncio.run`` (the CLI does) replaces and then unsets it, the unclosed loop is dropped, and the
    garbage collector reports it and its self-pipe sockets later, in whichever test is running then:
    ``ResourceWarning: unclosed event loop`` / ``unclosed <socket.socket ... family=1 ...>``, an error
    under filterwarnings. https://github.com/pytest-dev/pytest-asyncio/issues/724, fixed upstream in
    1.4.0a2 (pytest-dev/pytest-asyncio#1430); pytest-asyncio's next async test would close it anyway.

    First, a ``restart`` test under an xdist worker fails with the reason (see the module's docstring)."""
    if os.environ.get("PYTEST_XDIST_WORKER") and item.get_closest_marker("restart") is not None:
        pytest.fail('tests marked "restart" restart the shared services: run them without -n '
                    '(make pytest runs -n 2 -m "not restart", then -m restart alone)', pytrace=False)
    if is_async_test(item):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:  # no current loop (unset by asyncio.run): nothing left behind
            return
    if not loop.is_running() and not loop.is_closed():
        loop.close()


@pytest.fixture
def process_logging_restored() -> Iterator[None]:
    """For tests that configure the process's logging (``configure_logging``, ``actwheel run``, the identity
    commands): the next test gets structlog's defaults and the root logger back (its handler wrote to this
    test's stderr)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)
