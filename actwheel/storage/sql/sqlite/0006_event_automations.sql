-- The planner's event index reloads the enabled event automations every half minute (and at
-- start): a partial index of the event automations' ids, so that reload reads them alone and not
-- the whole table (query event_automations; see the PostgreSQL migration of the same number).
CREATE INDEX automation_specs_event ON automation_specs (id) WHERE json_extract("trigger", '$.type') = 'event';
