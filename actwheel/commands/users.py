"""``actwheel users create|list|ban|unban|set-scopes``: principals, straight on the database.

The identity commands open the store themselves (``--database``, like ``actwheel run``) and call the
same use cases as ``/v1/principals`` and ``/v1/keys`` (:mod:`actwheel.service.identity`) as
:data:`CLI_CALLER`: whoever can open the database already holds every row, so the command line is an
administrator. Its changes are security events with ``actor_id = "cli"``.

Exit codes: 0 done; 2 bad input (the message names the field, as the API's 422 does); 1 anything
else (not found, a conflict, the database unreachable).

stdout carries only what a command prints (a new key, alone, for ``keys create|rotate``): logging is
configured at WARNING on stderr, so the use cases' own log lines (a ``security_event`` for every change,
at INFO, which a running engine logs) never reach it. The change itself is stored as a security event,
and the command says on stderr what it did.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from actwheel.clock import Clock, SystemClock
from actwheel.commands.migrate import ENV_DATABASE_URL, database_url
from actwheel.errors import ActwheelError, InvalidInput, StorageUnavailable
from actwheel.logs import configure_logging
from actwheel.service.caller import Caller
from actwheel.service.identity import PrincipalService
from actwheel.storage import DEFAULT_DATABASE_URL, Store, open_store
from actwheel.storage.records import Principal, PrincipalKind

__all__ = ["CLI_CALLER", "add_database_option", "comma_list", "register", "run_on_store", "table"]

#: Who the command line is: an administrator holding ``*`` (it can open the database anyway).
CLI_CALLER = Caller("admin", frozenset({"*"}), "cli", "user")

T = TypeVar("T")
_PAGE = 500
_KINDS = ", ".join(k.value for k in PrincipalKind)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser("users", help="create, list, ban and unban principals")
    sub = parser.add_subparsers(dest="users_command", metavar="SUBCOMMAND", required=True)

    create = sub.add_parser("create", help="create a user, an agent (--parent) or a service")
    create.add_argument("id", help="the principal's id (at most 100 printable characters)")
    create.add_argument("--kind", required=True, help=f"one of {_KINDS}")
    create.add_argument("--scopes", required=True, type=comma_list,
                        help="its ceiling, comma-separated (automation:read,run:read or automation:*)")
    create.add_argument("--parent", help="an agent's user (agents only)")
    create.add_argument("--on-behalf-of", type=comma_list, default=None,
                        help="a service's owners it may act for, comma-separated ('*': any)")
    create.add_argument("--display-name", help="a human-readable name")
    create.set_defaults(handler=_create)

    listing = sub.add_parser("list", help="list principals (id, kind, status, scopes, parent)")
    listing.add_argument("--kind", help=f"only this kind: {_KINDS}")
    listing.set_defaults(handler=_list)

    ban = sub.add_parser("ban", help="ban a principal: its keys stop working within a second")
    ban.add_argument("id")
    ban.add_argument("--reason", required=True, help="why (at most 500 characters; kept on the principal)")
    ban.set_defaults(handler=_ban)

    unban = sub.add_parser("unban", help="lift a ban")
    unban.add_argument("id")
    unban.set_defaults(handler=_unban)

    scopes = sub.add_parser("set-scopes", help="replace a principal's ceiling (lowering it bites at the next run)")
    scopes.add_argument("id")
    scopes.add_argument("--scopes", required=True, type=comma_list, help="the new ceiling, comma-separated")
    scopes.set_defaults(handler=_set_scopes)

    for child in (create, listing, ban, unban, scopes):
        add_database_option(child)


def add_database_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database",
        help=f"postgresql://… or sqlite:///path (env {ENV_DATABASE_URL}); default: {DEFAULT_DATABASE_URL}")


def comma_list(value: str) -> list[str]:
    """``"a, b,"`` → ``["a", "b"]`` (an argparse ``type``)."""
    return [part.strip() for part in value.split(",") if part.strip()]


def run_on_store(command: str, url: str | None, use: Callable[[Store, Clock], Awaitable[T]]) -> tuple[int, T | None]:
    """Open the store of ``url`` (``--database`` or its default), ``await use(store, clock)``, stop the store.

    :returns: (exit code, what ``use`` returned or ``None``); every error is reported on stderr,
        prefixed with ``actwheel <command>:``
    """
    configure_logging("WARNING")  # stderr: stdout is the key's alone
    clock = SystemClock()

    async def session() -> T:
        store = open_store(database_url(url), clock=clock)
        await store.start()
        try:
            return await use(store, clock)
        finally:
            await store.stop()

    try:
        return 0, asyncio.run(session())
    except InvalidInput as exc:
        _fail(command, str(exc))
        return 2, None
    except StorageUnavailable as exc:
        _fail(command, f"database unavailable: {exc}")
        return 1, None
    except ActwheelError as exc:
        _fail(command, str(exc))
        return 1, None


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns, two spaces apart, a header line first."""
    cells = [list(columns), *[list(row) for row in rows]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells)


