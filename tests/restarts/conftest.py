"""Service restart tests: they stop and restart the shared dev RabbitMQ and PostgreSQL, so they are
marked ``restart`` and ``tests/conftest.py`` runs them after every other test. ``tests/engine``
holds the harness they reuse."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
