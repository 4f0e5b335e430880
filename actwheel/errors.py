"""Every error actwheel raises on purpose, in one hierarchy.

::

    ActwheelError
    ├── InvalidInput (ValueError)        bad input where it enters; names field, value, expected
    │   ├── InvalidTrigger               a trigger spec that cannot be parsed or evaluated
    │   ├── InvalidAction                an action config that fails validation (many errors at once)
    │   │   ├── DuplicateActionType      a type or alias that is already registered
    │   │   └── DestinationRefused       the webhook SSRF guard refused a URL
    │   ├── InvalidMessage               a bus message that is malformed, unknown or oversized
    │   ├── ExpressionError              an expression that cannot be compiled or evaluated
    │   └── SecretKeyMissing             secrets are stored but no key to decrypt them is configured
    ├── Unsupported                      a well-formed request actwheel refuses by design (HTTP 422)
    ├── StorageError                     anything the storage port raises
    │   ├── Conflict                     a unique key or an expected version did not hold
    │   │   └── IntegrityViolation       a database constraint refused a write
    │   ├── NotFound (LookupError)       the record does not exist
    │   └── StorageUnavailable           the database cannot be reached or timed out
    │       ├── TransientStorageError    rolled back for a reason a re-run can cure (deadlock, ...)
    │       └── StorageFull              the disk under the database is full: nothing new is written (HTTP 507)
    ├── BusError                         anything the bus port raises
    │   ├── Unroutable                   a published message matched no queue (mandatory)
    │   ├── PublishRefused               a target queue is full, or the broker nacked the message
    │   └── BusUnavailable               the broker cannot be reached
    ├── Unauthenticated                  no credential, or one that is malformed, unknown, revoked or expired
    │   └── MalformedKey (ValueError)    a token that is no well-formed key, refused before any IO
    ├── PermissionDenied                 the caller lacks a scope or a policy rule denies
    ├── Busy                             refused for now (at capacity, or the engine is stopping): retry (503)
    ├── ChannelFailed                    a notification channel could not deliver; says whether a retry may help
    ├── BridgeError                      ``actwheel mcp`` cannot reach or use the engine; the sentence says what to do
    └── NotAvailable                     a feature that is not built yet; never a silent no-op

:class:`Unsupported` is the client's fault (what was asked is refused for good), while
:class:`NotAvailable` is ours (the feature is missing and may come): a 4xx, not a 501.

Not errors, so outside the tree on purpose: the outcomes a bus handler raises to steer its
consumer, ``Retry`` (requeue, after a delay) and ``Reject`` (dead-letter now), in
:mod:`actwheel.bus.base`. They are no ``ActwheelError``, so an ``except ActwheelError`` in a
handler cannot swallow them.

Errors carry the offending id / field / value as attributes *and* in the message,
so a log line or an API answer is enough to fix the input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "TRANSIENT_CAUSES",
    "ActwheelError",
    "BridgeError",
    "BusError",
    "BusUnavailable",
    "Busy",
    "ChannelFailed",
    "Conflict",
    "DestinationRefused",
    "DuplicateActionType",
    "ExpressionError",
    "FieldError",
    "IntegrityViolation",
    "InvalidAction",
    "InvalidInput",
    "InvalidMessage",
    "InvalidTrigger",
    "MalformedKey",
    "NotAvailable",
    "NotFound",
    "PermissionDenied",
    "PublishRefused",
    "SecretKeyMissing",
    "StorageError",
    "StorageFull",
    "StorageUnavailable",
    "TransientStorageError",
    "Unauthenticated",
    "Unroutable",
    "Unsupported",
]

_MAX_VALUE_REPR = 120


def _short(value: Any) -> str:
    text = repr(value)
    if len(text) > _MAX_VALUE_REPR:
        text = text[: _MAX_VALUE_REPR - 3] + "..."
    return text


class ActwheelError(Exception):
    """Base of every error actwheel raises on purpose."""


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field: its dotted path, the value seen, what would be valid."""

    field: str
    value: Any
    expected: str

    def __str__(self) -> str:
        return f"{self.field}={_short(self.value)}: expected {self.expected}"

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "value": self.value, "expected": self.expected}


