"""Preview digests and run-now confirmations: the use cases behind the MCP server's rules 1 and 4.

- **Preview digest**: an HMAC-SHA256, keyed by the server, over a trigger's canonical form
  (``parse(trigger).to_spec()`` as sorted, compact JSON). ``preview_trigger`` hands it out; a create, or
  an update that changes the trigger, must bring back the digest of exactly that trigger. The key is a
  random one stored once in the database (``mcp_server_keys``), so a digest made on one instance
  verifies on every other.
- **Confirmation token**: where the client cannot ask its user, the first ``run_automation_now``
  answers a single-use token; only its sha256 is stored, bound to the owner, the key, the automation
  and its version, valid :data:`CONFIRMATION_TTL` of the engine's clock. Redeeming it runs the
  automation with the dedupe key ``manual:<confirmation id>``, so a retried call answers the same
  run and never makes a second one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson

from actwheel.actions.registry import ActionRegistry
from actwheel.clock import Clock
from actwheel.errors import InvalidInput, InvalidTrigger
from actwheel.service.authorize import require
from actwheel.service.automations import WRITE, AutomationService
from actwheel.service.caller import Caller
from actwheel.service.payload import trigger_errors
from actwheel.storage.base import Store
from actwheel.storage.records import Automation, NewConfirmation, Run
from actwheel.triggers import parse

__all__ = ["CONFIRMATION_TTL", "ConfirmationService", "IssuedConfirmation", "canonical_trigger"]

#: How long a run-now confirmation token stays usable.
CONFIRMATION_TTL = timedelta(minutes=2)
_DIGEST_KEY = "preview_digest"
_REQUEST_STATE_KEY = "request_state"
_TOKEN_PREFIX = "awc_"


def canonical_trigger(trigger: Any) -> bytes:
    """The canonical form a preview digest covers: the normalised spec as sorted, compact JSON.

    :raises InvalidInput: naming ``trigger`` or a ``trigger.…`` field
    """
    if not isinstance(trigger, Mapping):
        raise InvalidInput("trigger", trigger, "a trigger spec object")
    try:
        spec = parse(trigger).to_spec()
    except InvalidTrigger as exc:
        raise trigger_errors(exc) from None
    return orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)


@dataclass(frozen=True, slots=True)
class IssuedConfirmation:
    """A confirmation as issued: the only time its token exists outside the client."""

    id: str
    expires_at: datetime
    token: str = field(repr=False)


class ConfirmationService:
    def __init__(self, *, store: Store, clock: Clock, registry: ActionRegistry,
                 automations: AutomationService) -> None:
        self._store = store
        self._clock = clock
        self._registry = registry
        self._automations = automations
        self._key: bytes | None = None

    # --- preview digests -------------------------------------------------------------

    async def preview_digest(self, trigger: Any) -> str:
        """The digest of ``trigger``'s canonical form.

        :raises InvalidInput: the trigger does not parse
        """
        return hmac.new(await self._digest_key(), canonical_trigger(trigger), hashlib.sha256).hexdigest()

    async def digest_matches(self, trigger: Any, digest: Any) -> bool:
        """Whether ``digest`` is the preview digest of exactly ``trigger`` (constant time).

        :raises InvalidInput: the trigger does not parse
        """
        expected = await self.preview_digest(trigger)
        return isinstance(digest, str) and hmac.compare_digest(expected, digest)

    async def _digest_key(self) -> bytes:
        if self._key is None:
            async with self._store.transaction() as tx:
                self._key = await tx.confirmations.server_key(_DIGEST_KEY, os.urandom(32))
        return self._key

    async def request_state_key(self) -> bytes:
        """The key every instance seals the MCP ``requestState`` with (stored once per database)."""
        async with self._store.transaction() as tx:
            return await tx.confirmations.server_key(_REQUEST_STATE_KEY, os.urandom(32))

    # --- run-now confirmations ------------------------------------------------------

    async def issue(self, caller: Caller, automation: Automation) -> IssuedConfirmation:
        """A single-use token to run ``automation`` (as the caller read it) once, within the TTL.

        Checks the run-now rule first (``automation:write`` and the action's scopes), so no token is
        handed out for a run that would be refused.

        :raises PermissionDenied: naming every missing scope
        """
        self.require_run(caller, automation)
        confirmation_id = uuid.uuid4().hex
        token = f"{_TOKEN_PREFIX}{confirmation_id}_{secrets.token_urlsafe(32)}"
        now = self._clock.now()
        async with self._store.transaction() as tx:
            stored = await tx.confirmations.create(NewConfirmation(
                id=confirmation_id, token_hash=_hash(token), owner_id=caller.owner_id, key_id=caller.key_id or "",
                automation_id=automation.id, automation_version=automation.version, created_at=now,
                expires_at=now + CONFIRMATION_TTL))
        return IssuedConfirmation(stored.id, stored.expires_at, token)

    async def run_confirmed(self, caller: Caller, automation_id: str, token: Any) -> Run:
        """Redeem ``token``: run the automation once (dedupe key ``manual:<confirmation id>``).

        A token already redeemed answers its run again, whatever the time: a retried call never makes
        a second run.

        :raises InvalidInput: naming ``confirmation_token``: unknown, for another owner, key or
            automation, expired, or the automation changed since (each says to ask again)
        :raises PermissionDenied: the run-now scopes are missing (checked again by the run itself)
        :raises NotFound: the automation is not the caller's
        """
        confirmation = None
        if isinstance(token, str) and token.startswith(_TOKEN_PREFIX):
            async with self._store.transaction() as tx:
                confirmation = await tx.confirmations.by_hash(_hash(token))
        if confirmation is None or (confirmation.owner_id, confirmation.key_id, confirmation.automation_id) != (
                caller.owner_id, caller.key_id or "", automation_id):
            raise _refused("<not a confirmation token this credential was given for this automation>")
        if confirmation.run_id is not None:
            async with self._store.transaction() as tx:
                return await tx.runs.get(confirmation.run_id, owner_id=caller.owner_id)
        if self._clock.now() > confirmation.expires_at:
            raise _refused(f"<expired at {confirmation.expires_at.isoformat()}>")
        current = await self._automations.get_to_run(caller, automation_id)
        if current.version != confirmation.automation_version:
            raise _refused(f"<issued for version {confirmation.automation_version}; the automation is now at "
                           f"version {current.version}>")
        run = await self._automations.run_now(caller, automation_id, dedupe_id=confirmation.id)
        async with self._store.transaction() as tx:
            await tx.confirmations.mark_used(confirmation.id, at=self._clock.now(), run_id=run.id)
        return run

    def require_run(self, caller: Caller, automation: Automation) -> None:
        """The run-now rule: ``automation:write`` and the action's scopes.

        :raises PermissionDenied: naming every missing scope
        """
        needed = self._registry.get(automation.action_type).required_scopes_for(automation.action_config)
        require(caller, "automation.run", [WRITE, *needed])


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _refused(why: str) -> InvalidInput:
    return InvalidInput("confirmation_token", why, "the token of this automation's confirmation_required answer, "
                        "used by the same credential within 2 minutes: call run_automation_now without one to get "
                        "a new confirmation and ask the user again")
