-- The planner's event index reloads the enabled event automations every half minute (and at
-- start): a partial index of the event automations' ids, so that reload reads them alone and not
-- the whole table (query event_automations).
CREATE INDEX automation_specs_event ON automation_specs (id) WHERE ("trigger"->>'type') = 'event';

-- Identity and scopes (issue 11). A principal is a user, an agent that acts for one user
-- (parent_id), or a service on the bus; each carries its ceiling (scopes: no key of it may hold
-- more) and, for a service, the owners it may act for (on_behalf_of; ["*"] = any). A ban records
-- why, by whom and when, so that a person reading the row can tell.
ALTER TABLE principals
    ADD COLUMN kind text NOT NULL DEFAULT 'user' CHECK (kind IN ('user', 'agent', 'service')),
    ADD COLUMN parent_id text REFERENCES principals (id),
    ADD COLUMN scopes jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN on_behalf_of jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN ban_reason text,
    ADD COLUMN banned_by text,
    ADD COLUMN banned_at timestamptz,
    -- An agent acts for exactly one principal; a user or a service for itself.
    ADD CONSTRAINT principals_parent_shape CHECK ((kind = 'agent') = (parent_id IS NOT NULL));
CREATE INDEX principals_parent ON principals (parent_id) WHERE parent_id IS NOT NULL;

-- API keys: bound to one of the owner's agents (agent_id), expiring, last seen, and the key that
-- replaced this one on rotation (this one then lives on until its grace period ends).
ALTER TABLE api_keys
    ADD COLUMN agent_id text REFERENCES principals (id),
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN last_used_at timestamptz,
    ADD COLUMN replaced_by text;
CREATE INDEX api_keys_agent ON api_keys (agent_id) WHERE agent_id IS NOT NULL;

-- Who created an automation, and with which key: for the audit only. Authority is always the
-- owner's, checked again when each run is dispatched, never these columns. The view and its
-- insert trigger (migration 0003) carry them, appended after the columns of 0001.
ALTER TABLE automation_specs ADD COLUMN created_by text, ADD COLUMN created_by_key text;
CREATE OR REPLACE VIEW automations AS
SELECT a.id, a.owner_id, a.name, a.labels, a.session_id, a.agent_id, a."trigger", a.action_type, a.action_config,
       a.policy, s.enabled, s.status, a.durable, s.next_run_at, a.end_at, s.version, s."partition", a.created_at,
       a.updated_at, a.created_by, a.created_by_key
FROM automation_specs AS a JOIN automation_state AS s ON s.automation_id = a.id;

CREATE OR REPLACE FUNCTION automations_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO automation_specs (id, owner_id, name, labels, session_id, agent_id, "trigger", action_type,
        action_config, policy, durable, end_at, created_at, updated_at, created_by, created_by_key)
    VALUES (NEW.id, NEW.owner_id, NEW.name, coalesce(NEW.labels, '{}'), NEW.session_id, NEW.agent_id, NEW."trigger",
        NEW.action_type, NEW.action_config, coalesce(NEW.policy, '{}'), coalesce(NEW.durable, true), NEW.end_at,
        coalesce(NEW.created_at, now()), coalesce(NEW.updated_at, now()), NEW.created_by, NEW.created_by_key);
    INSERT INTO automation_state (automation_id, "partition", enabled, status, next_run_at, version)
    VALUES (NEW.id, NEW."partition", NEW.enabled, NEW.status, NEW.next_run_at, coalesce(NEW.version, 1));
    RETURN NEW;
END
$$;

-- What happened to identities (created, banned, key revoked, refused, ...), newest first. Ids,
-- kinds and a JSON detail only: never a key, a hash or a secret.
CREATE TABLE security_events (
    id            text PRIMARY KEY,
    occurred_at   timestamptz NOT NULL DEFAULT now(),
    kind          text NOT NULL,
    principal_id  text,
    key_id        text,
    actor_id      text,
    detail        jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX security_events_time ON security_events (occurred_at);
CREATE INDEX security_events_principal ON security_events (principal_id, occurred_at) WHERE principal_id IS NOT NULL;

-- Before this migration nothing bounded what an owner could do: every principal, and every owner
-- that had rows but no principal, keeps the ceiling it effectively had (["*"]) as a user. (The
-- bootstrap admin is the engine's to create at its first start, not this migration's.)
UPDATE principals SET scopes = '["*"]';
INSERT INTO principals (id, display_name, status, kind, scopes)
SELECT o.owner_id, o.owner_id, 'ACTIVE', 'user', '["*"]'
FROM (SELECT owner_id FROM automation_specs
      UNION SELECT owner_id FROM runs
      UNION SELECT owner_id FROM secrets
      UNION SELECT owner_id FROM api_keys) AS o
ON CONFLICT (id) DO NOTHING;
