-- actwheel schema, SQLite. Instants are integer microseconds since the Unix epoch (UTC), JSON is text.
-- The constraints here are the invariants; see docs/storage.md.

CREATE TABLE automations (
    id             text PRIMARY KEY,
    owner_id       text NOT NULL,
    name           text NOT NULL,
    labels         text NOT NULL DEFAULT '{}',
    session_id     text,
    agent_id       text,
    "trigger"      text NOT NULL,
    action_type    text NOT NULL,
    action_config  text NOT NULL,
    policy         text NOT NULL DEFAULT '{}',
    enabled        integer NOT NULL,
    status         text NOT NULL CHECK (status IN ('ACTIVE', 'PAUSED', 'COMPLETED')),
    durable        integer NOT NULL DEFAULT 1,
    next_run_at    integer,
    end_at         integer,
    version        integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    "partition"    integer NOT NULL CHECK ("partition" >= 0),
    created_at     integer NOT NULL,
    updated_at     integer NOT NULL
);
-- The due query: only enabled ACTIVE automations with a cursor are ever due.
CREATE INDEX automations_due ON automations ("partition", next_run_at)
    WHERE enabled = 1 AND status = 'ACTIVE' AND next_run_at IS NOT NULL;
CREATE INDEX automations_due_any ON automations (next_run_at)
    WHERE enabled = 1 AND status = 'ACTIVE' AND next_run_at IS NOT NULL;
CREATE INDEX automations_owner ON automations (owner_id);
CREATE INDEX automations_session ON automations (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX automations_agent ON automations (agent_id) WHERE agent_id IS NOT NULL;

CREATE TABLE runs (
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
    CONSTRAINT runs_automation_dedupe UNIQUE (automation_id, dedupe_key),
    -- A leased run has an owner and an expiry; nothing else has either.
    CONSTRAINT runs_lease_shape CHECK (
        (status IN ('RUNNING', 'COMPENSATING')) = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT runs_retry_wait_has_not_before CHECK (status <> 'RETRY_WAIT' OR not_before IS NOT NULL)
);
-- Ad hoc requests (no automation): unique per owner and idempotency key.
CREATE UNIQUE INDEX runs_adhoc_dedupe ON runs (owner_id, dedupe_key) WHERE automation_id IS NULL;
CREATE INDEX runs_automation_time ON runs (automation_id, created_at);
CREATE INDEX runs_pending ON runs (updated_at) WHERE status = 'PENDING';
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE status IN ('RUNNING', 'COMPENSATING');
CREATE INDEX runs_retry_wait ON runs (not_before) WHERE status = 'RETRY_WAIT';

CREATE TABLE outbox (
    id            integer PRIMARY KEY AUTOINCREMENT,
    exchange      text NOT NULL,
    routing_key   text NOT NULL,
    body          blob NOT NULL,
    headers       text NOT NULL DEFAULT '{}',
    created_at    integer NOT NULL,
    published_at  integer
);
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;

CREATE TABLE audit (
    seq            integer PRIMARY KEY AUTOINCREMENT,
    event_id       text NOT NULL UNIQUE,
    run_id         text,
    automation_id  text,
    phase          text NOT NULL,
    actor          text NOT NULL,
    details        text NOT NULL DEFAULT '{}',
    occurred_at    integer NOT NULL
);
CREATE INDEX audit_run ON audit (run_id, seq) WHERE run_id IS NOT NULL;
CREATE INDEX audit_automation ON audit (automation_id, seq) WHERE automation_id IS NOT NULL;

CREATE TABLE object_types (
    name        text PRIMARY KEY,
    properties  text NOT NULL DEFAULT '{}',
    required    text NOT NULL DEFAULT '[]',
    version     integer NOT NULL DEFAULT 1,
    created_at  integer NOT NULL,
    updated_at  integer NOT NULL
);

CREATE TABLE objects (
    id           text PRIMARY KEY,
    object_type  text NOT NULL REFERENCES object_types (name),
    properties   text NOT NULL DEFAULT '{}',
    version      integer NOT NULL DEFAULT 1,
    deleted      integer NOT NULL DEFAULT 0,
    created_by   text,
    created_at   integer NOT NULL,
    updated_at   integer NOT NULL
);
CREATE INDEX objects_type ON objects (object_type, created_at);

CREATE TABLE relations (
    id             text PRIMARY KEY,
    relation_type  text NOT NULL,
    source_id      text NOT NULL REFERENCES objects (id),
    target_id      text NOT NULL REFERENCES objects (id),
    properties     text NOT NULL DEFAULT '{}',
    created_by     text,
    created_at     integer NOT NULL
);
CREATE INDEX relations_source ON relations (source_id);
CREATE INDEX relations_target ON relations (target_id);

CREATE TABLE principals (
    id            text PRIMARY KEY,
    display_name  text NOT NULL DEFAULT '',
    status        text NOT NULL CHECK (status IN ('ACTIVE', 'BANNED')),
    version       integer NOT NULL DEFAULT 1,
    created_at    integer NOT NULL,
    updated_at    integer NOT NULL
);

CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    owner_id    text NOT NULL REFERENCES principals (id),
    key_hash    text NOT NULL UNIQUE,
    scopes      text NOT NULL DEFAULT '[]',
    name        text NOT NULL DEFAULT '',
    revoked     integer NOT NULL DEFAULT 0,
    created_at  integer NOT NULL,
    revoked_at  integer
);
CREATE INDEX api_keys_owner ON api_keys (owner_id);

CREATE TABLE secrets (
    id          text PRIMARY KEY,
    owner_id    text NOT NULL,
    name        text NOT NULL,
    ciphertext  blob NOT NULL,
    version     integer NOT NULL DEFAULT 1,
    created_at  integer NOT NULL,
    rotated_at  integer,
    CONSTRAINT secrets_owner_name UNIQUE (owner_id, name)
);

CREATE TABLE dead_letters (
    id          text PRIMARY KEY,
    source      text NOT NULL,
    ref_id      text,
    reason      text NOT NULL,
    payload     text NOT NULL DEFAULT '{}',
    created_at  integer NOT NULL
);
CREATE INDEX dead_letters_source ON dead_letters (source, created_at);

CREATE TABLE partition_leases (
    "partition"  integer PRIMARY KEY CHECK ("partition" >= 0),
    owner        text NOT NULL,
    expires_at   integer NOT NULL,
    epoch        integer NOT NULL DEFAULT 1
);