def _fail(command: str, message: str) -> None:
    print(f"actwheel {command}: {message}", file=sys.stderr)


def _create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"id": args.id, "kind": args.kind, "scopes": args.scopes}
    if args.parent is not None:
        body["parent_id"] = args.parent
    if args.on_behalf_of is not None:
        body["on_behalf_of"] = args.on_behalf_of
    if args.display_name is not None:
        body["display_name"] = args.display_name

    async def use(store: Store, clock: Clock) -> Principal:
        return await PrincipalService(store=store).create(CLI_CALLER, body)

    code, created = run_on_store("users create", args.database, use)
    if created is not None:
        print(f"created {_line(created)}")
    return code


def _list(args: argparse.Namespace) -> int:
    try:
        kind = None if args.kind is None else PrincipalKind(args.kind)
    except ValueError:
        _fail("users list", str(InvalidInput("kind", args.kind, f"one of {_KINDS}")))
        return 2

    async def use(store: Store, clock: Clock) -> list[Principal]:
        service, found, after = PrincipalService(store=store), [], None
        while True:
            page = await service.list(CLI_CALLER, kind=kind, after_id=after, limit=_PAGE)
            found.extend(page)
            if len(page) < _PAGE:
                return found
            after = page[-1].id

    code, principals = run_on_store("users list", args.database, use)
    if principals is not None:
        print(table(("id", "kind", "status", "scopes", "parent", "on_behalf_of", "display_name"),
                    [(p.id, p.kind.value, p.status.value, ",".join(p.scopes) or "-", p.parent_id or "-",
                      ",".join(p.on_behalf_of) or "-", p.display_name or "-") for p in principals]))
    return code


def _ban(args: argparse.Namespace) -> int:
    async def use(store: Store, clock: Clock) -> Principal:
        return await PrincipalService(store=store).ban(CLI_CALLER, args.id, args.reason)

    code, banned = run_on_store("users ban", args.database, use)
    if banned is not None:
        print(f"banned {_line(banned)}: {banned.ban_reason}")
    return code


def _unban(args: argparse.Namespace) -> int:
    async def use(store: Store, clock: Clock) -> Principal:
        return await PrincipalService(store=store).unban(CLI_CALLER, args.id)

    code, unbanned = run_on_store("users unban", args.database, use)
    if unbanned is not None:
        print(f"unbanned {_line(unbanned)}")
    return code


def _set_scopes(args: argparse.Namespace) -> int:
    async def use(store: Store, clock: Clock) -> Principal:
        return await PrincipalService(store=store).set_scopes(CLI_CALLER, args.id, args.scopes)

    code, changed = run_on_store("users set-scopes", args.database, use)
    if changed is not None:
        print(f"set {_line(changed)}")
    return code


def _line(p: Principal) -> str:
    parent = f", parent {p.parent_id}" if p.parent_id else ""
    return f"{p.kind.value} {p.id} ({p.status.value}, scopes {','.join(p.scopes) or '-'}{parent})"
