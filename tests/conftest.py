"""Shared fixtures and collection order. Service fixtures (PostgreSQL, RabbitMQ) live in tests/services.py.

Tests marked ``restart`` stop and restart the shared dev RabbitMQ and PostgreSQL, so they run
after every other test whatever their file names: a test sharing those services must never see
them go down under it. The sort is stable, so the order within each group is unchanged.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("restart") is not None)
