"""Real services for tests: PostgreSQL and RabbitMQ started by ``ops/dev-services start``.

Use::

    from services import postgres_dsn, rabbitmq_url, isolated_postgres_url

- :func:`postgres_dsn` / :func:`rabbitmq_url` return the service URL (env overrides
  ``ACTWHEEL_TEST_DATABASE_URL`` / ``ACTWHEEL_TEST_BROKER_URL``, else this checkout's
  dev-services URLs from ``.devdata/services.env`` — ports differ per checkout when several
  share a machine — else the default ports). The first call per session probes the service; when it is unreachable the
  test is *skipped* with a loud reason on a dev machine and *fails* when ``CI`` is set.
- :func:`isolated_postgres_url` is an async context manager yielding a URL whose
  ``search_path`` is a fresh schema, dropped afterwards; the ``postgres_url`` fixture
  wraps it for one test.

``tests/`` is on ``sys.path`` because pytest imports ``tests/conftest.py`` in its
default (prepend) import mode, so ``import services`` works from any test module.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

__all__ = [
    "DEFAULT_BROKER_URL",
    "DEFAULT_DATABASE_URL",
    "isolated_postgres_url",
    "postgres_dsn",
    "postgres_url",
    "rabbitmq_url",
    "require_service",
    "services_env",
]

DEFAULT_DATABASE_URL = "postgresql://actwheel:actwheel@127.0.0.1:54329/actwheel"
DEFAULT_BROKER_URL = "amqp://actwheel:actwheel@127.0.0.1:56720/"
_PROBE_TIMEOUT_S = 2.0

#: service name -> None when reachable, else the reason it is not (probed once per session).
_probed: dict[str, str | None] = {}


def services_env(devdata: Path | None = None) -> dict[str, str]:
    """What ``ops/dev-services start`` wrote for this checkout (``KEY=value`` lines of
    ``$ACTWHEEL_DEVDATA/services.env``, default ``.devdata/``); empty when it has not run here."""
    folder = devdata or Path(os.environ.get("ACTWHEEL_DEVDATA") or Path(__file__).resolve().parents[1] / ".devdata")
    try:
        text = (folder / "services.env").read_text(encoding="utf-8")
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def _url(env_var: str, default: str) -> str:
    return os.environ.get(env_var) or services_env().get(env_var) or default


def postgres_dsn() -> str:
    """The test PostgreSQL URL; skips (dev) or fails (CI) the calling test when unreachable."""
    url = _url("ACTWHEEL_TEST_DATABASE_URL", DEFAULT_DATABASE_URL)
    require_service("PostgreSQL", url, "ACTWHEEL_TEST_DATABASE_URL")
    return url


def rabbitmq_url() -> str:
    """The test RabbitMQ URL; skips (dev) or fails (CI) the calling test when unreachable."""
    url = _url("ACTWHEEL_TEST_BROKER_URL", DEFAULT_BROKER_URL)
    require_service("RabbitMQ", url, "ACTWHEEL_TEST_BROKER_URL")
    return url


def require_service(name: str, url: str, env_var: str) -> None:
    """Probe ``url`` once per session; skip loudly when unreachable, or fail under ``CI``."""
    if name not in _probed:
        _probed[name] = _tcp_probe(url)
    reason = _probed[name]
    if reason is None:
        return
    message = (
        f"!!! {name} UNREACHABLE at {_redact(url)} ({reason}) !!! "
        f"start it with `ops/dev-services start`, or point {env_var} at one"
    )
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _tcp_probe(url: str) -> str | None:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (5432 if parts.scheme.startswith("postgres") else 5672)
    try:
        with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT_S):
            return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


def with_search_path(url: str, schema: str) -> str:
    """``url`` with ``search_path=schema`` as a query parameter (asyncpg passes it as a server setting)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "search_path"]
    query.append(("search_path", schema))
    return urlunsplit(parts._replace(query=urlencode(query)))


@asynccontextmanager
async def isolated_postgres_url(prefix: str = "t") -> AsyncIterator[str]:
    """Yield a PostgreSQL URL bound to a fresh, empty schema; drop the schema afterwards."""
    import asyncpg  # tests may import a driver; the product code above storage/ may not

    base = postgres_dsn()
    schema = f"{prefix}_{uuid.uuid4().hex[:16]}"
    conn = await asyncpg.connect(base, timeout=10)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        yield with_search_path(base, schema)
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close(timeout=10)


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    """A PostgreSQL URL on a fresh schema of its own for this one test."""
    async with isolated_postgres_url() as url:
        yield url
