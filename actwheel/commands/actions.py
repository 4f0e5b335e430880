"""``actwheel actions list``: the registered action types and their capability matrix."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from actwheel.actions.defaults import default_registry
from actwheel.actions.executors.function import FunctionRegistry
from actwheel.actions.registry import ActionRegistry

__all__ = ["capability_rows", "register"]

_COLUMNS = ("type", "aliases", "idempotency", "scopes", "compensable", "dry_run", "timeout", "parallel_safe")


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser("actions", help="list action types")
    sub = parser.add_subparsers(dest="actions_command", metavar="SUBCOMMAND")
    listing = sub.add_parser("list", help="print the capability matrix of every action type")
    listing.add_argument("--json", action="store_true", help="print JSON (with config schemas)")
    listing.set_defaults(handler=_list)
    parser.set_defaults(handler=_list, json=False)


def capability_rows(registry: ActionRegistry) -> list[dict[str, Any]]:
    """One row per type: the matrix columns, plus display name, description and config schema."""
    return [
        {
            **definition.describe(),
            "scopes": sorted(definition.required_scopes),
            "compensable": definition.capabilities.compensable,
            "dry_run": definition.capabilities.dry_run,
            "timeout": definition.capabilities.timeout_control,
            "parallel_safe": definition.capabilities.parallel_safe,
        }
        for definition in sorted(registry, key=lambda d: d.type)
    ]


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "-"
    if isinstance(value, list):
        return ",".join(value) or "-"
    return str(value)


def _table(rows: list[dict[str, Any]]) -> str:
    cells = [list(_COLUMNS)] + [[_cell(row[c]) for c in _COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells)


def _list(args: argparse.Namespace) -> int:
    rows = capability_rows(default_registry(functions=FunctionRegistry.from_env()))
    if args.json:
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(_table(rows) + "\n")
    return 0
