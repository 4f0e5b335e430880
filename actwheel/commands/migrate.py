"""``actwheel migrate [--database URL]``: apply pending schema migrations and say which."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any, TextIO

from actwheel.errors import ActwheelError, InvalidInput, StorageUnavailable
from actwheel.storage import DEFAULT_DATABASE_URL, open_store, redact_url

__all__ = ["database_url", "migrate", "register"]

ENV_DATABASE_URL = "ACTWHEEL_DATABASE_URL"


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "migrate", help="apply pending database migrations (safe to run concurrently and repeatedly)"
    )
    parser.add_argument(
        "--database",
        help=f"postgresql://… or sqlite:///path (env {ENV_DATABASE_URL}); default: {DEFAULT_DATABASE_URL}",
    )
    parser.set_defaults(handler=_run)


def database_url(cli_value: str | None, environ: dict[str, str] | None = None) -> str:
    """The URL to use: ``--database``, else ``$ACTWHEEL_DATABASE_URL``, else the embedded default."""
    env = os.environ if environ is None else environ
    return cli_value or env.get(ENV_DATABASE_URL) or DEFAULT_DATABASE_URL


async def migrate(url: str, out: TextIO) -> list[str]:
    """Apply pending migrations on ``url``, printing one line per migration applied."""
    store = open_store(url, migrate=False)
    await store.start()
    try:
        applied = await store.migrate()
    finally:
        await store.stop()
    for name in applied:
        print(f"applied {name}", file=out)
    print(f"{redact_url(url)}: {len(applied)} migration(s) applied, schema up to date", file=out)
    return applied


def _run(args: argparse.Namespace) -> int:
    url = database_url(args.database)
    try:
        asyncio.run(migrate(url, sys.stdout))
    except InvalidInput as exc:
        print(f"actwheel migrate: {exc}", file=sys.stderr)
        return 2
    except StorageUnavailable as exc:
        print(f"actwheel migrate: database unavailable: {exc}", file=sys.stderr)
        return 1
    except ActwheelError as exc:
        print(f"actwheel migrate: {exc}", file=sys.stderr)
        return 1
    return 0
