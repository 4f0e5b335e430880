-- Invariant 1's unique index, keyed (dedupe_key, automation_id) instead of (automation_id,
-- dedupe_key). Same constraint, same name. A burst of fires for one instant shares its dedupe
-- key ("schedule:<instant>"), and instants grow, so new entries land next to each other at the
-- right edge instead of on one leaf page per automation: fewer pages dirtied (and written to
-- the WAL) per batch, and the cost no longer grows with the number of automations x history.
-- Lookups are always by both columns (insert conflicts, runs_by_keys); runs of one automation
-- are found through runs_automation_time.
ALTER TABLE runs DROP CONSTRAINT runs_automation_dedupe;
ALTER TABLE runs ADD CONSTRAINT runs_automation_dedupe UNIQUE (dedupe_key, automation_id);
