-- Invariant 1's unique constraint, keyed (dedupe_key, automation_id) instead of (automation_id,
-- dedupe_key); see the PostgreSQL migration of the same number. A burst of fires for one instant
-- shares its dedupe key, so new index entries land together instead of on one page per
-- automation: fewer pages written per commit, a cost that no longer grows with the history.
-- SQLite cannot change a table constraint in place: the table is rebuilt (the documented
-- twelve-step procedure; nothing references runs by foreign key).
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
    CONSTRAINT runs_retry_wait_has_not_before CHECK (status <> 'RETRY_WAIT' OR not_before IS NOT NULL)
);
INSERT INTO runs_rebuilt SELECT * FROM runs;
DROP TABLE runs;
ALTER TABLE runs_rebuilt RENAME TO runs;
-- Ad hoc requests (no automation): unique per owner and idempotency key.
CREATE UNIQUE INDEX runs_adhoc_dedupe ON runs (owner_id, dedupe_key) WHERE automation_id IS NULL;
CREATE INDEX runs_automation_time ON runs (automation_id, created_at);
CREATE INDEX runs_pending ON runs (updated_at) WHERE status = 'PENDING';
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE status IN ('RUNNING', 'COMPENSATING');
CREATE INDEX runs_retry_wait ON runs (not_before) WHERE status = 'RETRY_WAIT';
