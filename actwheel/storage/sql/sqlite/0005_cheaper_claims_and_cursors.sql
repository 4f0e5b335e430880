-- runs: the three status-keyed partial indexes give way to one index of the open runs
-- (finished_at IS NULL), keyed by automation; see the PostgreSQL migration of the same number.
-- A claim changes none of its columns, so it no longer moves an index entry (SQLite updates an
-- index only when a column of its key or its WHERE changes); the overlap check reads the open
-- runs of an automation instead of its whole history; sweeps read what is in flight.
-- (The due buckets of the PostgreSQL migration are for its HOT updates: SQLite has no use for them.)
UPDATE runs SET finished_at = NULL
WHERE status IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING') AND finished_at IS NOT NULL;
UPDATE runs SET finished_at = updated_at
WHERE status NOT IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING') AND finished_at IS NULL;
DROP INDEX runs_pending;
DROP INDEX runs_leased;
DROP INDEX runs_retry_wait;
CREATE INDEX runs_open ON runs (automation_id) WHERE finished_at IS NULL;
