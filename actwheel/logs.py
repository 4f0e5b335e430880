"""structlog set-up: JSON lines when stderr is not a terminal, readable lines when it is.

Actors bind ``run_id``, ``automation_id`` and ``correlation_id`` on their loggers;
values that look like secrets are masked by :func:`_mask_secrets` before rendering.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import orjson
import structlog

from actwheel.errors import InvalidInput

__all__ = ["configure_logging", "get_logger"]

_SECRET_KEYS = ("password", "secret", "token", "authorization", "api_key", "apikey", "signature")


def _mask_secrets(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if any(part in key.lower() for part in _SECRET_KEYS):
            event[key] = "***"
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
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _mask_secrets,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str, **bound: Any) -> Any:
    """A structlog logger named ``name`` with ``bound`` key-values."""
    # Initial values keep the proxy lazy: it resolves against the configuration at first use,
    # so module-level loggers honour configure_logging() called later.
    return structlog.get_logger(name, logger_name=name, **bound)
