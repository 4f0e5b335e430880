"""``actwheel actions`` (placeholder: being built)."""

from __future__ import annotations

import argparse
from typing import Any

from actwheel.errors import NotAvailable


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser("actions", help="(not available yet)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    raise NotAvailable("actwheel actions")
