-- The planner's event index reloads the enabled event automations every half minute (and at
-- start): a partial index of the event automations' ids, so that reload reads them alone and not
-- the whole table (query event_automations).
CREATE INDEX automation_specs_event ON automation_specs (id) WHERE ("trigger"->>'type') = 'event';
