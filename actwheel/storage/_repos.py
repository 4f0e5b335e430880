"""The unit of work: :class:`SqlTransaction` assembles one transaction's repositories.

Each adapter supplies a :class:`~actwheel.storage._runner.SqlRunner` that runs the named
queries of its dialect (``sql/<dialect>/queries.sql``); the repositories check input, choose
the query and map rows to records. Each lives in a module of its own: ``_automations``,
``_runs``, ``_ontology``, ``_outbox``, ``_audit``, ``_identity`` (principals, API keys and
security events), ``_secrets``, ``_dead_letters``, ``_leases``, ``_idempotency``,
``_confirmations``, ``_retention``, ``_sessions`` and ``_operations``; the row mappers live
in ``_rows``.
"""

from __future__ import annotations

from datetime import datetime

from actwheel.storage._audit import SqlAudit
from actwheel.storage._automations import SqlAutomations
from actwheel.storage._confirmations import SqlConfirmations
from actwheel.storage._dead_letters import SqlDeadLetters
from actwheel.storage._idempotency import SqlIdempotency
from actwheel.storage._identity import SqlApiKeys, SqlPrincipals, SqlSecurityEvents
from actwheel.storage._leases import SqlPartitionLeases
from actwheel.storage._ontology import SqlOntology
from actwheel.storage._operations import SqlAutomationHistory, SqlInstances
from actwheel.storage._outbox import SqlOutbox
from actwheel.storage._retention import SqlRetention
from actwheel.storage._runner import SqlRunner
from actwheel.storage._runs import SqlRuns
from actwheel.storage._secrets import SqlSecrets
from actwheel.storage._sessions import SqlUiSessions
from actwheel.storage.base import Transaction

__all__ = ["SqlTransaction"]


class SqlTransaction(Transaction):
    """The repositories of one transaction, all sharing its :class:`SqlRunner`."""

    def __init__(self, sql: SqlRunner, *, partitions: int) -> None:
        self._sql = sql
        self.automations = SqlAutomations(sql, partitions)
        self.runs = SqlRuns(sql)
        self.outbox = SqlOutbox(sql)
        self.audit = SqlAudit(sql)
        self.ontology = SqlOntology(sql)
        self.principals = SqlPrincipals(sql)
        self.api_keys = SqlApiKeys(sql)
        self.security_events = SqlSecurityEvents(sql)
        self.secrets = SqlSecrets(sql)
        self.dead_letters = SqlDeadLetters(sql)
        self.partitions = SqlPartitionLeases(sql)
        self.idempotency = SqlIdempotency(sql)
        self.retention = SqlRetention(sql)
        self.confirmations = SqlConfirmations(sql)
        self.ui_sessions = SqlUiSessions(sql)
        self.automation_history = SqlAutomationHistory(sql)
        self.instances = SqlInstances(sql)

    @property
    def outbox_touched(self) -> bool:
        return self._sql.outbox_touched

    async def now(self) -> datetime:
        return await self._sql.now()
