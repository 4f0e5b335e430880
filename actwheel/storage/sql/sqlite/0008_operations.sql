-- The ops dashboard (issue 13): automation change history, instance heartbeats, and the indexes
-- that bound its reads by time. See the PostgreSQL migration of the same number.
CREATE TABLE automation_history (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    id             text NOT NULL UNIQUE,
    automation_id  text NOT NULL,
    owner_id       text NOT NULL,
    change         text NOT NULL CHECK (change IN ('created', 'updated', 'enabled', 'disabled', 'deleted')),
    actor_id       text NOT NULL,
    key_id         text,
    at             integer NOT NULL,
    "before"       text,
    "after"        text
);
CREATE INDEX automation_history_automation ON automation_history (automation_id, seq);

CREATE TABLE instances (
    id            text PRIMARY KEY,
    roles         text NOT NULL DEFAULT '[]',
    actor_states  text NOT NULL DEFAULT '{}',
    started_at    integer NOT NULL,
    seen_at       integer NOT NULL
);

CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_owner_created ON runs (owner_id, created_at, id);
