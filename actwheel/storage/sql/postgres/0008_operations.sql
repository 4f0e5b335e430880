-- The ops dashboard (issue 13): who changed an automation, which instances are alive, and the
-- indexes that bound its reads by time.
--
-- automation_history: one row per create, update, enable, disable or delete, written in the
-- transaction of the change; before/after hold the changed fields (action configs hold secret
-- references, never values). Kept when the automation is deleted, filtered by owner_id in SQL.
CREATE TABLE automation_history (
    seq            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id             text NOT NULL UNIQUE,
    automation_id  text NOT NULL,
    owner_id       text NOT NULL,
    change         text NOT NULL CHECK (change IN ('created', 'updated', 'enabled', 'disabled', 'deleted')),
    actor_id       text NOT NULL,
    key_id         text,
    at             timestamptz NOT NULL DEFAULT now(),
    "before"       jsonb,
    "after"        jsonb
);
CREATE INDEX automation_history_automation ON automation_history (automation_id, seq);

-- instances: each engine's heartbeat (roles, actor states), upserted every few seconds.
CREATE TABLE instances (
    id            text PRIMARY KEY,
    roles         jsonb NOT NULL DEFAULT '[]',
    actor_states  jsonb NOT NULL DEFAULT '{}',
    started_at    timestamptz NOT NULL,
    seen_at       timestamptz NOT NULL DEFAULT now()
);

-- runs by creation time (the stats window, an admin's listing newest first, its cursor) and per
-- owner by creation time (an owner's listing). A claim changes none of these columns, so it stays a
-- HOT update; a finish moves finished_at (runs_open's predicate) and was never HOT: it now writes
-- one entry more in each of these two indexes, as does each new run.
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_owner_created ON runs (owner_id, created_at, id);
