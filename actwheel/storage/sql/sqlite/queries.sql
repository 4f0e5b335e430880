-- Named queries, SQLite. Parameters are :name, bound by name. Instants are integer microseconds;
-- :now is the store's clock, injected by the adapter. Batched queries read a JSON array of
-- objects from :rows (json_each), so a whole batch is one statement; bulk inserts of new rows
-- (copy_*) are one INSERT … VALUES run by executemany.

-- ---------------------------------------------------------------- migrations
-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  integer NOT NULL
);

-- name: applied_migrations
SELECT version FROM schema_migrations ORDER BY version;

-- name: record_migration
INSERT INTO schema_migrations (version, name, applied_at) VALUES (:version, :name, :now);

-- ---------------------------------------------------------------- automations
-- An automation is two rows (migration 0003): its specification in automation_specs and what the
-- engine moves (enabled, status, next_run_at, version, partition) in automation_state. Reads use
-- the view automations (both, with the columns of 0001); writes go to the table that holds the
-- column; the version compare-and-set is always on the state row.

-- name: insert_automation
INSERT INTO automation_specs (id, owner_id, name, labels, session_id, agent_id, "trigger", action_type,
    action_config, policy, durable, end_at, created_at, updated_at, created_by, created_by_key)
VALUES (:id, :owner_id, :name, :labels, :session_id, :agent_id, :trigger, :action_type,
    :action_config, :policy, :durable, :end_at, :now, :now, :created_by, :created_by_key)
RETURNING *;

-- name: insert_automation_state
INSERT INTO automation_state (automation_id, "partition", enabled, status, next_run_at, version)
VALUES (:id, :partition, :enabled, :status, :next_run_at, 1)
RETURNING *;

-- name: get_automation
-- With :owner_id, another owner's automation is not found, exactly like a missing id.
SELECT * FROM automations WHERE id = :id AND (:owner_id IS NULL OR owner_id = :owner_id);

-- name: get_automations
SELECT * FROM automations WHERE id IN (SELECT value FROM json_each(:ids));

-- name: query_automations
SELECT * FROM automations
WHERE (:owner_id IS NULL OR owner_id = :owner_id)
  AND (:session_id IS NULL OR session_id = :session_id)
  AND (:agent_id IS NULL OR agent_id = :agent_id)
  AND (:status IS NULL OR status = :status)
  AND (:enabled IS NULL OR enabled = :enabled)
  AND (:due_before IS NULL OR next_run_at <= :due_before)
  AND (:partitions IS NULL OR "partition" IN (SELECT value FROM json_each(:partitions)))
  AND (:after_id IS NULL OR id > :after_id)
  AND (:name_contains IS NULL OR instr(lower(name), lower(:name_contains)) > 0)
  AND (:action_type IS NULL OR action_type = :action_type)
  AND (:labels IS NULL OR NOT EXISTS (
      SELECT 1 FROM json_each(:labels) AS want
      WHERE json_extract(labels, '$."' || want.key || '"') IS NOT want.value))
ORDER BY id
LIMIT :limit;

-- name: due_automations
SELECT * FROM automations
WHERE enabled = 1 AND status = 'ACTIVE' AND next_run_at IS NOT NULL AND next_run_at <= :before
ORDER BY next_run_at
LIMIT :limit;

-- name: due_automations_in_partitions
SELECT * FROM automations
WHERE enabled = 1 AND status = 'ACTIVE' AND next_run_at IS NOT NULL AND next_run_at <= :before
  AND "partition" IN (SELECT value FROM json_each(:partitions))
ORDER BY next_run_at
LIMIT :limit;
-- name: due_schedule
-- The ticker's refill: only what a timer needs (no specs' JSON besides the trigger), paged by id.
SELECT st.automation_id AS id, st.next_run_at, s."trigger", st."partition"
FROM automation_state st JOIN automation_specs s ON s.id = st.automation_id
WHERE st.enabled = 1 AND st.status = 'ACTIVE' AND st.next_run_at IS NOT NULL AND st.next_run_at <= :before
  AND (:partitions IS NULL OR st."partition" IN (SELECT value FROM json_each(:partitions)))
  AND st.automation_id > :after_id
ORDER BY st.automation_id
LIMIT :limit;

-- name: event_automations
-- The planner's event index: the enabled ACTIVE event automations, through the partial index
-- automation_specs_event (migration 0006), paged by id.
SELECT a.* FROM automation_specs s JOIN automations a ON a.id = s.id
WHERE json_extract(s."trigger", '$.type') = 'event' AND s.id > :after_id AND a.enabled = 1 AND a.status = 'ACTIVE'
ORDER BY s.id
LIMIT :limit;