class InvalidInput(ActwheelError, ValueError):
    """Input refused where it entered.

    :ivar field: dotted path of the first offending field (``trigger.timezone``)
    :ivar value: the value that was refused
    :ivar expected: what would have been valid
    :ivar errors: every problem found, when several were collected at once
    """

    def __init__(
        self,
        field: str,
        value: Any,
        expected: str,
        *,
        errors: Sequence[FieldError] | None = None,
    ) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        self.errors: tuple[FieldError, ...] = tuple(errors or (FieldError(field, value, expected),))
        super().__init__("; ".join(str(e) for e in self.errors))

    @classmethod
    def collect(cls, errors: Sequence[FieldError]) -> InvalidInput:
        """Build one error that reports every problem in ``errors`` (at least one)."""
        if not errors:
            raise ValueError("collect() needs at least one FieldError")
        first = errors[0]
        return cls(first.field, first.value, first.expected, errors=errors)


class InvalidTrigger(InvalidInput):
    """A trigger spec that cannot be parsed, or that Quartz accepts but cannot evaluate."""


class InvalidAction(InvalidInput):
    """An action type or config that fails validation."""


class DuplicateActionType(InvalidAction):
    """A type or alias that is already registered (field ``type`` or ``alias``)."""


class DestinationRefused(InvalidAction):
    """The SSRF guard refused a URL (field ``url``), naming the address and why."""


class InvalidMessage(InvalidInput):
    """A bus message that is malformed, of an unknown type, or too large."""


class ExpressionError(InvalidInput):
    """An expression that cannot be compiled or evaluated; names the expression and the problem."""


class SecretKeyMissing(InvalidInput):
    """Secrets are stored but no key to decrypt them is configured: the host must not start."""


class Unsupported(ActwheelError):
    """A well-formed request that actwheel refuses by design, so asking again will not help.

    Not :class:`InvalidInput` (the value is valid on its own; the combination is refused) and
    not :class:`NotAvailable` (nothing is missing that may be built later).

    :ivar field: dotted path of the field that asks for the unsupported thing
    :ivar value: the value that was refused
    :ivar expected: what is supported instead
    """

    def __init__(self, field: str, value: Any, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"{field}={_short(value)} is not supported: expected {expected}")


class StorageError(ActwheelError):
    """Anything the storage port raises; driver errors never cross the port."""


class Conflict(StorageError):
    """A unique key or an expected version did not hold.

    :ivar record: the kind of record (``automation``, ``run``, ...)
    :ivar key: the id or key that conflicted
    """

    def __init__(self, record: str, key: Any, detail: str = "") -> None:
        self.record = record
        self.key = key
        self.detail = detail
        suffix = f": {detail}" if detail else ""
        super().__init__(f"conflict on {record} {_short(key)}{suffix}")


class IntegrityViolation(Conflict):
    """A constraint refused a write.

    :ivar kind: ``unique``, ``foreign_key``, ``check`` or ``not_null``
    :ivar constraint: the constraint's name
    """

    def __init__(self, kind: str, constraint: str, detail: str = "") -> None:
        self.kind = kind
        self.constraint = constraint
        super().__init__("constraint", constraint, f"{kind} violation{': ' + detail if detail else ''}")


class NotFound(StorageError, LookupError):
    """The record does not exist.

    :ivar record: the kind of record
    :ivar key: the id that was looked up
    """

    def __init__(self, record: str, key: Any) -> None:
        self.record = record
        self.key = key
        super().__init__(f"{record} {_short(key)} not found")


class StorageUnavailable(StorageError):
    """The database cannot be reached, or an operation timed out."""


#: The causes a :class:`TransientStorageError` names.
TRANSIENT_CAUSES = frozenset({"deadlock", "serialization", "connection_lost"})


class TransientStorageError(StorageUnavailable):
    """The database rolled the transaction back for a reason that running it again can cure.

    :ivar cause: ``deadlock``, ``serialization`` or ``connection_lost`` (before COMMIT)
    """

    def __init__(self, cause: str, detail: str) -> None:
        if cause not in TRANSIENT_CAUSES:
            raise ValueError(f"unknown transient cause {cause!r}")
        self.cause = cause
        super().__init__(f"transient {cause}, retry the transaction: {detail}")


class StorageFull(StorageUnavailable):
    """The disk under the database is full: the write was refused and rolled back, what was committed
    before stays. Frees up when an operator makes room (HTTP 507, ``"code": "storage_full"``).

    :ivar dialect: ``sqlite`` or ``postgres``
    """

    def __init__(self, dialect: str, detail: str) -> None:
        self.dialect = dialect
        super().__init__(f"storage full: the disk under the {dialect} database is full, nothing new can be "
                         f"written until space is freed ({detail})")


