-- The scheduling state of an automation moves to a narrow table of its own.
-- Every fire advances the cursor (next_run_at), and next_run_at is in the due indexes, so that
-- update can never be HOT: on the wide automations row it copied the whole row (trigger,
-- config, policy, labels) and added an entry to every one of its six indexes. On the narrow
-- row it writes ~60 bytes and three index entries.
--   automation_specs   what and when: owner, name, labels, trigger, action, policy, end time
--   automation_state   what the engine moves: enabled, status, next_run_at, version (+ the
--                      immutable partition the due index is keyed by)
-- Each fact lives in one table only, so the two cannot disagree. `automations` stays, as a
-- view joining them with the columns of 0001: reads (and ad hoc SQL) see the same record,
-- and an INSERT into it (COPY too) writes both rows.
ALTER TABLE automations RENAME TO automation_specs;
CREATE TABLE automation_state (
    automation_id  text PRIMARY KEY REFERENCES automation_specs (id) ON DELETE CASCADE,
    "partition"    integer NOT NULL CHECK ("partition" >= 0),
    enabled        boolean NOT NULL,
    status         text NOT NULL CHECK (status IN ('ACTIVE', 'PAUSED', 'COMPLETED')),
    next_run_at    timestamptz,
    version        bigint NOT NULL DEFAULT 1 CHECK (version >= 1)
);
INSERT INTO automation_state (automation_id, "partition", enabled, status, next_run_at, version)
SELECT id, "partition", enabled, status, next_run_at, version FROM automation_specs;
-- The due query: only enabled ACTIVE automations with a cursor are ever due.
CREATE INDEX automation_state_due ON automation_state ("partition", next_run_at)
    WHERE enabled AND status = 'ACTIVE' AND next_run_at IS NOT NULL;
CREATE INDEX automation_state_due_any ON automation_state (next_run_at)
    WHERE enabled AND status = 'ACTIVE' AND next_run_at IS NOT NULL;
DROP INDEX automations_due;
DROP INDEX automations_due_any;
ALTER TABLE automation_specs DROP COLUMN enabled, DROP COLUMN status, DROP COLUMN next_run_at,
    DROP COLUMN version, DROP COLUMN "partition";

CREATE VIEW automations AS
SELECT a.id, a.owner_id, a.name, a.labels, a.session_id, a.agent_id, a."trigger", a.action_type, a.action_config,
       a.policy, s.enabled, s.status, a.durable, s.next_run_at, a.end_at, s.version, s."partition", a.created_at,
       a.updated_at
FROM automation_specs AS a JOIN automation_state AS s ON s.automation_id = a.id;

CREATE FUNCTION automations_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO automation_specs (id, owner_id, name, labels, session_id, agent_id, "trigger", action_type,
        action_config, policy, durable, end_at, created_at, updated_at)
    VALUES (NEW.id, NEW.owner_id, NEW.name, coalesce(NEW.labels, '{}'), NEW.session_id, NEW.agent_id, NEW."trigger",
        NEW.action_type, NEW.action_config, coalesce(NEW.policy, '{}'), coalesce(NEW.durable, true), NEW.end_at,
        coalesce(NEW.created_at, now()), coalesce(NEW.updated_at, now()));
    INSERT INTO automation_state (automation_id, "partition", enabled, status, next_run_at, version)
    VALUES (NEW.id, NEW."partition", NEW.enabled, NEW.status, NEW.next_run_at, coalesce(NEW.version, 1));
    RETURN NEW;
END
$$;
CREATE TRIGGER automations_insert INSTEAD OF INSERT ON automations
    FOR EACH ROW EXECUTE FUNCTION automations_insert();
