"""``actwheel preview`` (placeholder: being built)."""

from __future__ import annotations

import argparse
from typing import Any

from actwheel.errors import NotAvailable


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser("preview", help="print next fire times")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    raise NotAvailable("actwheel preview")