class BusError(ActwheelError):
    """Anything the bus port raises."""


class Unroutable(BusError):
    """A message published as mandatory matched no queue.

    :ivar exchange: the exchange it was published to
    :ivar routing_key: its routing key
    """

    def __init__(self, exchange: str, routing_key: str) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        super().__init__(f"message to {exchange!r} with routing key {routing_key!r} is unroutable")


class PublishRefused(BusError):
    """The broker refused a message: a queue it routes to is full, or the broker nacked it.

    :ivar exchange: the exchange it was published to
    :ivar routing_key: its routing key
    :ivar reason: what the bus knows about why
    """

    def __init__(self, exchange: str, routing_key: str, reason: str) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.reason = reason
        super().__init__(f"message to {exchange!r} with routing key {routing_key!r} refused: {reason}")


class BusUnavailable(BusError):
    """The broker cannot be reached."""


class Unauthenticated(ActwheelError):
    """No credential, or one that is malformed, unknown, revoked, expired, or whose principal is banned.

    The message never holds the credential; the HTTP face answers 401 with
    ``WWW-Authenticate: Bearer realm="actwheel"`` (and ``error="invalid_token"`` when one was sent).

    :ivar token_sent: a credential was presented (it was bad), as opposed to none at all
    :ivar key_id: the key's public id, when the credential parsed that far
    """

    def __init__(self, reason: str, *, token_sent: bool, key_id: str | None = None) -> None:
        self.reason = reason
        self.token_sent = token_sent
        self.key_id = key_id
        super().__init__(reason if key_id is None else f"{reason} (key {key_id})")


class MalformedKey(Unauthenticated, ValueError):
    """A presented token is not a well-formed actwheel key (its shape or checksum is wrong).

    The message names the part that failed and the token's length, never the token itself: a key
    pasted into the wrong header must not end up in a log line.

    :ivar part: ``prefix``, ``id``, ``secret`` or ``checksum``
    :ivar length: the presented token's length
    """

    def __init__(self, part: str, length: int, expected: int) -> None:
        self.part = part
        self.length = length
        super().__init__(f"malformed API key: bad {part} (token of {length} characters, expected {expected})",
                         token_sent=True)


class PermissionDenied(ActwheelError):
    """The caller lacks a scope, or a policy rule denies the action.

    :ivar subject: who asked
    :ivar action: what was asked
    :ivar missing: scopes that were needed and not held
    """

    def __init__(self, subject: str, action: str, missing: Sequence[str] = (), reason: str = "") -> None:
        self.subject = subject
        self.action = action
        self.missing = tuple(missing)
        self.reason = reason
        parts = [f"{subject!r} may not {action!r}"]
        if self.missing:
            parts.append(f"missing scopes: {', '.join(self.missing)}")
        if reason:
            parts.append(reason)
        super().__init__("; ".join(parts))


class Busy(ActwheelError):
    """Refused for now, not for good: the instance is at a capacity limit or stopping; retry shortly.

    :ivar what: what was refused
    :ivar why: the limit or the state, in words
    """

    def __init__(self, what: str, why: str) -> None:
        self.what = what
        self.why = why
        super().__init__(f"{what}: {why}")


class ChannelFailed(ActwheelError):
    """A notification channel could not deliver (raised by ``NotificationChannel.send``).

    :ivar retryable: whether trying again may help
    :ivar details: what the channel learned (a status, a response), shown with the failed result
    """

    def __init__(self, message: str, *, retryable: bool, details: Mapping[str, Any] | None = None) -> None:
        self.retryable = retryable
        self.details = dict(details or {})
        super().__init__(message)


class BridgeError(ActwheelError):
    """The stdio bridge (``actwheel mcp``) cannot serve: the message says why and what to do.

    :ivar url: the engine's base URL
    """

    def __init__(self, url: str, message: str) -> None:
        super().__init__(message)
        self.url = url


class NotAvailable(ActwheelError):
    """A feature that is not built yet. Searchable: ``actwheel.NotAvailable``.

    :ivar feature: the feature that was asked for
    """

    def __init__(self, feature: str, hint: str = "") -> None:
        self.feature = feature
        suffix = f" ({hint})" if hint else ""
        super().__init__(f"actwheel.NotAvailable: {feature} is not available yet{suffix}")
