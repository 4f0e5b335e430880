"""Fixtures for the dashboard tests (see :mod:`ui_support`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ui_support import UiWorld, build_world


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[UiWorld]:
    built = await build_world(tmp_path)
    try:
        yield built
    finally:
        await built.engine.control.stream.close()
        await built.engine.store.stop()
