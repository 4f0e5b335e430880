"""The fixtures of tests/api/conftest.py, importable (pytest does not share conftest fixtures across
sibling folders)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_api_conftest", Path(__file__).resolve().parent.parent / "api" / "conftest.py")
assert _spec is not None
assert _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

db_url = _module.db_url
clock = _module.clock
store = _module.store
make_world = _module.make_world
