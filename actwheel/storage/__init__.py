"""actwheel.storage: the durable truth. One port (:mod:`.base`), two adapters.

``open_store(url)`` picks the adapter from the URL scheme::

    sqlite:///actwheel.db        a file relative to the working directory
    sqlite:////var/lib/aw.db     an absolute path
    sqlite:///:memory:           a private in-memory database (tests)
    postgresql://user:pw@host:5432/db[?search_path=schema]

Nothing outside this package imports a database driver.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from actwheel.clock import Clock
from actwheel.errors import InvalidInput, TransientStorageError
from actwheel.redact import redact_url
from actwheel.storage.base import (
    ApiKeyRepository,
    AuditRepository,
    AutomationRepository,
    DeadLetterRepository,
    IdempotencyRepository,
    OntologyRepository,
    OutboxRepository,
    PartitionLeaseRepository,
    PrincipalRepository,
    RunRepository,
    SecurityEventRepository,
    Store,
    StoredSecretRepository,
    Transaction,
)
from actwheel.storage.retry import in_transaction

__all__ = [
    "DEFAULT_DATABASE_URL",
    "ApiKeyRepository",
    "AuditRepository",
    "AutomationRepository",
    "DeadLetterRepository",
    "IdempotencyRepository",
    "OntologyRepository",
    "OutboxRepository",
    "PartitionLeaseRepository",
    "PrincipalRepository",
    "RunRepository",
    "SecurityEventRepository",
    "Store",
    "StoredSecretRepository",
    "Transaction",
    "TransientStorageError",
    "in_transaction",
    "open_store",
    "redact_url",
]

#: The embedded default: a SQLite file in the working directory.
DEFAULT_DATABASE_URL = "sqlite:///actwheel.db"

_EXPECTED = "a sqlite:///path, sqlite:///:memory: or postgresql://user:password@host/db URL"


def open_store(url: str, *, clock: Clock | None = None, partitions: int = 64, migrate: bool = True) -> Store:
    """A store for ``url`` (not started: ``await store.start()``).

    :param clock: the clock of the SQLite store (PostgreSQL always uses the database clock)
    :param partitions: N in ``partition = hash(id) mod N`` for new automations
    :param migrate: whether ``start()`` applies pending migrations (``actwheel migrate`` says no,
        to call :meth:`Store.migrate` itself and report)
    :raises InvalidInput: ``database`` is not a URL of a known scheme
    """
    if not isinstance(url, str):
        raise InvalidInput("database", url, _EXPECTED)
    if isinstance(partitions, bool) or not isinstance(partitions, int) or not 1 <= partitions <= 4096:
        raise InvalidInput("partitions", partitions, "an integer from 1 to 4096")
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        return _sqlite(url, clock, partitions, migrate)
    if scheme in ("postgresql", "postgres"):
        from actwheel.storage.postgres import PostgresStore

        return PostgresStore(url, partitions=partitions, migrate_on_start=migrate)
    raise InvalidInput("database", redact_url(url), _EXPECTED)


def _sqlite(url: str, clock: Clock | None, partitions: int, migrate: bool) -> Store:
    from actwheel.storage.sqlite import SqliteStore

    if not url.startswith("sqlite:///") or len(url) <= len("sqlite:///"):
        raise InvalidInput("database", url, _EXPECTED)
    return SqliteStore(url[len("sqlite:///") :], clock=clock, partitions=partitions, migrate_on_start=migrate)


