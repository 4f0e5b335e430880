"""Fault scenarios (issue 14): they kill, stall and fill their own throwaway servers
(:mod:`instances`), never the shared dev services; marked ``restart`` so that ``tests/conftest.py``
runs them after every other test, as tests/restarts. ``tests/engine`` holds the process harness."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
