"""``actwheel keys create|list|revoke|rotate``: API keys, straight on the database.

A new key (``create``, ``rotate``) is printed once, alone on one line of stdout, so that
``TOKEN=$(actwheel keys create …)`` captures exactly the key; what was done goes to stderr. Nothing
else ever prints a key or its hash: ``list`` shows public ids, names, scopes and expiry only.
The commands act as :data:`~actwheel.commands.users.CLI_CALLER` (see :mod:`actwheel.commands.users`
for why, and for the exit codes).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

from actwheel.clock import Clock
from actwheel.commands.users import CLI_CALLER, add_database_option, comma_list, run_on_store, table
from actwheel.service.identity import KeyService, MintedKey
from actwheel.storage import Store
from actwheel.storage.records import ApiKey

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "keys", help="create, list, revoke and rotate API keys (a new key is printed once, on stdout)")
    sub = parser.add_subparsers(dest="keys_command", metavar="SUBCOMMAND", required=True)

    create = sub.add_parser("create", help="mint a key; prints it once, alone, on stdout")
    create.add_argument("--principal", required=True,
                        help="the user that owns the key (an agent's keys are its user's: add --agent)")
    create.add_argument("--name", required=True, help="what the key is for (at most 100 characters)")
    create.add_argument("--scopes", required=True, type=comma_list,
                        help="comma-separated; the key never grants more than its principal's ceiling")
    create.add_argument("--agent", help="bind the key to this agent of the principal")
    create.add_argument("--expires-in-s", type=int, help="lifetime in seconds (default 90 days)")
    create.set_defaults(handler=_create)

    listing = sub.add_parser("list", help="a principal's live keys: ids, names, scopes, expiry (never the key)")
    listing.add_argument("--principal", required=True)
    listing.set_defaults(handler=_list)

    revoke = sub.add_parser("revoke", help="revoke a key: refused everywhere within a second")
    revoke.add_argument("key_id", help="the key's public id (the part after awk_, as `keys list` shows it)")
    revoke.set_defaults(handler=_revoke)

    rotate = sub.add_parser("rotate", help="a new key like this one, printed once; the old one expires after the grace")
    rotate.add_argument("key_id")
    rotate.add_argument("--grace-s", type=int, help="how long the old key keeps working (default a day)")
    rotate.set_defaults(handler=_rotate)

    for child in (create, listing, revoke, rotate):
        add_database_option(child)


def _create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"principal_id": args.principal, "name": args.name, "scopes": args.scopes}
    if args.agent is not None:
        body["agent_id"] = args.agent
    if args.expires_in_s is not None:
        body["expires_in_s"] = args.expires_in_s

    async def use(store: Store, clock: Clock) -> MintedKey:
        return await KeyService(store=store, clock=clock).create(CLI_CALLER, body)

    code, minted = run_on_store("keys create", args.database, use)
    if minted is not None:
        _show_once(minted, "created")
    return code


def _list(args: argparse.Namespace) -> int:
    async def use(store: Store, clock: Clock) -> list[ApiKey]:
        return await KeyService(store=store, clock=clock).list(CLI_CALLER, principal_id=args.principal)

    code, keys = run_on_store("keys list", args.database, use)
    if keys is not None:
        print(table(("id", "name", "scopes", "agent", "expires_at", "last_used_at", "replaced_by"),
                    [(k.id, k.name, ",".join(k.scopes) or "-", k.agent_id or "-", _when(k.expires_at),
                      _when(k.last_used_at), k.replaced_by or "-") for k in keys]))
    return code


def _revoke(args: argparse.Namespace) -> int:
    async def use(store: Store, clock: Clock) -> ApiKey:
        return await KeyService(store=store, clock=clock).revoke(CLI_CALLER, args.key_id)

    code, revoked = run_on_store("keys revoke", args.database, use)
    if revoked is not None:
        print(f"revoked key {revoked.id} ({revoked.name!r} of {revoked.owner_id}); "
              "every instance refuses it within a second")
    return code


def _rotate(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {} if args.grace_s is None else {"grace_s": args.grace_s}

    async def use(store: Store, clock: Clock) -> MintedKey:
        return await KeyService(store=store, clock=clock).rotate(CLI_CALLER, args.key_id, body)

    code, minted = run_on_store("keys rotate", args.database, use)
    if minted is not None:
        _show_once(minted, f"rotated {args.key_id} into")
    return code


def _show_once(minted: MintedKey, done: str) -> None:
    key = minted.key
    agent = f", agent {key.agent_id}" if key.agent_id else ""
    print(f"{done} key {key.id} ({key.name!r} of {key.owner_id}{agent}, scopes {','.join(key.scopes) or '-'}, "
          f"expires {_when(key.expires_at)}); it is shown once, on stdout: store it now", file=sys.stderr)
    sys.stdout.write(minted.token + "\n")
    sys.stdout.flush()


def _when(at: datetime | None) -> str:
    return "-" if at is None else at.isoformat(timespec="seconds")
