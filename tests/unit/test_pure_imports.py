"""Pure packages load no IO drivers: importing them in a fresh interpreter proves it."""

from __future__ import annotations

import subprocess
import sys

import pytest

_DRIVERS = ("aio_pika", "aiormq", "asyncpg", "aiosqlite", "httpx")


def _loaded_drivers(module: str) -> list[str]:
    """The driver modules a fresh interpreter has loaded after ``import module``."""
    code = (f"import {module}, sys; "
            f"print(','.join(m for m in {_DRIVERS!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    return [name for name in result.stdout.strip().split(",") if name]


@pytest.mark.parametrize("module", ["actwheel.triggers", "actwheel.topics", "actwheel.redact", "actwheel.backoff"])
def test_a_pure_module_imports_no_driver(module: str) -> None:
    assert _loaded_drivers(module) == []
