-- The scheduling state of an automation moves to a narrow table of its own (see the PostgreSQL
-- migration of the same number): every fire rewrites next_run_at, which the due indexes hold;
-- on the wide automations row that meant rewriting the whole row and all of its indexes.
--   automation_specs   what and when: owner, name, labels, trigger, action, policy, end time
--   automation_state   enabled, status, next_run_at, version, partition (WITHOUT ROWID: the
--                      table is its primary-key b-tree, one b-tree fewer to write per advance)
-- `automations` stays, as a view joining them with the columns of 0001; an INSERT into it
-- writes both rows.
ALTER TABLE automations RENAME TO automation_specs;
CREATE TABLE automation_state (
    automation_id  text PRIMARY KEY REFERENCES automation_specs (id) ON DELETE CASCADE,
    "partition"    integer NOT NULL CHECK ("partition" >= 0),
    enabled        integer NOT NULL,
    status         text NOT NULL CHECK (status IN ('ACTIVE', 'PAUSED', 'COMPLETED')),
    next_run_at    integer,
    version        integer NOT NULL DEFAULT 1 CHECK (version >= 1)
) WITHOUT ROWID;
INSERT INTO automation_state (automation_id, "partition", enabled, status, next_run_at, version)
SELECT id, "partition", enabled, status, next_run_at, version FROM automation_specs;
-- The due query: only enabled ACTIVE automations with a cursor are ever due.
CREATE INDEX automation_state_due ON automation_state ("partition", next_run_at)
    WHERE enabled = 1 AND status = 'ACTIVE' AND next_run_at IS NOT NULL;
CREATE INDEX automation_state_due_any ON automation_state (next_run_at)
    WHERE enabled = 1 AND status = 'ACTIVE' AND next_run_at IS NOT NULL;
DROP INDEX automations_due;
DROP INDEX automations_due_any;
ALTER TABLE automation_specs DROP COLUMN enabled;
ALTER TABLE automation_specs DROP COLUMN status;
ALTER TABLE automation_specs DROP COLUMN next_run_at;
ALTER TABLE automation_specs DROP COLUMN version;
ALTER TABLE automation_specs DROP COLUMN "partition";

CREATE VIEW automations AS
SELECT a.id, a.owner_id, a.name, a.labels, a.session_id, a.agent_id, a."trigger", a.action_type, a.action_config,
       a.policy, s.enabled, s.status, a.durable, s.next_run_at, a.end_at, s.version, s."partition", a.created_at,
       a.updated_at
FROM automation_specs AS a JOIN automation_state AS s ON s.automation_id = a.id;

CREATE TRIGGER automations_insert INSTEAD OF INSERT ON automations
BEGIN
    INSERT INTO automation_specs (id, owner_id, name, labels, session_id, agent_id, "trigger", action_type,
        action_config, policy, durable, end_at, created_at, updated_at)
    VALUES (NEW.id, NEW.owner_id, NEW.name, coalesce(NEW.labels, '{}'), NEW.session_id, NEW.agent_id, NEW."trigger",
        NEW.action_type, NEW.action_config, coalesce(NEW.policy, '{}'), coalesce(NEW.durable, 1), NEW.end_at,
        NEW.created_at, NEW.updated_at);
    INSERT INTO automation_state (automation_id, "partition", enabled, status, next_run_at, version)
    VALUES (NEW.id, NEW."partition", NEW.enabled, NEW.status, NEW.next_run_at, coalesce(NEW.version, 1));
END;
