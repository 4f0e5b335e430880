-- The planner's event index reloads the enabled event automations every half minute (and at
-- start): a partial index of the event automations' ids, so that reload reads them alone and not
-- the whole table (query event_automations; see the PostgreSQL migration of the same number).
CREATE INDEX automation_specs_event ON automation_specs (id) WHERE json_extract("trigger", '$.type') = 'event';

-- Identity and scopes (issue 11); see the PostgreSQL migration of the same number. SQLite adds
-- a column with its own CHECK (tested against the rows already there), so the agent-has-a-parent
-- rule rides on parent_id instead of a table constraint (which would need a rebuild).
ALTER TABLE principals ADD COLUMN kind text NOT NULL DEFAULT 'user' CHECK (kind IN ('user', 'agent', 'service'));
ALTER TABLE principals ADD COLUMN parent_id text REFERENCES principals (id)
    CONSTRAINT principals_parent_shape CHECK ((kind = 'agent') = (parent_id IS NOT NULL));
ALTER TABLE principals ADD COLUMN scopes text NOT NULL DEFAULT '[]';
ALTER TABLE principals ADD COLUMN on_behalf_of text NOT NULL DEFAULT '[]';
ALTER TABLE principals ADD COLUMN ban_reason text;
ALTER TABLE principals ADD COLUMN banned_by text;
ALTER TABLE principals ADD COLUMN banned_at integer;
CREATE INDEX principals_parent ON principals (parent_id) WHERE parent_id IS NOT NULL;

ALTER TABLE api_keys ADD COLUMN agent_id text REFERENCES principals (id);
ALTER TABLE api_keys ADD COLUMN expires_at integer;
ALTER TABLE api_keys ADD COLUMN last_used_at integer;
ALTER TABLE api_keys ADD COLUMN replaced_by text;
CREATE INDEX api_keys_agent ON api_keys (agent_id) WHERE agent_id IS NOT NULL;

-- Who created an automation, and with which key: for the audit only, never authority. The view
-- (and with it its insert trigger) is made again with them, after the columns of 0001.
DROP VIEW automations;
ALTER TABLE automation_specs ADD COLUMN created_by text;
ALTER TABLE automation_specs ADD COLUMN created_by_key text;
CREATE VIEW automations AS
SELECT a.id, a.owner_id, a.name, a.labels, a.session_id, a.agent_id, a."trigger", a.action_type, a.action_config,
       a.policy, s.enabled, s.status, a.durable, s.next_run_at, a.end_at, s.version, s."partition", a.created_at,
       a.updated_at, a.created_by, a.created_by_key
FROM automation_specs AS a JOIN automation_state AS s ON s.automation_id = a.id;

CREATE TRIGGER automations_insert INSTEAD OF INSERT ON automations
BEGIN
    INSERT INTO automation_specs (id, owner_id, name, labels, session_id, agent_id, "trigger", action_type,
        action_config, policy, durable, end_at, created_at, updated_at, created_by, created_by_key)
    VALUES (NEW.id, NEW.owner_id, NEW.name, coalesce(NEW.labels, '{}'), NEW.session_id, NEW.agent_id, NEW."trigger",
        NEW.action_type, NEW.action_config, coalesce(NEW.policy, '{}'), coalesce(NEW.durable, 1), NEW.end_at,
        NEW.created_at, NEW.updated_at, NEW.created_by, NEW.created_by_key);
    INSERT INTO automation_state (automation_id, "partition", enabled, status, next_run_at, version)
    VALUES (NEW.id, NEW."partition", NEW.enabled, NEW.status, NEW.next_run_at, coalesce(NEW.version, 1));
END;

-- Ids, kinds and a JSON detail only: never a key, a hash or a secret.
CREATE TABLE security_events (
    id            text PRIMARY KEY,
    occurred_at   integer NOT NULL,
    kind          text NOT NULL,
    principal_id  text,
    key_id        text,
    actor_id      text,
    detail        text NOT NULL DEFAULT '{}'
);
CREATE INDEX security_events_time ON security_events (occurred_at);
CREATE INDEX security_events_principal ON security_events (principal_id, occurred_at) WHERE principal_id IS NOT NULL;

-- Every principal, and every owner with rows but no principal, keeps the ceiling it effectively
-- had before this migration (["*"]) as a user; the bootstrap admin is the engine's to create.
-- Instants are microseconds; a migration has no store clock, so SQLite's wall clock stamps them.
UPDATE principals SET scopes = '["*"]';
INSERT INTO principals (id, display_name, status, version, created_at, updated_at, kind, scopes)
SELECT o.owner_id, o.owner_id, 'ACTIVE', 1, o.now, o.now, 'user', '["*"]'
FROM (SELECT owner_id, CAST((julianday('now') - 2440587.5) * 86400000000 AS integer) AS now
      FROM (SELECT owner_id FROM automation_specs
            UNION SELECT owner_id FROM runs
            UNION SELECT owner_id FROM secrets
            UNION SELECT owner_id FROM api_keys)) AS o
WHERE true
ON CONFLICT (id) DO NOTHING;
