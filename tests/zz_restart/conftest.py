"""Service restart tests run last (this folder sorts after every other): they stop and restart the
shared dev RabbitMQ and PostgreSQL. ``tests/engine`` holds the harness they reuse."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
