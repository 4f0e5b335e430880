"""The ``actwheel`` command line: one dispatcher, one module per subcommand."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

__all__ = ["build_parser", "main"]

#: Subcommand modules under ``actwheel.commands``; each has ``register(subparsers)``.
COMMANDS: tuple[str, ...] = ("run", "preview", "migrate", "actions", "users", "keys", "mcp")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actwheel",
        description="Scheduling and action-execution engine.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        import_module(f"actwheel.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
