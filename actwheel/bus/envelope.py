"""The envelope every bus message travels in, and its one codec.

On the wire an envelope is a JSON object (UTF-8, ``content_type: application/json``)::

    {"id": "0192...", "type": "run.succeeded", "occurred_at": "2030-01-01T09:00:00.000123Z",
     "source": "actwheel/pid-42", "correlation_id": null, "data": {...}}

carried with the AMQP header ``x-schema-version: 1``. Unknown top-level keys are
ignored (forward compatibility); a breaking change bumps the schema version.
The message *types* and their ``data`` are the engine's (``actwheel.messages``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from actwheel.clock import Clock, SystemClock
from actwheel.errors import InvalidMessage

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_MAX_BYTES",
    "SCHEMA_VERSION",
    "SCHEMA_VERSION_HEADER",
    "Envelope",
    "decode",
    "encode",
    "new_id",
]

CONTENT_TYPE = "application/json"
SCHEMA_VERSION = 1
SCHEMA_VERSION_HEADER = "x-schema-version"
DEFAULT_MAX_BYTES = 1024 * 1024

_TYPE = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")
_MAX_TEXT = 255
_SYSTEM_CLOCK = SystemClock()


def new_id(clock: Clock | None = None) -> str:
    """A UUIDv7 as 32 hex digits: time-ordered (48-bit ms from ``clock``), 74 random bits."""
    ms = (clock or _SYSTEM_CLOCK).now_ms() & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms << 80) | (0x7 << 76) | ((rand >> 62) & 0xFFF) << 64 | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return f"{value:032x}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Envelope:
    """One message on the bus.

    :ivar id: unique per message (UUIDv7 hex when actwheel made it); consumers dedupe by it
    :ivar type: the message type, dotted words (``run.succeeded``)
    :ivar occurred_at: when it happened, timezone-aware UTC
    :ivar source: who published it (``actwheel/<instance id>`` or a foreign service's name)
    :ivar correlation_id: ties a chain of messages together, ``None`` when there is none
    :ivar data: the type's payload, a JSON object
    """

    id: str
    type: str
    occurred_at: datetime
    source: str
    correlation_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_text("id", self.id)
        _check_type(self.type)
        _check_text("source", self.source)
        if self.correlation_id is not None:
            _check_text("correlation_id", self.correlation_id)
        if not isinstance(self.data, dict):
            raise InvalidMessage("data", self.data, "a JSON object")
        object.__setattr__(self, "occurred_at", _utc("occurred_at", self.occurred_at))

    @classmethod
    def new(
        cls,
        *,
        type: str,
        data: dict[str, Any],
        source: str,
        correlation_id: str | None = None,
        clock: Clock | None = None,
    ) -> Envelope:
        """A fresh envelope with a new id, stamped with ``clock``'s now (the system clock by default)."""
        clock = clock or _SYSTEM_CLOCK
        return cls(
            id=new_id(clock),
            type=type,
            occurred_at=clock.now(),
            source=source,
            correlation_id=correlation_id,
            data=data,
        )


def encode(envelope: Envelope) -> bytes:
    """The envelope as UTF-8 JSON bytes.

    :raises InvalidMessage: ``data`` holds something JSON cannot carry
    """
    try:
        return orjson.dumps(
            {
                "id": envelope.id,
                "type": envelope.type,
                "occurred_at": envelope.occurred_at,
                "source": envelope.source,
                "correlation_id": envelope.correlation_id,
                "data": envelope.data,
            },
            option=orjson.OPT_UTC_Z,
        )
    except TypeError as exc:
        raise InvalidMessage("data", envelope.data, f"JSON-serialisable values ({exc})") from None


def decode(body: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Envelope:
    """Parse an envelope from ``body``.

    :raises InvalidMessage: ``field="body.size"`` when oversized, ``"body"`` when not a JSON object;
        otherwise the first missing or ill-typed field
    """
    if len(body) > max_bytes:
        raise InvalidMessage("body.size", len(body), f"at most {max_bytes} bytes")
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidMessage("body", _preview(body), "a UTF-8 JSON object") from None
    if not isinstance(raw, dict):
        raise InvalidMessage("body", _preview(body), "a JSON object")
    return _from_mapping(raw)


def _from_mapping(raw: dict[str, Any]) -> Envelope:
    occurred_at = raw.get("occurred_at")
    if not isinstance(occurred_at, str):
        raise InvalidMessage("occurred_at", occurred_at, "an ISO-8601 instant with an offset")
    if "data" not in raw:
        raise InvalidMessage("data", None, "a JSON object")
    return Envelope(
        id=raw.get("id"),  # type: ignore[arg-type]  # checked in __post_init__
        type=raw.get("type"),  # type: ignore[arg-type]
        occurred_at=_parse_instant(occurred_at),
        source=raw.get("source"),  # type: ignore[arg-type]
        correlation_id=raw.get("correlation_id"),
        data=raw.get("data"),  # type: ignore[arg-type]
    )


def _parse_instant(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InvalidMessage("occurred_at", text, "an ISO-8601 instant with an offset") from None


def _utc(field_name: str, value: Any) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidMessage(field_name, value, "a timezone-aware datetime")
    return value.astimezone(UTC)


def _check_text(field_name: str, value: Any) -> None:
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
        raise InvalidMessage(field_name, value, f"a non-empty string of at most {_MAX_TEXT} characters")


def _check_type(value: Any) -> None:
    if not isinstance(value, str) or len(value) > _MAX_TEXT or not _TYPE.match(value):
        raise InvalidMessage("type", value, "dotted words of [A-Za-z0-9_-] (e.g. 'run.succeeded')")


def _preview(body: bytes) -> str:
    return body[:80].decode("utf-8", errors="replace")
