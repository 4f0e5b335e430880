"""The sealed ``requestState`` of run now's elicitation: one key for every instance, and the round it names.

In the 2026-07-28 era the SDK asks the user between two calls of the tool: the first answers
``input_required`` with a sealed ``requestState``, the client asks the user and calls again with the
answer and that state. Two promises of rule 4 depend on how the state is sealed:

- **Any instance.** The second call may land on another instance (behind a load balancer, or
  ``actwheel run --workers N``). :class:`RoundCodec` seals with a key stored once per database
  (``mcp_server_keys``, as the preview digest's), loaded by :class:`~actwheel.mcp.http.McpEndpoint`
  before it serves; the SDK's default key lives in one process only.
- **A retried round is the same run.** A client that sends its final round twice (a lost response)
  must not start two runs. Each sealed token is unique (the SDK stamps it when it seals), and the
  client echoes it unchanged, so the digest of the token the answer came with names the round: run
  now passes it as the run's dedupe id (``manual:elicit_<digest>``), and a replay answers the run the
  first call created. :func:`answered_round` gives it to the tool for the state it was handed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from contextvars import ContextVar

from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState, RequestStateSecurity

__all__ = ["RoundCodec", "answered_round"]

#: The last token this context unsealed: (its plaintext state, the token's digest).
_unsealed: ContextVar[tuple[str, str] | None] = ContextVar("actwheel_mcp_unsealed_round", default=None)


class RoundCodec:
    """AES-256-GCM (the SDK's codec) under keys given at :meth:`use`, recording each round it unseals.

    Until :meth:`use` has given it keys it refuses to seal or unseal (the SDK then answers an
    internal error, or "Invalid or expired requestState"): a state sealed under a key no other
    instance knows would fail on the next round anyway.
    """

    def __init__(self, keys: Sequence[bytes] | None = None) -> None:
        self._codec = AESGCMRequestStateCodec(keys) if keys else None

    @classmethod
    def ephemeral(cls) -> RoundCodec:
        """A codec under a key of this process only (an in-process server, tests)."""
        return cls([os.urandom(32)])

    @property
    def ready(self) -> bool:
        return self._codec is not None

    def use(self, keys: Sequence[bytes]) -> None:
        """Seal under ``keys[0]`` from now on; unseal under any of them."""
        self._codec = AESGCMRequestStateCodec(keys)

    def security(self) -> RequestStateSecurity:
        """The SDK policy that seals through this codec (its default TTL, principal binding and audience)."""
        return RequestStateSecurity(codec=self)

    def seal(self, payload: bytes) -> str:
        if self._codec is None:
            raise RuntimeError("the MCP request-state key is not loaded yet (McpEndpoint.running loads it)")
        return self._codec.seal(payload)

    def unseal(self, token: str) -> bytes:
        if self._codec is None:
            raise InvalidRequestState("the MCP request-state key is not loaded yet")
        payload = self._codec.unseal(token)
        _unsealed.set((_inner_state(payload), hashlib.sha256(token.encode()).hexdigest()))
        return payload


def answered_round(request_state: str | None) -> str | None:
    """The digest of the sealed token ``request_state`` (the plaintext the tool was handed) came in,
    or ``None`` when the call carried no state (the handshake era asks the user mid-call)."""
    if request_state is None:
        return None
    unsealed = _unsealed.get()
    if unsealed is None or unsealed[0] != request_state:
        return None
    return unsealed[1]


def _inner_state(payload: bytes) -> str:
    """The plaintext state inside the SDK's claims envelope (``s``); empty when it is not there (the
    SDK refuses such an envelope right after, so no tool sees it)."""
    try:
        inner = json.loads(payload).get("s")
    except (ValueError, AttributeError):
        return ""
    return inner if isinstance(inner, str) else ""