-- name: lock_automation
-- (PostgreSQL locks the specification row here; SQLite's single writer already serialises.)
SELECT id FROM automation_specs WHERE id = :id;

-- name: update_automation_state
UPDATE automation_state SET
    status = coalesce(:status, status),
    next_run_at = CASE WHEN :clear_next_run_at THEN NULL ELSE coalesce(:next_run_at, next_run_at) END,
    version = version + 1
WHERE automation_id = :id AND version = :expected_version
RETURNING *;

-- name: update_automation
UPDATE automation_specs SET
    name = coalesce(:name, name),
    "trigger" = coalesce(:trigger, "trigger"),
    action_type = coalesce(:action_type, action_type),
    action_config = coalesce(:action_config, action_config),
    policy = coalesce(:policy, policy),
    labels = coalesce(:labels, labels),
    session_id = CASE WHEN :labels IS NULL THEN session_id ELSE :session_id END,
    agent_id = CASE WHEN :labels IS NULL THEN agent_id ELSE :agent_id END,
    owner_id = coalesce(:owner_id, owner_id),
    end_at = CASE WHEN :clear_end_at THEN NULL ELSE coalesce(:end_at, end_at) END,
    updated_at = :now
WHERE id = :id
RETURNING *;

-- name: set_automation_enabled
UPDATE automation_state SET enabled = :enabled, version = version + 1
WHERE automation_id = :id AND (:expected_version IS NULL OR version = :expected_version)
RETURNING *;

-- name: touch_automation
UPDATE automation_specs SET updated_at = :now WHERE id = :id RETURNING *;

-- name: cancel_waiting_runs_of
UPDATE runs SET status = 'CANCELED', reason = :reason, not_before = NULL, updated_at = :now, finished_at = :now
WHERE automation_id IN (SELECT value FROM json_each(:automation_ids)) AND finished_at IS NULL
  AND status IN ('PENDING', 'RETRY_WAIT')
RETURNING id;

-- name: delete_automation
DELETE FROM automation_specs WHERE id = :id RETURNING id;

-- name: delete_automations_by_session
DELETE FROM automation_specs WHERE session_id = :key AND (:owner_id IS NULL OR owner_id = :owner_id)
RETURNING id;

-- name: delete_automations_by_agent
DELETE FROM automation_specs WHERE agent_id = :key AND (:owner_id IS NULL OR owner_id = :owner_id)
RETURNING id;

-- name: delete_automations_by_owner
DELETE FROM automation_specs WHERE owner_id = :key RETURNING id;

-- name: advance_cursor
UPDATE automation_state SET
    next_run_at = :new_next_run_at,
    status = CASE WHEN :new_next_run_at IS NULL THEN 'COMPLETED' ELSE status END
WHERE automation_id = :id AND version = :version AND next_run_at IS :expected_next_run_at
RETURNING automation_id AS id;

-- name: rewind_cursor
-- Fire-ahead: an update withdrew runs planned ahead; the cursor goes back to the first of their instants
-- (the version was bumped by the update itself, in the same transaction).
UPDATE automation_state SET
    next_run_at = :at,
    status = CASE WHEN status = 'COMPLETED' THEN 'ACTIVE' ELSE status END
WHERE automation_id = :id AND (next_run_at IS NULL OR next_run_at > :at)
RETURNING automation_id AS id;

-- name: advance_cursors
UPDATE automation_state SET
    next_run_at = c.new_next,
    status = CASE WHEN c.new_next IS NULL THEN 'COMPLETED' ELSE automation_state.status END
FROM (SELECT json_extract(value, '$.automation_id') AS id, json_extract(value, '$.version') AS version,
             json_extract(value, '$.expected_next_run_at') AS expected,
             json_extract(value, '$.new_next_run_at') AS new_next
      FROM json_each(:rows)) AS c
WHERE automation_state.automation_id = c.id AND automation_state.version = c.version
  AND automation_state.next_run_at IS c.expected
RETURNING automation_state.automation_id AS id;

-- ---------------------------------------------------------------- runs
-- name: insert_runs
INSERT INTO runs (id, automation_id, dedupe_key, scheduled_for, origin, status, reason, not_before,
    action_type, action_config, policy, owner_id, context, created_at, updated_at, finished_at)
SELECT json_extract(value, '$.id'), json_extract(value, '$.automation_id'), json_extract(value, '$.dedupe_key'),
    json_extract(value, '$.scheduled_for'), json_extract(value, '$.origin'), json_extract(value, '$.status'),
    json_extract(value, '$.reason'), json_extract(value, '$.not_before'), json_extract(value, '$.action_type'),
    json_extract(value, '$.action_config'), json_extract(value, '$.policy'), json_extract(value, '$.owner_id'),
    json_extract(value, '$.context'), :now, :now,
    CASE WHEN json_extract(value, '$.status') IN ('SKIPPED', 'CANCELED') THEN :now END
FROM json_each(:rows) WHERE true
ON CONFLICT DO NOTHING
RETURNING id, created_at, updated_at, finished_at;

-- name: copy_runs
INSERT INTO runs (id, automation_id, dedupe_key, scheduled_for, origin, status, reason, not_before, action_type, action_config, policy, owner_id, context, created_at, updated_at, finished_at)
VALUES (:id, :automation_id, :dedupe_key, :scheduled_for, :origin, :status, :reason, :not_before, :action_type, :action_config, :policy, :owner_id, :context, :created_at, :updated_at, :finished_at);

-- name: copy_pending_runs
-- (PostgreSQL leaves the default columns out; SQLite's times are the client's, so it sends them all.)
INSERT INTO runs (id, automation_id, dedupe_key, scheduled_for, origin, status, reason, not_before, action_type, action_config, policy, owner_id, context, created_at, updated_at, finished_at)
VALUES (:id, :automation_id, :dedupe_key, :scheduled_for, :origin, :status, :reason, :not_before, :action_type, :action_config, :policy, :owner_id, :context, :created_at, :updated_at, :finished_at);

-- name: runs_by_keys
SELECT r.* FROM runs AS r
JOIN (SELECT json_extract(value, '$.automation_id') AS automation_id,
             json_extract(value, '$.dedupe_key') AS dedupe_key FROM json_each(:rows)) AS k
  ON r.automation_id = k.automation_id AND r.dedupe_key = k.dedupe_key;

-- name: adhoc_runs_by_keys
SELECT r.* FROM runs AS r
JOIN (SELECT json_extract(value, '$.owner_id') AS owner_id,
             json_extract(value, '$.dedupe_key') AS dedupe_key FROM json_each(:rows)) AS k
  ON r.owner_id = k.owner_id AND r.dedupe_key = k.dedupe_key
WHERE r.automation_id IS NULL;

-- name: get_run
SELECT * FROM runs WHERE id = :id AND (:owner_id IS NULL OR owner_id = :owner_id);

-- name: get_runs
SELECT * FROM runs WHERE id IN (SELECT value FROM json_each(:ids));

-- name: query_runs
-- By what bounds the scan (see the PostgreSQL file): runs_created, runs_owner_created (0008),
-- runs_automation_time. The cursor is the last run of the previous page: strictly older.
SELECT * FROM runs
WHERE true
  AND (:statuses IS NULL OR status IN (SELECT value FROM json_each(:statuses)))
  AND (:created_after IS NULL OR created_at >= :created_after)
  AND (:created_before IS NULL OR created_at < :created_before)
  AND (:action_type IS NULL OR action_type = :action_type)
  AND (:origin IS NULL OR origin = :origin)
  AND (:cursor_at IS NULL OR created_at < :cursor_at OR (created_at = :cursor_at AND id < :cursor_id))
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: query_runs_of_owner
SELECT * FROM runs
WHERE owner_id = :owner_id
  AND (:statuses IS NULL OR status IN (SELECT value FROM json_each(:statuses)))
  AND (:created_after IS NULL OR created_at >= :created_after)
  AND (:created_before IS NULL OR created_at < :created_before)
  AND (:action_type IS NULL OR action_type = :action_type)
  AND (:origin IS NULL OR origin = :origin)
  AND (:cursor_at IS NULL OR created_at < :cursor_at OR (created_at = :cursor_at AND id < :cursor_id))
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: query_runs_of_automation
SELECT * FROM runs
WHERE automation_id = :automation_id AND (:owner_id IS NULL OR owner_id = :owner_id)
  AND (:statuses IS NULL OR status IN (SELECT value FROM json_each(:statuses)))
  AND (:created_after IS NULL OR created_at >= :created_after)
  AND (:created_before IS NULL OR created_at < :created_before)
  AND (:action_type IS NULL OR action_type = :action_type)
  AND (:origin IS NULL OR origin = :origin)
  AND (:cursor_at IS NULL OR created_at < :cursor_at OR (created_at = :cursor_at AND id < :cursor_id))
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: claim_run
UPDATE runs SET
    status = 'RUNNING', lease_owner = :owner,
    lease_expires_at = :now + CAST(:lease_s * 1000000 AS INTEGER),
    lease_epoch = lease_epoch + 1, attempt = attempt + 1,
    started_at = coalesce(started_at, :now), updated_at = :now
WHERE id = :id AND status = 'PENDING' AND (not_before IS NULL OR not_before <= :now)
RETURNING *;

-- name: claim_runs
UPDATE runs SET
    status = 'RUNNING', lease_owner = :owner,
    lease_expires_at = :now + CAST(:lease_s * 1000000 AS INTEGER),
    lease_epoch = lease_epoch + 1, attempt = attempt + 1,
    started_at = coalesce(started_at, :now), updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'PENDING'
  AND (not_before IS NULL OR not_before <= :now)
RETURNING *;

-- name: claim_next_runs
UPDATE runs SET
    status = 'RUNNING', lease_owner = :owner,
    lease_expires_at = :now + CAST(:lease_s * 1000000 AS INTEGER),
    lease_epoch = lease_epoch + 1, attempt = attempt + 1,
    started_at = coalesce(started_at, :now), updated_at = :now
WHERE id IN (SELECT id FROM runs WHERE finished_at IS NULL AND status = 'PENDING'
               AND (not_before IS NULL OR not_before <= :now)
             ORDER BY updated_at LIMIT :limit)
RETURNING *;

-- name: renew_lease
UPDATE runs SET lease_expires_at = :now + CAST(:lease_s * 1000000 AS INTEGER), updated_at = :now
WHERE id = :id AND lease_owner = :owner AND lease_epoch = :epoch AND status IN ('RUNNING', 'COMPENSATING')
RETURNING id;

-- name: finish_runs
UPDATE runs SET
    status = f.status, reason = f.reason, result = f.result, error = f.error, not_before = f.not_before,
    lease_owner = CASE WHEN f.status = 'COMPENSATING' THEN runs.lease_owner END,
    lease_expires_at = CASE WHEN f.status = 'COMPENSATING' THEN runs.lease_expires_at END,
    finished_at = CASE WHEN f.status IN ('COMPENSATING', 'RETRY_WAIT', 'PENDING') THEN NULL ELSE :now END,
    updated_at = :now
FROM (SELECT json_extract(value, '$.run_id') AS id, json_extract(value, '$.owner') AS owner,
             json_extract(value, '$.epoch') AS epoch, json_extract(value, '$.status') AS status,
             json_extract(value, '$.reason') AS reason, json_extract(value, '$.result') AS result,
             json_extract(value, '$.error') AS error, json_extract(value, '$.not_before') AS not_before
      FROM json_each(:rows)) AS f
WHERE runs.id = f.id AND runs.lease_owner = f.owner AND runs.lease_epoch = f.epoch
  AND runs.status IN ('RUNNING', 'COMPENSATING')
RETURNING runs.id;

-- name: expired_leases
SELECT * FROM runs
WHERE finished_at IS NULL AND status IN ('RUNNING', 'COMPENSATING') AND lease_expires_at < :now
ORDER BY lease_expires_at
LIMIT :limit;

-- name: recover_expired
UPDATE runs SET
    status = :status, reason = :reason, not_before = :not_before,
    lease_owner = NULL, lease_expires_at = NULL, lease_epoch = lease_epoch + 1,
    finished_at = CASE WHEN :status IN ('PENDING', 'RETRY_WAIT') THEN NULL ELSE :now END,
    updated_at = :now
WHERE id = :id AND lease_epoch = :epoch AND status IN ('RUNNING', 'COMPENSATING') AND lease_expires_at < :now
RETURNING *;

-- name: stale_pending
SELECT * FROM runs
WHERE finished_at IS NULL AND status = 'PENDING'
  AND updated_at <= :now - CAST(:older_than_s * 1000000 AS INTEGER)
  AND (not_before IS NULL OR not_before <= :now - CAST(:older_than_s * 1000000 AS INTEGER))
ORDER BY updated_at
LIMIT :limit;

-- name: promote_due_retries
UPDATE runs SET status = 'PENDING', updated_at = :now
WHERE id IN (SELECT id FROM runs WHERE finished_at IS NULL AND status = 'RETRY_WAIT' AND not_before <= :now
             ORDER BY not_before LIMIT :limit)
RETURNING *;

-- name: cancel_run
UPDATE runs SET status = 'CANCELED', reason = :reason, not_before = NULL, updated_at = :now, finished_at = :now
WHERE id = :id AND status IN ('PENDING', 'RETRY_WAIT')
RETURNING id;

-- name: withdraw_ahead_runs
UPDATE runs SET status = 'CANCELED', reason = :reason, dedupe_key = 'withdrawn:' || id,
    updated_at = :now, finished_at = :now
WHERE automation_id = :automation_id AND finished_at IS NULL AND status = 'PENDING' AND origin = 'schedule'
  AND attempt = 0 AND not_before > :now
RETURNING *;

-- name: runs_going_before
SELECT r.id, (SELECT count(*) FROM (
    SELECT 1 FROM runs o
    WHERE o.automation_id = r.automation_id AND o.id <> r.id AND o.finished_at IS NULL
      AND o.status IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING') AND o.scheduled_for < r.scheduled_for
    LIMIT 2)) AS going
FROM runs r WHERE r.id IN (SELECT value FROM json_each(:ids)) AND r.automation_id IS NOT NULL;

-- name: active_automation_ids
SELECT DISTINCT automation_id FROM runs
WHERE automation_id IN (SELECT value FROM json_each(:ids)) AND finished_at IS NULL
  AND status IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING');

-- name: latest_runs_of
-- The newest run of each automation of :ids (see the PostgreSQL file): a correlated top-1 per id
-- through runs_automation_time, the owner checked on that one row.
SELECT r.* FROM json_each(:ids) AS a
JOIN runs AS r ON r.id = (
    SELECT id FROM runs WHERE automation_id = a.value ORDER BY created_at DESC LIMIT 1)
WHERE :owner_id IS NULL OR r.owner_id = :owner_id;

-- ---------------------------------------------------------------- outbox
-- name: copy_outbox
INSERT INTO outbox (exchange, routing_key, body, headers, created_at)
VALUES (:exchange, :routing_key, :body, :headers, :now);

-- name: take_outbox
SELECT * FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT :limit;

-- name: take_outbox_exclusive
-- One writer: the transaction itself is exclusive.
SELECT * FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT :limit;

-- name: mark_published
UPDATE outbox SET published_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND published_at IS NULL
RETURNING id;

-- name: purge_published
DELETE FROM outbox WHERE published_at IS NOT NULL AND published_at < :before RETURNING id;

-- name: outbox_backlog
SELECT count(*) AS n FROM outbox WHERE published_at IS NULL;

-- ---------------------------------------------------------------- audit
-- name: append_audit
-- One row's values, run by executemany (insert_rows): binding them costs SQLite about half of
-- reading the batch back out of one JSON document with json_extract.
INSERT INTO audit (event_id, run_id, automation_id, phase, actor, details, occurred_at)
VALUES (:event_id, :run_id, :automation_id, :phase, :actor, :details, coalesce(:occurred_at, :now))
ON CONFLICT (event_id) DO NOTHING;

-- name: audit_trail
SELECT * FROM audit WHERE run_id = :run_id ORDER BY seq;

-- name: audit_for_automation
SELECT * FROM (SELECT * FROM audit WHERE automation_id = :automation_id ORDER BY seq DESC LIMIT :limit)
ORDER BY seq;

-- ---------------------------------------------------------------- ontology
-- name: insert_type
INSERT INTO object_types (name, properties, required, version, created_at, updated_at)
VALUES (:name, :properties, :required, 1, :now, :now)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: update_type
UPDATE object_types SET properties = :properties, required = :required, version = version + 1, updated_at = :now
WHERE name = :name AND (:expected_version IS NULL OR version = :expected_version)
RETURNING *;

-- name: get_type
SELECT * FROM object_types WHERE name = :name;

-- name: list_types
SELECT * FROM object_types ORDER BY name;

-- name: delete_type
DELETE FROM object_types WHERE name = :name RETURNING name;

-- name: insert_object
INSERT INTO objects (id, object_type, properties, version, deleted, created_by, created_at, updated_at)
VALUES (:id, :object_type, :properties, 1, 0, :created_by, :now, :now)
RETURNING *;

-- name: copy_objects
INSERT INTO objects (id, object_type, properties, version, deleted, created_by, created_at, updated_at)
VALUES (:id, :object_type, :properties, :version, :deleted, :created_by, :created_at, :updated_at);

-- name: types_in
SELECT name FROM object_types WHERE name IN (SELECT value FROM json_each(:names));

-- name: object_ids_in
SELECT id FROM objects WHERE id IN (SELECT value FROM json_each(:ids));

-- name: get_object
SELECT * FROM objects WHERE id = :id;

-- name: list_objects
SELECT * FROM objects
WHERE object_type = :object_type AND (:include_deleted OR NOT deleted)
ORDER BY created_at, id
LIMIT :limit;

-- name: update_object
UPDATE objects SET properties = :properties, version = version + 1, updated_at = :now
WHERE id = :id AND NOT deleted AND (:expected_version IS NULL OR version = :expected_version)
RETURNING *;

-- name: soft_delete_object
UPDATE objects SET deleted = 1, version = version + 1, updated_at = :now
WHERE id = :id AND NOT deleted AND (:expected_version IS NULL OR version = :expected_version)
RETURNING *;

-- name: hard_delete_object
DELETE FROM objects
WHERE id = :id AND NOT deleted AND (:expected_version IS NULL OR version = :expected_version)
RETURNING *;

-- name: restore_object
INSERT INTO objects (id, object_type, properties, version, deleted, created_by, created_at, updated_at)
VALUES (:id, :object_type, :properties, :version, :deleted, :created_by, :created_at, :now)
ON CONFLICT (id) DO UPDATE SET
    properties = excluded.properties, deleted = excluded.deleted,
    version = objects.version + 1, updated_at = :now
RETURNING *;

-- name: insert_relation
INSERT INTO relations (id, relation_type, source_id, target_id, properties, created_by, created_at)
VALUES (:id, :relation_type, :source_id, :target_id, :properties, :created_by, :now)
RETURNING *;

-- name: get_relation
SELECT * FROM relations WHERE id = :id;

-- name: relations_of
SELECT * FROM relations WHERE source_id = :object_id OR target_id = :object_id ORDER BY created_at, id;

-- name: delete_relation
DELETE FROM relations WHERE id = :id RETURNING *;

-- ---------------------------------------------------------------- principals, keys, secrets
-- name: insert_principal
-- An agent's parent must be a user: with any other parent (or none found) nothing is inserted.
INSERT INTO principals (id, display_name, status, version, created_at, updated_at, kind, parent_id, scopes,
    on_behalf_of)
SELECT :id, :display_name, 'ACTIVE', 1, :now, :now, :kind, :parent_id, :scopes, :on_behalf_of
WHERE :parent_id IS NULL OR EXISTS (SELECT 1 FROM principals WHERE id = :parent_id AND kind = 'user')
RETURNING *;

-- name: insert_principal_if_absent
-- insert_principal, but an existing id is no error: nothing is inserted (one writer at a time).
INSERT INTO principals (id, display_name, status, version, created_at, updated_at, kind, parent_id, scopes,
    on_behalf_of)
SELECT :id, :display_name, 'ACTIVE', 1, :now, :now, :kind, :parent_id, :scopes, :on_behalf_of
WHERE :parent_id IS NULL OR EXISTS (SELECT 1 FROM principals WHERE id = :parent_id AND kind = 'user')
ON CONFLICT (id) DO NOTHING
RETURNING *;

-- name: get_principal
SELECT * FROM principals WHERE id = :id;

-- name: get_principals
SELECT * FROM principals WHERE id IN (SELECT value FROM json_each(:ids));

-- name: set_principal_status
UPDATE principals SET status = :status, version = version + 1, updated_at = :now,
    ban_reason = CASE WHEN :status = 'ACTIVE' THEN NULL ELSE ban_reason END,
    banned_by = CASE WHEN :status = 'ACTIVE' THEN NULL ELSE banned_by END,
    banned_at = CASE WHEN :status = 'ACTIVE' THEN NULL ELSE banned_at END
WHERE id = :id AND (:expected_version IS NULL OR version = :expected_version)
RETURNING *;

-- name: ban_principal
UPDATE principals SET status = 'BANNED', ban_reason = :reason, banned_by = :by, banned_at = :now,
    version = version + 1, updated_at = :now
WHERE id = :id
RETURNING *;

-- name: unban_principal
UPDATE principals SET status = 'ACTIVE', ban_reason = NULL, banned_by = NULL, banned_at = NULL,
    version = version + 1, updated_at = :now
WHERE id = :id
RETURNING *;

-- name: set_principal_scopes
UPDATE principals SET scopes = :scopes, version = version + 1, updated_at = :now
WHERE id = :id
RETURNING *;

-- name: query_principals
SELECT * FROM principals
WHERE (:kind IS NULL OR kind = :kind)
  AND (:status IS NULL OR status = :status)
  AND (:parent_id IS NULL OR parent_id = :parent_id)
  AND (:after_id IS NULL OR id > :after_id)
ORDER BY id
LIMIT :limit;

-- name: count_principals
SELECT count(*) AS n FROM principals WHERE (:kind IS NULL OR kind = :kind);

-- name: insert_api_key
-- A key may act as an agent only if the agent's parent is the key's owner: otherwise nothing is
-- inserted (the repository then tells a missing owner or agent from a foreign one).
INSERT INTO api_keys (id, owner_id, key_hash, scopes, name, revoked, created_at, agent_id, expires_at)
SELECT :id, :owner_id, :key_hash, :scopes, :name, 0, :now, :agent_id, :expires_at
WHERE :agent_id IS NULL
   OR EXISTS (SELECT 1 FROM principals WHERE id = :agent_id AND kind = 'agent' AND parent_id = :owner_id)
RETURNING *;

-- name: get_api_key
-- With agent_id: only a key bound to that agent (an agent-bound key reaches the keys of its agent alone).
SELECT * FROM api_keys WHERE id = :id AND (:owner_id IS NULL OR owner_id = :owner_id)
  AND (:agent_id IS NULL OR agent_id = :agent_id);

-- name: api_key_by_hash
SELECT * FROM api_keys WHERE key_hash = :key_hash;

-- name: api_keys_for_owner
SELECT * FROM api_keys
WHERE owner_id = :owner_id
  AND (:agent_id IS NULL OR agent_id = :agent_id)
  AND (:include_dead OR (revoked = 0 AND (expires_at IS NULL OR expires_at > :now)))
ORDER BY created_at, id;

-- name: count_live_api_keys
SELECT count(*) AS n FROM api_keys
WHERE owner_id = :owner_id AND revoked = 0 AND (expires_at IS NULL OR expires_at > :now);

-- name: revoke_api_key
UPDATE api_keys SET revoked = 1, revoked_at = coalesce(revoked_at, :now)
WHERE id = :id AND (:owner_id IS NULL OR owner_id = :owner_id)
  AND (:agent_id IS NULL OR agent_id = :agent_id)
RETURNING *;

-- name: mark_api_key_replaced
-- min() of SQLite is NULL when an argument is: the coalesce makes "no expiry" the grace instant.
UPDATE api_keys SET replaced_by = :replaced_by,
    expires_at = min(coalesce(expires_at, :grace_until), :grace_until)
WHERE id = :id
RETURNING *;

-- name: touch_api_key
-- Never backwards: of two uses the later instant stays.
UPDATE api_keys SET last_used_at = :at
WHERE id = :id AND (last_used_at IS NULL OR last_used_at < :at)
RETURNING id;

-- name: insert_security_event
INSERT INTO security_events (id, occurred_at, kind, principal_id, key_id, actor_id, detail)
VALUES (:id, :now, :kind, :principal_id, :key_id, :actor_id, :detail)
RETURNING *;

-- name: query_security_events
SELECT * FROM security_events
WHERE (:kind IS NULL OR kind = :kind)
  AND (:principal_id IS NULL OR principal_id = :principal_id)
ORDER BY occurred_at DESC, id DESC
LIMIT :limit;

-- name: insert_secret
INSERT INTO secrets (id, owner_id, name, ciphertext, version, created_at)
VALUES (:id, :owner_id, :name, :ciphertext, 1, :now)
RETURNING *;

-- name: get_secret
SELECT * FROM secrets WHERE owner_id = :owner_id AND name = :name;

-- name: rotate_secret
UPDATE secrets SET ciphertext = :ciphertext, version = version + 1, rotated_at = :now
WHERE owner_id = :owner_id AND name = :name AND (:expected_version IS NULL OR version = :expected_version)
RETURNING *;

-- name: delete_secret
DELETE FROM secrets WHERE owner_id = :owner_id AND name = :name RETURNING id;

-- name: secret_names
SELECT name FROM secrets WHERE owner_id = :owner_id ORDER BY name;

-- name: any_secret
SELECT EXISTS (SELECT 1 FROM secrets) AS found;

-- ---------------------------------------------------------------- dead letters
-- name: insert_dead_letter
INSERT INTO dead_letters (id, source, ref_id, reason, payload, created_at)
VALUES (:id, :source, :ref_id, :reason, :payload, :now)
RETURNING *;

-- name: get_dead_letter
SELECT * FROM dead_letters WHERE id = :id;

-- name: query_dead_letters
SELECT * FROM dead_letters WHERE (:source IS NULL OR source = :source) ORDER BY created_at, id LIMIT :limit;

-- name: delete_dead_letter
DELETE FROM dead_letters WHERE id = :id RETURNING id;

-- ---------------------------------------------------------------- partition leases
-- name: acquire_partitions
INSERT INTO partition_leases ("partition", owner, expires_at, epoch)
SELECT value, :owner, :now + CAST(:ttl_s * 1000000 AS INTEGER), 1 FROM json_each(:partitions) WHERE true
ON CONFLICT ("partition") DO UPDATE SET
    owner = excluded.owner, expires_at = excluded.expires_at,
    epoch = partition_leases.epoch + CASE WHEN partition_leases.owner = excluded.owner THEN 0 ELSE 1 END
WHERE partition_leases.owner = excluded.owner OR partition_leases.expires_at < :now
RETURNING "partition";

-- name: renew_partitions
UPDATE partition_leases SET expires_at = :now + CAST(:ttl_s * 1000000 AS INTEGER)
WHERE owner = :owner AND "partition" IN (SELECT value FROM json_each(:partitions))
RETURNING "partition";

-- name: release_partitions
DELETE FROM partition_leases WHERE owner = :owner AND "partition" IN (SELECT value FROM json_each(:partitions))
RETURNING "partition";

-- name: all_partitions
SELECT * FROM partition_leases ORDER BY "partition";

-- ---------------------------------------------------------------- idempotency keys
-- name: get_idempotency_key
SELECT outcome FROM idempotency_keys WHERE key = :key;

-- name: put_idempotency_key
INSERT INTO idempotency_keys (key, outcome, created_at) VALUES (:key, :outcome, :now)
ON CONFLICT (key) DO NOTHING
RETURNING key;

-- name: purge_idempotency_keys
DELETE FROM idempotency_keys WHERE created_at < :before RETURNING key;

-- ---------------------------------------------------------------- MCP confirmations and server keys
-- name: insert_mcp_confirmation
INSERT INTO mcp_confirmations (id, token_hash, owner_id, key_id, automation_id, automation_version, created_at,
                               expires_at)
VALUES (:id, :token_hash, :owner_id, :key_id, :automation_id, :automation_version, :created_at, :expires_at)
RETURNING *;

-- name: mcp_confirmation_by_hash
SELECT * FROM mcp_confirmations WHERE token_hash = :token_hash;

-- name: use_mcp_confirmation
-- The first use is kept: a retried redemption never moves used_at nor replaces the run.
UPDATE mcp_confirmations SET used_at = coalesce(used_at, :at), run_id = coalesce(run_id, :run_id)
WHERE id = :id
RETURNING *;

-- name: purge_mcp_confirmations
DELETE FROM mcp_confirmations WHERE expires_at < :before RETURNING id;

-- name: ensure_mcp_server_key
INSERT INTO mcp_server_keys (name, secret, created_at) VALUES (:name, :secret, :now)
ON CONFLICT (name) DO NOTHING;

-- name: get_mcp_server_key
SELECT secret FROM mcp_server_keys WHERE name = :name;

-- ---------------------------------------------------------------- dashboard sessions
-- name: insert_ui_session
INSERT INTO ui_sessions (id, session_hash, key_id, owner_id, principal_id, created_at, expires_at)
VALUES (:id, :session_hash, :key_id, :owner_id, :principal_id, :created_at, :expires_at)
RETURNING *;

-- name: ui_session_by_hash
SELECT * FROM ui_sessions WHERE session_hash = :session_hash;

-- name: revoke_ui_session
-- The first revocation is kept.
UPDATE ui_sessions SET revoked_at = coalesce(revoked_at, :at) WHERE session_hash = :session_hash
RETURNING id;

-- name: purge_ui_sessions
DELETE FROM ui_sessions WHERE expires_at < :before RETURNING id;

-- ---------------------------------------------------------------- operations (issue 13, migration 0008)
-- name: run_window_counts
-- One pass, as the PostgreSQL file's: counts by status and reason, the rates, and the lateness values
-- (seconds, as JSON arrays) of the scheduled runs of the window whose rowid is 0 under :sample_mask.
SELECT status, reason,
       sum(created_at >= :since) AS n,
       sum(created_at >= :since_5m) AS last_5m,
       sum(created_at >= :since_60m) AS last_60m,
       sum(scheduled) AS fire_n,
       sum(scheduled AND started_at IS NOT NULL) AS start_n,
       json_group_array((created_at - scheduled_for) / 1000000.0) FILTER (WHERE scheduled AND ranked) AS fire,
       json_group_array((started_at - scheduled_for) / 1000000.0)
           FILTER (WHERE scheduled AND ranked AND started_at IS NOT NULL) AS start
FROM (SELECT status, reason, created_at, scheduled_for, started_at,
             created_at >= :since AND origin = 'schedule' AND scheduled_for IS NOT NULL AS scheduled,
             (rowid & :sample_mask) = 0 AS ranked
      FROM runs WHERE created_at >= min(:since, :since_60m))
GROUP BY status, reason;

-- name: owner_run_window_counts
SELECT status, reason,
       sum(created_at >= :since) AS n,
       sum(created_at >= :since_5m) AS last_5m,
       sum(created_at >= :since_60m) AS last_60m,
       sum(scheduled) AS fire_n,
       sum(scheduled AND started_at IS NOT NULL) AS start_n,
       json_group_array((created_at - scheduled_for) / 1000000.0) FILTER (WHERE scheduled AND ranked) AS fire,
       json_group_array((started_at - scheduled_for) / 1000000.0)
           FILTER (WHERE scheduled AND ranked AND started_at IS NOT NULL) AS start
FROM (SELECT status, reason, created_at, scheduled_for, started_at,
             created_at >= :since AND origin = 'schedule' AND scheduled_for IS NOT NULL AS scheduled,
             (rowid & :sample_mask) = 0 AS ranked
      FROM runs WHERE owner_id = :owner_id AND created_at >= min(:since, :since_60m))
GROUP BY status, reason;

-- name: run_window_size
SELECT count(*) AS n FROM runs WHERE created_at >= :recent;

-- name: owner_run_window_size
SELECT count(*) AS n FROM runs WHERE owner_id = :owner_id AND created_at >= :recent;

-- name: waiting_run_ids
-- A bulk cancel's targets and its dry-run count: the waiting runs matching the filter, newest first,
-- through runs_open (finished_at IS NULL), never the history.
SELECT id FROM runs
WHERE finished_at IS NULL AND status IN (SELECT value FROM json_each(:statuses))
  AND (:owner_id IS NULL OR owner_id = :owner_id)
  AND (:automation_id IS NULL OR automation_id = :automation_id)
  AND (:created_after IS NULL OR created_at >= :created_after)
  AND (:created_before IS NULL OR created_at < :created_before)
  AND (:action_type IS NULL OR action_type = :action_type)
  AND (:origin IS NULL OR origin = :origin)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: attention_counts
-- The needs-attention counts from runs_attention (migration 0012, kept by triggers on runs).
SELECT (SELECT count(*) FROM runs_attention WHERE status = 'UNKNOWN') AS unknown,
       (SELECT count(*) FROM runs_attention WHERE status = 'DEAD') AS dead,
       (SELECT count(*) FROM runs_attention WHERE status = 'FAILED' AND created_at >= :failed_since) AS failed;

-- name: owner_attention_counts
SELECT (SELECT count(*) FROM runs_attention WHERE owner_id = :owner_id AND status = 'UNKNOWN') AS unknown,
       (SELECT count(*) FROM runs_attention WHERE owner_id = :owner_id AND status = 'DEAD') AS dead,
       (SELECT count(*) FROM runs_attention
        WHERE owner_id = :owner_id AND status = 'FAILED' AND created_at >= :failed_since) AS failed;

-- name: resolve_unknown_run
-- finished_at is named (and kept) so that runs_attention's trigger (0012) sees the change.
UPDATE runs SET status = :status, reason = :reason, updated_at = :now, finished_at = finished_at
WHERE id = :id AND status = 'UNKNOWN' AND (:owner_id IS NULL OR owner_id = :owner_id)
RETURNING *;

-- name: oldest_unpublished
SELECT created_at FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT 1;

-- name: requeue_outbox_message
UPDATE outbox SET published_at = NULL WHERE id = :id AND published_at IS NOT NULL RETURNING id;

-- name: dead_letter_counts
SELECT source, count(*) AS n FROM dead_letters GROUP BY source;

-- name: insert_automation_history
INSERT INTO automation_history (id, automation_id, owner_id, change, actor_id, key_id, at, "before", "after")
VALUES (:id, :automation_id, :owner_id, :change, :actor_id, :key_id, :now, :before, :after)
RETURNING *;

-- name: copy_automation_history
INSERT INTO automation_history (id, automation_id, owner_id, change, actor_id, key_id, at, "before", "after")
VALUES (:id, :automation_id, :owner_id, :change, :actor_id, :key_id, :at, :before, :after);

-- name: upsert_instance
INSERT INTO instances (id, roles, actor_states, started_at, seen_at)
VALUES (:id, :roles, :actor_states, :started_at, :now)
ON CONFLICT (id) DO UPDATE SET
    roles = excluded.roles, actor_states = excluded.actor_states, started_at = excluded.started_at,
    seen_at = excluded.seen_at
RETURNING *;

-- name: all_instances
SELECT * FROM instances ORDER BY id;

-- name: purge_instances
DELETE FROM instances WHERE seen_at < :before RETURNING id;

-- name: automation_history
SELECT * FROM automation_history
WHERE automation_id = :automation_id AND (:owner_id IS NULL OR owner_id = :owner_id)
  AND (:after_seq IS NULL OR seq > :after_seq)
ORDER BY seq
LIMIT :limit;

-- ---------------------------------------------------------------- retention (issue 14, migration 0010)
-- Each statement touches at most :limit rows (the sweeper's batch) and re-checks its condition on the
-- row it removes (see the PostgreSQL file). The freed pages go back to the file through
-- SqliteStore.reclaim_space (PRAGMA incremental_vacuum), outside these transactions.

-- name: retention_scan_runs
SELECT id, finished_at, created_at FROM runs
WHERE created_at < :before AND (created_at, id) > (:after_created, :after_id)
ORDER BY created_at, id
LIMIT :limit;

-- name: retention_delete_runs
DELETE FROM runs WHERE id IN (SELECT value FROM json_each(:ids)) AND finished_at < :before RETURNING id;

-- name: retention_delete_audit
DELETE FROM audit WHERE run_id IN (SELECT value FROM json_each(:ids)) RETURNING seq;

-- name: retention_scan_outbox
SELECT id, created_at, published_at FROM outbox WHERE id > :after_id ORDER BY id LIMIT :limit;

-- name: retention_delete_outbox
DELETE FROM outbox WHERE id IN (SELECT value FROM json_each(:ids)) AND published_at < :before RETURNING id;

-- name: retention_delete_dead_letters
DELETE FROM dead_letters
WHERE id IN (SELECT id FROM dead_letters WHERE created_at < :before ORDER BY created_at LIMIT :limit)
RETURNING id;

-- name: retention_delete_idempotency_keys
DELETE FROM idempotency_keys
WHERE key IN (SELECT key FROM idempotency_keys WHERE created_at < :before ORDER BY created_at LIMIT :limit)
RETURNING key;

-- name: acquire_job_lease
INSERT INTO job_leases (name, owner, expires_at)
VALUES (:name, :owner, :now + CAST(:ttl_s * 1000000 AS INTEGER))
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE job_leases.owner = excluded.owner OR job_leases.expires_at < :now
RETURNING name;

-- name: release_job_lease
DELETE FROM job_leases WHERE name = :name AND owner = :owner RETURNING name;

-- === issue 15: speed (batched renewals, the planner's backlog bound) ===

-- name: renew_leases
-- One statement for every run in flight: a renewal round never waits behind per-run statements.
UPDATE runs SET lease_expires_at = :now + CAST(:lease_s * 1000000 AS INTEGER), updated_at = :now
FROM (SELECT json_extract(value, '$.run_id') AS id, json_extract(value, '$.epoch') AS epoch
      FROM json_each(:rows)) AS f
WHERE runs.id = f.id AND runs.lease_owner = :owner AND runs.lease_epoch = f.epoch
  AND runs.status IN ('RUNNING', 'COMPENSATING')
RETURNING runs.id;

-- name: count_backlog
-- PENDING and leased runs, each count stopped at :limit (read through runs_pending and runs_leased:
-- the cost is bounded by the limit, not by the backlog). A run planned ahead of its instant (fire-ahead)
-- is not backlog until its instant: it waits for no executor before then (the scan steps over those,
-- at most a lead window's instants).
SELECT (SELECT count(*) FROM (SELECT 1 FROM runs WHERE status = 'PENDING'
                              AND (not_before IS NULL OR not_before <= :now) LIMIT :limit))
     + (SELECT count(*) FROM (SELECT 1 FROM runs WHERE status IN ('RUNNING', 'COMPENSATING') LIMIT :limit)) AS n;

-- name: insert_automations
-- A batch of new automations' specification rows in one statement (POST /v1/automations/batch, group
-- commit); RETURNING order is not the input's: the caller joins by id.
INSERT INTO automation_specs (id, owner_id, name, labels, session_id, agent_id, "trigger", action_type,
    action_config, policy, durable, end_at, created_at, updated_at, created_by, created_by_key)
SELECT json_extract(value, '$.id'), json_extract(value, '$.owner_id'), json_extract(value, '$.name'),
       json_extract(value, '$.labels'), json_extract(value, '$.session_id'), json_extract(value, '$.agent_id'),
       json_extract(value, '$.trigger'), json_extract(value, '$.action_type'),
       json_extract(value, '$.action_config'), json_extract(value, '$.policy'), json_extract(value, '$.durable'),
       json_extract(value, '$.end_at'), :now, :now, json_extract(value, '$.created_by'),
       json_extract(value, '$.created_by_key')
FROM json_each(:rows)
RETURNING *;

-- name: insert_automation_states
INSERT INTO automation_state (automation_id, "partition", enabled, status, next_run_at, version)
SELECT json_extract(value, '$.id'), json_extract(value, '$.partition'), json_extract(value, '$.enabled'),
       json_extract(value, '$.status'), json_extract(value, '$.next_run_at'), 1
FROM json_each(:rows)
RETURNING *;
