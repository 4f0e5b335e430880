"""structlog set-up: JSON lines when stderr is not a terminal, readable lines when it is.

Actors bind ``run_id``, ``automation_id`` and ``correlation_id`` on their loggers;
values that look like secrets are masked by :func:`_mask_secrets` before rendering.

The libraries' own records (stdlib :mod:`logging`: aio-pika, aiormq, asyncpg, uvicorn, httpx, the MCP
SDK) are rendered as the same lines by one root handler, at WARNING and above (everything at
``DEBUG``), with any URL's password masked: one format on stderr, and a library that logs a broker
URL does not leak its password.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import orjson
import structlog

from actwheel.errors import InvalidInput
from actwheel.redact import redact_url

__all__ = ["configure_logging", "get_logger"]

_SECRET_KEYS = ("password", "secret", "token", "authorization", "api_key", "apikey", "signature")


def _mask_secrets(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if any(part in key.lower() for part in _SECRET_KEYS):
            event[key] = "***"
    return event


#: A URL with credentials inside a library's message (``scheme://user:password@host...``).
_URL_WITH_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/@'\"]*:[^\s'\"]*@[^\s'\"]+")


def _redact_urls(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A stdlib record's message with every credentialed URL's password masked."""
    message = event.get("event")
    if isinstance(message, str) and "://" in message:
        event["event"] = _URL_WITH_CREDENTIALS.sub(lambda m: redact_url(m.group(0)), message)
    return event


def _orjson_dumps(obj: Any, default: Any = None) -> str:
    return orjson.dumps(obj, default=default or str).decode()


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def configure_logging(level: str = "INFO", *, json: bool | None = None) -> None:
    """Configure structlog once for the process (idempotent).

    :raises InvalidInput: ``level`` is not one of :data:`LEVELS`
    """
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise InvalidInput("log_level", level, "one of " + ", ".join(LEVELS))
    json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = (
        structlog.processors.JSONRenderer(serializer=_orjson_dumps)
        if json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _mask_secrets,
    ]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            *shared,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    _route_library_logs(level.upper(), shared, renderer)


def _route_library_logs(level: str, shared: list[Any], renderer: Any) -> None:
    """One root handler rendering stdlib records as the engine's own lines (replacing the one a
    previous call installed, and any a library installed before: the process's logging is ours)."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared, _redact_urls],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if level == "DEBUG" else max(logging.WARNING, logging.getLevelName(level)))


def get_logger(name: str, **bound: Any) -> Any:
    """A structlog logger named ``name`` with ``bound`` key-values."""
    # Initial values keep the proxy lazy: it resolves against the configuration at first use,
    # so module-level loggers honour configure_logging() called later.
    return structlog.get_logger(name, logger_name=name, **bound)
