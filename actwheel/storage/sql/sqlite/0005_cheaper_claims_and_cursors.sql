-- runs: the three status-keyed partial indexes give way to one index of the open runs
-- (finished_at IS NULL), keyed by automation; see the PostgreSQL migration of the same number.
-- A claim changes none of its columns, so it no longer moves an index entry (SQLite updates an
-- index only when a column of its key or its WHERE changes); the overlap check reads the open
-- runs of an automation instead of its whole history; sweeps read what is in flight.
-- The index is only right if finished_at is NULL exactly for the open statuses: a CHECK makes it
-- so, and SQLite adds a CHECK only by rebuilding the table (as 0004 does); rows written before
-- are made to agree first. (The due buckets and json columns of the PostgreSQL migration serve
-- its HOT updates and its parser: SQLite has no use for them.)
UPDATE runs SET finished_at = NULL
WHERE status IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING') AND finished_at IS NOT NULL;
UPDATE runs SET finished_at = updated_at
WHERE status NOT IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING') AND finished_at IS NULL;
CREATE TABLE runs_rebuilt (
    id                text PRIMARY KEY,
    automation_id     text,
    dedupe_key        text NOT NULL,
    scheduled_for     integer,
    origin            text NOT NULL CHECK (origin IN ('schedule', 'manual', 'event', 'request', 'retry')),
    status            text NOT NULL CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED',
                          'RETRY_WAIT', 'UNKNOWN', 'SKIPPED', 'CANCELED', 'COMPENSATING', 'ROLLED_BACK', 'DEAD')),
    reason            text,
    attempt           integer NOT NULL DEFAULT 0,
    not_before        integer,
    lease_owner       text,
    lease_expires_at  integer,
    lease_epoch       integer NOT NULL DEFAULT 0,
    action_type       text NOT NULL,
    action_config     text NOT NULL,
    policy            text NOT NULL,
    owner_id          text NOT NULL,
    context           text NOT NULL DEFAULT '{}',
    result            text,
    error             text,
    created_at        integer NOT NULL,
    updated_at        integer NOT NULL,
    started_at        integer,
    finished_at       integer,
    -- Invariant 1: at most one run per (automation, dedupe key).
    CONSTRAINT runs_automation_dedupe UNIQUE (dedupe_key, automation_id),
    -- A leased run has an owner and an expiry; nothing else has either.
    CONSTRAINT runs_lease_shape CHECK (
        (status IN ('RUNNING', 'COMPENSATING')) = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT runs_retry_wait_has_not_before CHECK (status <> 'RETRY_WAIT' OR not_before IS NOT NULL),
    -- Open (in flight) exactly when not finished: runs_open relies on it.
    CONSTRAINT runs_finished_shape CHECK (
        (finished_at IS NULL) = (status IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING')))
);
INSERT INTO runs_rebuilt SELECT * FROM runs;
DROP TABLE runs;
ALTER TABLE runs_rebuilt RENAME TO runs;
-- Ad hoc requests (no automation): unique per owner and idempotency key.
CREATE UNIQUE INDEX runs_adhoc_dedupe ON runs (owner_id, dedupe_key) WHERE automation_id IS NULL;
CREATE INDEX runs_automation_time ON runs (automation_id, created_at);
CREATE INDEX runs_open ON runs (automation_id) WHERE finished_at IS NULL;
