-- Named queries, PostgreSQL. Parameters are :name (compiled to $n once at load).
-- Batched UPDATEs name their target rows by primary key (`id = ANY(…)`, or `= ANY(ARRAY(SELECT …))`
-- over a CTE) as well as joining them: otherwise the planner may hash-join against a sequential
-- scan of the whole table, a cost that grows with its history.
-- Batched queries read a JSON array of objects from :rows (json_to_recordset), or, when they name
-- no :rows, one array per column (:column::type[], unnest: cheaper for a few scalar columns); bulk
-- inserts of new rows are COPY … FROM STDIN (copy_*: the adapter sends the rows in binary). "now"
-- is always the database's now().

-- ---------------------------------------------------------------- migrations
-- name: migration_lock
SELECT pg_advisory_xact_lock(hashtext('actwheel.migrate:' || current_schema()));

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- name: applied_migrations
SELECT version FROM schema_migrations ORDER BY version;

-- name: record_migration
INSERT INTO schema_migrations (version, name) VALUES (:version, :name);

-- name: db_now
SELECT now() AS now;

-- name: current_schema
SELECT current_schema() AS schema;

-- ---------------------------------------------------------------- automations
-- An automation is two rows (migration 0003): its specification in automation_specs and what the
-- engine moves (enabled, status, next_run_at, version, partition) in automation_state. Reads use
-- the view automations (both, with the columns of 0001); writes go to the table that holds the
-- column; the version compare-and-set is always on the state row.

-- name: insert_automation
INSERT INTO automation_specs (id, owner_id, name, labels, session_id, agent_id, "trigger", action_type,
    action_config, policy, durable, end_at, created_by, created_by_key)
VALUES (:id, :owner_id, :name, :labels::jsonb, :session_id, :agent_id, :trigger::jsonb, :action_type,
    :action_config::jsonb, :policy::jsonb, :durable, :end_at, :created_by, :created_by_key)
RETURNING *;

-- name: insert_automation_state
INSERT INTO automation_state (automation_id, "partition", enabled, status, next_run_at, version)
VALUES (:id, :partition, :enabled, :status, :next_run_at, 1)
RETURNING *;

-- name: get_automation
-- With :owner_id, another owner's automation is not found, exactly like a missing id.
SELECT * FROM automations WHERE id = :id AND (:owner_id::text IS NULL OR owner_id = :owner_id);

-- name: get_automations
SELECT * FROM automations WHERE id = ANY(:ids::text[]);

-- name: query_automations
SELECT * FROM automations
WHERE (:owner_id::text IS NULL OR owner_id = :owner_id)
  AND (:session_id::text IS NULL OR session_id = :session_id)
  AND (:agent_id::text IS NULL OR agent_id = :agent_id)
  AND (:status::text IS NULL OR status = :status)
  AND (:enabled::boolean IS NULL OR enabled = :enabled)
  AND (:due_before::timestamptz IS NULL OR next_run_at <= :due_before)
  AND (:partitions::int[] IS NULL OR "partition" = ANY(:partitions))
  AND (:after_id::text IS NULL OR id > :after_id)
  AND (:name_contains::text IS NULL OR strpos(lower(name), lower(:name_contains)) > 0)
  AND (:action_type::text IS NULL OR action_type = :action_type)
  AND (:labels::jsonb IS NULL OR labels @> :labels::jsonb)
ORDER BY id
LIMIT :limit;

-- name: due_automations
-- The due indexes are keyed by the hour of next_run_at (due_bucket, migration 0005): bound the
-- bucket for the index, then the instant. Ordered by bucket first, so an incremental sort stops
-- at the limit.
SELECT a.* FROM automation_state st JOIN automations a ON a.id = st.automation_id
WHERE st.enabled AND st.status = 'ACTIVE'
  AND st.due_bucket <= date_bin('1 hour', :before::timestamptz, TIMESTAMPTZ '2000-01-01 00:00:00+00')
  AND st.next_run_at <= :before
ORDER BY st.due_bucket, st.next_run_at
LIMIT :limit;

-- name: due_automations_in_partitions
SELECT a.* FROM automation_state st JOIN automations a ON a.id = st.automation_id
WHERE st.enabled AND st.status = 'ACTIVE' AND st."partition" = ANY(:partitions::int[])
  AND st.due_bucket <= date_bin('1 hour', :before::timestamptz, TIMESTAMPTZ '2000-01-01 00:00:00+00')
  AND st.next_run_at <= :before
ORDER BY st.due_bucket, st.next_run_at
LIMIT :limit;
-- name: due_schedule
-- The ticker's refill: only what a timer needs (no specs' JSON besides the trigger), paged by id.
SELECT st.automation_id AS id, st.next_run_at, s."trigger", st."partition"
FROM automation_state st JOIN automation_specs s ON s.id = st.automation_id
WHERE st.enabled AND st.status = 'ACTIVE'
  AND st.due_bucket <= date_bin('1 hour', :before::timestamptz, TIMESTAMPTZ '2000-01-01 00:00:00+00')
  AND st.next_run_at <= :before
  AND (:partitions::int[] IS NULL OR st."partition" = ANY(:partitions::int[]))
  AND st.automation_id > :after_id
ORDER BY st.automation_id
LIMIT :limit;

-- name: event_automations
-- The planner's event index: the enabled ACTIVE event automations, through the partial index
-- automation_specs_event (migration 0006), paged by id.
SELECT a.* FROM automation_specs s JOIN automations a ON a.id = s.id
WHERE (s."trigger"->>'type') = 'event' AND s.id > :after_id AND a.enabled AND a.status = 'ACTIVE'
ORDER BY s.id
LIMIT :limit;

-- name: lock_automation
-- Before the state row: every writer takes an automation's rows in the order specs → state
-- (a delete does, through the cascade), so an update racing a delete waits, never deadlocks.
SELECT id FROM automation_specs WHERE id = :id FOR NO KEY UPDATE;

-- name: update_automation_state
UPDATE automation_state SET
    status = coalesce(:status, status),
    next_run_at = CASE WHEN :clear_next_run_at::boolean THEN NULL ELSE coalesce(:next_run_at, next_run_at) END,
    version = version + 1
WHERE automation_id = :id AND version = :expected_version
RETURNING *;

-- name: update_automation
UPDATE automation_specs SET
    name = coalesce(:name, name),
    "trigger" = coalesce(:trigger::jsonb, "trigger"),
    action_type = coalesce(:action_type, action_type),
    action_config = coalesce(:action_config::jsonb, action_config),
    policy = coalesce(:policy::jsonb, policy),
    labels = coalesce(:labels::jsonb, labels),
    session_id = CASE WHEN :labels::jsonb IS NULL THEN session_id ELSE :session_id::text END,
    agent_id = CASE WHEN :labels::jsonb IS NULL THEN agent_id ELSE :agent_id::text END,
    owner_id = coalesce(:owner_id, owner_id),
    end_at = CASE WHEN :clear_end_at::boolean THEN NULL ELSE coalesce(:end_at, end_at) END,
    updated_at = now()
WHERE id = :id
RETURNING *;

-- name: set_automation_enabled
UPDATE automation_state SET enabled = :enabled, version = version + 1
WHERE automation_id = :id AND (:expected_version::bigint IS NULL OR version = :expected_version)
RETURNING *;

-- name: touch_automation
UPDATE automation_specs SET updated_at = now() WHERE id = :id RETURNING *;

-- name: cancel_waiting_runs_of
UPDATE runs SET status = 'CANCELED', reason = :reason, not_before = NULL, updated_at = now(), finished_at = now()
WHERE automation_id = ANY(:automation_ids::text[]) AND finished_at IS NULL AND status IN ('PENDING', 'RETRY_WAIT')
RETURNING id;

-- name: delete_automation
DELETE FROM automation_specs WHERE id = :id RETURNING id;

-- name: delete_automations_by_session
DELETE FROM automation_specs WHERE session_id = :key AND (:owner_id::text IS NULL OR owner_id = :owner_id)
RETURNING id;

-- name: delete_automations_by_agent
DELETE FROM automation_specs WHERE agent_id = :key AND (:owner_id::text IS NULL OR owner_id = :owner_id)
RETURNING id;

-- name: delete_automations_by_owner
DELETE FROM automation_specs WHERE owner_id = :key RETURNING id;

-- name: advance_cursor
UPDATE automation_state SET
    next_run_at = :new_next_run_at::timestamptz,
    status = CASE WHEN :new_next_run_at::timestamptz IS NULL THEN 'COMPLETED' ELSE status END
WHERE automation_id = :id AND version = :version
  AND next_run_at IS NOT DISTINCT FROM :expected_next_run_at::timestamptz
RETURNING automation_id AS id;

-- name: rewind_cursor
-- Fire-ahead: an update withdrew runs planned ahead; the cursor goes back to the first of their instants
-- (the version was bumped by the update itself, in the same transaction).
UPDATE automation_state SET
    next_run_at = :at::timestamptz,
    status = CASE WHEN status = 'COMPLETED' THEN 'ACTIVE' ELSE status END
WHERE automation_id = :id AND (next_run_at IS NULL OR next_run_at > :at::timestamptz)
RETURNING automation_id AS id;

-- name: advance_cursors
UPDATE automation_state AS s SET
    next_run_at = c.new_next_run_at,
    status = CASE WHEN c.new_next_run_at IS NULL THEN 'COMPLETED' ELSE s.status END
FROM unnest(:automation_id::text[], :version::bigint[], :expected_next_run_at::timestamptz[],
            :new_next_run_at::timestamptz[]) AS c (automation_id, version, expected_next_run_at, new_next_run_at)
WHERE s.automation_id = c.automation_id AND s.version = c.version
  AND s.next_run_at IS NOT DISTINCT FROM c.expected_next_run_at
  AND s.automation_id = ANY(:automation_id::text[])
RETURNING s.automation_id AS id, now() AS now;

-- name: insert_runs
INSERT INTO runs (id, automation_id, dedupe_key, scheduled_for, origin, status, reason, not_before,
    action_type, action_config, policy, owner_id, context, finished_at)
SELECT n.id, n.automation_id, n.dedupe_key, n.scheduled_for, n.origin, n.status, n.reason, n.not_before,
    n.action_type, n.action_config, n.policy, n.owner_id, n.context,
    CASE WHEN n.status IN ('SKIPPED', 'CANCELED') THEN now() END
FROM json_to_recordset(:rows::json)
     AS n (id text, automation_id text, dedupe_key text, scheduled_for timestamptz, origin text, status text,
           reason text, not_before timestamptz, action_type text, action_config json, policy json,
           owner_id text, context json)
ON CONFLICT DO NOTHING
RETURNING id, created_at, updated_at, finished_at;

-- name: copy_runs
COPY runs (id, automation_id, dedupe_key, scheduled_for, origin, status, reason, not_before, action_type, action_config, policy, owner_id, context, created_at, updated_at, finished_at) FROM STDIN;

-- name: copy_pending_runs
-- copy_runs for the common batch (every run PENDING, no reason, no not_before): the columns
-- left out take their defaults (NULL; created_at and updated_at now(), the transaction's start,
-- the same instant copy_runs would be sent). Five columns fewer to encode and decode per run.
COPY runs (id, automation_id, dedupe_key, scheduled_for, origin, status, action_type, action_config, policy, owner_id, context) FROM STDIN;

-- name: runs_by_keys
SELECT r.* FROM runs AS r
JOIN json_to_recordset(:rows::json) AS k (automation_id text, dedupe_key text)
  ON r.automation_id = k.automation_id AND r.dedupe_key = k.dedupe_key;

-- name: adhoc_runs_by_keys
SELECT r.* FROM runs AS r
JOIN json_to_recordset(:rows::json) AS k (owner_id text, dedupe_key text)
  ON r.owner_id = k.owner_id AND r.dedupe_key = k.dedupe_key
WHERE r.automation_id IS NULL;

-- name: get_run
SELECT * FROM runs WHERE id = :id AND (:owner_id::text IS NULL OR owner_id = :owner_id);

-- name: get_runs
SELECT * FROM runs WHERE id = ANY(:ids::text[]);

-- name: query_runs
-- Three statements by what bounds the scan, so that each prepared statement keeps a plan that
-- reads its index in order and stops at the limit (a generic plan cannot choose by an
-- ``IS NULL OR`` on the owner): any owner through runs_created, one owner through
-- runs_owner_created (0008), one automation through runs_automation_time. The cursor is the last
-- run of the previous page: strictly older (created_at, id).
SELECT * FROM runs
WHERE true
  AND (:statuses::text[] IS NULL OR status = ANY(:statuses))
  AND (:created_after::timestamptz IS NULL OR created_at >= :created_after)
  AND (:created_before::timestamptz IS NULL OR created_at < :created_before)
  AND (:action_type::text IS NULL OR action_type = :action_type)
  AND (:origin::text IS NULL OR origin = :origin)
  AND (:cursor_at::timestamptz IS NULL OR (created_at, id) < (:cursor_at, :cursor_id::text))
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: query_runs_of_owner
SELECT * FROM runs
WHERE owner_id = :owner_id
  AND (:statuses::text[] IS NULL OR status = ANY(:statuses))
  AND (:created_after::timestamptz IS NULL OR created_at >= :created_after)
  AND (:created_before::timestamptz IS NULL OR created_at < :created_before)
  AND (:action_type::text IS NULL OR action_type = :action_type)
  AND (:origin::text IS NULL OR origin = :origin)
  AND (:cursor_at::timestamptz IS NULL OR (created_at, id) < (:cursor_at, :cursor_id::text))
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: query_runs_of_automation
SELECT * FROM runs
WHERE automation_id = :automation_id AND (:owner_id::text IS NULL OR owner_id = :owner_id)
  AND (:statuses::text[] IS NULL OR status = ANY(:statuses))
  AND (:created_after::timestamptz IS NULL OR created_at >= :created_after)
  AND (:created_before::timestamptz IS NULL OR created_at < :created_before)
  AND (:action_type::text IS NULL OR action_type = :action_type)
  AND (:origin::text IS NULL OR origin = :origin)
  AND (:cursor_at::timestamptz IS NULL OR (created_at, id) < (:cursor_at, :cursor_id::text))
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: claim_run
UPDATE runs SET
    status = 'RUNNING', lease_owner = :owner,
    lease_expires_at = now() + make_interval(secs => :lease_s::float8),
    lease_epoch = lease_epoch + 1, attempt = attempt + 1,
    started_at = coalesce(started_at, now()), updated_at = now()
WHERE id = :id AND status = 'PENDING' AND (not_before IS NULL OR not_before <= now())
RETURNING *;

-- name: claim_runs
-- The rows are found by primary key only: with the status in the scan's WHERE, a planner whose
-- statistics lag a burst (the pending count grows by thousands between ANALYZEs) reads the
-- whole runs_pending index (before 0005) and its heap pages instead (≈ 10 ms per 1000 claims at 60k pending).
-- A row some other claimer holds is skipped; the status is checked on the locked row.
WITH c AS (
    SELECT id FROM runs
    WHERE id = ANY(:ids::text[])
    ORDER BY id
    FOR UPDATE SKIP LOCKED
)
UPDATE runs AS r SET
    status = 'RUNNING', lease_owner = :owner,
    lease_expires_at = now() + make_interval(secs => :lease_s::float8),
    lease_epoch = r.lease_epoch + 1, attempt = r.attempt + 1,
    started_at = coalesce(r.started_at, now()), updated_at = now()
WHERE r.id = ANY(ARRAY(SELECT id FROM c))
  AND r.status = 'PENDING' AND (r.not_before IS NULL OR r.not_before <= now())
RETURNING r.*;

-- name: claim_next_runs
WITH c AS (
    SELECT id FROM runs
    WHERE finished_at IS NULL AND status = 'PENDING' AND (not_before IS NULL OR not_before <= now())
    ORDER BY updated_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE runs AS r SET
    status = 'RUNNING', lease_owner = :owner,
    lease_expires_at = now() + make_interval(secs => :lease_s::float8),
    lease_epoch = r.lease_epoch + 1, attempt = r.attempt + 1,
    started_at = coalesce(r.started_at, now()), updated_at = now()
WHERE r.id = ANY(ARRAY(SELECT id FROM c))
RETURNING r.*;

-- name: renew_lease
UPDATE runs SET lease_expires_at = now() + make_interval(secs => :lease_s::float8), updated_at = now()
WHERE id = :id AND lease_owner = :owner AND lease_epoch = :epoch AND status IN ('RUNNING', 'COMPENSATING')
RETURNING id;

-- name: finish_runs
-- Joined by primary key only (a nested loop of index lookups). An extra `r.id = ANY(ids)` made
-- the planner take the runs for 10 rows, scan runs_leased and compare every outcome with every
-- run (1000 x 1000 / 2 join-filter checks, ≈ 45 ms per batch of 1000).
UPDATE runs AS r SET
    status = f.status, reason = f.reason, result = f.result, error = f.error, not_before = f.not_before,
    lease_owner = CASE WHEN f.status = 'COMPENSATING' THEN r.lease_owner END,
    lease_expires_at = CASE WHEN f.status = 'COMPENSATING' THEN r.lease_expires_at END,
    finished_at = CASE WHEN f.status IN ('COMPENSATING', 'RETRY_WAIT', 'PENDING') THEN NULL ELSE now() END,
    updated_at = now()
FROM json_to_recordset(:rows::json)
     AS f (run_id text, owner text, epoch bigint, status text, reason text, result json, error json,
           not_before timestamptz)
WHERE r.id = f.run_id AND r.lease_owner = f.owner AND r.lease_epoch = f.epoch
  AND r.status IN ('RUNNING', 'COMPENSATING')
RETURNING r.id;

-- name: expired_leases
SELECT * FROM runs
WHERE finished_at IS NULL AND status IN ('RUNNING', 'COMPENSATING') AND lease_expires_at < now()
ORDER BY lease_expires_at
LIMIT :limit;

-- name: recover_expired
UPDATE runs SET
    status = :status::text, reason = :reason, not_before = :not_before,
    lease_owner = NULL, lease_expires_at = NULL, lease_epoch = lease_epoch + 1,
    finished_at = CASE WHEN :status::text IN ('PENDING', 'RETRY_WAIT') THEN NULL ELSE now() END,
    updated_at = now()
WHERE id = :id AND lease_epoch = :epoch AND status IN ('RUNNING', 'COMPENSATING') AND lease_expires_at < now()
RETURNING *;

-- name: stale_pending
SELECT * FROM runs
WHERE finished_at IS NULL AND status = 'PENDING'
  AND updated_at <= now() - make_interval(secs => :older_than_s::float8)
  AND (not_before IS NULL OR not_before <= now() - make_interval(secs => :older_than_s::float8))
ORDER BY updated_at
LIMIT :limit;

-- name: promote_due_retries
WITH c AS (
    SELECT id FROM runs
    WHERE finished_at IS NULL AND status = 'RETRY_WAIT' AND not_before <= now()
    ORDER BY not_before
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE runs AS r SET status = 'PENDING', updated_at = now()
WHERE r.id = ANY(ARRAY(SELECT id FROM c))
RETURNING r.*;

-- name: cancel_run
UPDATE runs SET status = 'CANCELED', reason = :reason, not_before = NULL, updated_at = now(), finished_at = now()
WHERE id = :id AND status IN ('PENDING', 'RETRY_WAIT')
RETURNING id;

-- name: withdraw_ahead_runs
-- Fire-ahead: the runs planned before their instant and not started, withdrawn by an edit. The row lock
-- orders this against a claim (which needs not_before <= now()): whichever comes second sees the other's row.
UPDATE runs SET status = 'CANCELED', reason = :reason, dedupe_key = 'withdrawn:' || id,
    updated_at = now(), finished_at = now()
WHERE automation_id = :automation_id AND finished_at IS NULL AND status = 'PENDING' AND origin = 'schedule'
  AND attempt = 0 AND not_before > now()
RETURNING *;

-- name: runs_going_before
SELECT r.id, (SELECT count(*) FROM (
    SELECT 1 FROM runs o
    WHERE o.automation_id = r.automation_id AND o.id <> r.id AND o.finished_at IS NULL
      AND o.status IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING') AND o.scheduled_for < r.scheduled_for
    LIMIT 2) AS g) AS going
FROM runs r WHERE r.id = ANY(:ids::text[]) AND r.automation_id IS NOT NULL;

-- name: active_automation_ids
SELECT DISTINCT automation_id FROM runs
WHERE automation_id = ANY(:ids::text[]) AND finished_at IS NULL
  AND status IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING');

-- name: latest_runs_of
-- The newest run of each automation of :ids: a LATERAL top-1 per id, one backward probe of
-- runs_automation_time (automation_id, created_at) each, never an automation's history. The order is the
-- index's alone: with ", id" the planner may walk runs_created (created_at, id) backward and filter
-- (it does when created_at has few distinct values). Runs created in one transaction tie, in index order.
-- The owner is checked on that one row (an automation's runs are its owner's): another owner's id costs
-- a probe, not a scan.
SELECT r.* FROM unnest(:ids::text[]) AS a(id)
CROSS JOIN LATERAL (
    SELECT * FROM runs WHERE automation_id = a.id ORDER BY created_at DESC LIMIT 1
) AS r
WHERE :owner_id::text IS NULL OR r.owner_id = :owner_id;

-- ---------------------------------------------------------------- outbox
-- name: copy_outbox
COPY outbox (exchange, routing_key, body, headers) FROM STDIN;

-- name: take_outbox
SELECT * FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT :limit;

-- name: take_outbox_exclusive
-- Rows locked for this transaction; a concurrent relay's exclusive take skips them.
SELECT * FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED;

-- name: mark_published
UPDATE outbox SET published_at = now() WHERE id = ANY(:ids::bigint[]) AND published_at IS NULL RETURNING id;

-- name: purge_published
DELETE FROM outbox WHERE published_at IS NOT NULL AND published_at < :before RETURNING id;

-- name: outbox_backlog
SELECT count(*) AS n FROM outbox WHERE published_at IS NULL;

-- ---------------------------------------------------------------- audit
-- name: append_audit
INSERT INTO audit (event_id, run_id, automation_id, phase, actor, details, occurred_at)
SELECT e.event_id, e.run_id, e.automation_id, e.phase, e.actor, e.details, coalesce(e.occurred_at, now())
FROM ROWS FROM (json_to_recordset(:rows::json)
                AS (event_id text, run_id text, automation_id text, phase text, actor text, details jsonb,
                    occurred_at timestamptz))
     WITH ORDINALITY AS e (event_id, run_id, automation_id, phase, actor, details, occurred_at, ord)
ORDER BY e.ord
ON CONFLICT (event_id) DO NOTHING
RETURNING seq;

-- name: audit_trail
SELECT * FROM audit WHERE run_id = :run_id ORDER BY seq;

-- name: audit_for_automation
SELECT * FROM (SELECT * FROM audit WHERE automation_id = :automation_id ORDER BY seq DESC LIMIT :limit) AS t
ORDER BY seq;

-- ---------------------------------------------------------------- ontology
-- name: insert_type
INSERT INTO object_types (name, properties, required) VALUES (:name, :properties::jsonb, :required::jsonb)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: update_type
UPDATE object_types SET properties = :properties::jsonb, required = :required::jsonb,
    version = version + 1, updated_at = now()
WHERE name = :name AND (:expected_version::bigint IS NULL OR version = :expected_version)
RETURNING *;

-- name: get_type
SELECT * FROM object_types WHERE name = :name;

-- name: list_types
SELECT * FROM object_types ORDER BY name;

-- name: delete_type
DELETE FROM object_types WHERE name = :name RETURNING name;

-- name: insert_object
INSERT INTO objects (id, object_type, properties, created_by)
VALUES (:id, :object_type, :properties::jsonb, :created_by)
RETURNING *;

-- name: copy_objects
COPY objects (id, object_type, properties, version, deleted, created_by, created_at, updated_at) FROM STDIN;

-- name: types_in
SELECT name FROM object_types WHERE name = ANY(:names::text[]);

-- name: object_ids_in
SELECT id FROM objects WHERE id = ANY(:ids::text[]);

-- name: get_object
SELECT * FROM objects WHERE id = :id;

-- name: list_objects
SELECT * FROM objects
WHERE object_type = :object_type AND (:include_deleted::boolean OR NOT deleted)
ORDER BY created_at, id
LIMIT :limit;

-- name: update_object
UPDATE objects SET properties = :properties::jsonb, version = version + 1, updated_at = now()
WHERE id = :id AND NOT deleted AND (:expected_version::bigint IS NULL OR version = :expected_version)
RETURNING *;

-- name: soft_delete_object
UPDATE objects SET deleted = true, version = version + 1, updated_at = now()
WHERE id = :id AND NOT deleted AND (:expected_version::bigint IS NULL OR version = :expected_version)
RETURNING *;

-- name: hard_delete_object
DELETE FROM objects
WHERE id = :id AND NOT deleted AND (:expected_version::bigint IS NULL OR version = :expected_version)
RETURNING *;

-- name: restore_object
INSERT INTO objects (id, object_type, properties, version, deleted, created_by, created_at)
VALUES (:id, :object_type, :properties::jsonb, :version, :deleted, :created_by, :created_at)
ON CONFLICT (id) DO UPDATE SET
    properties = EXCLUDED.properties, deleted = EXCLUDED.deleted,
    version = objects.version + 1, updated_at = now()
RETURNING *;

-- name: insert_relation
INSERT INTO relations (id, relation_type, source_id, target_id, properties, created_by)
VALUES (:id, :relation_type, :source_id, :target_id, :properties::jsonb, :created_by)
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
INSERT INTO principals (id, display_name, status, kind, parent_id, scopes, on_behalf_of)
SELECT :id::text, :display_name::text, 'ACTIVE', :kind::text, :parent_id::text, :scopes::jsonb, :on_behalf_of::jsonb
WHERE :parent_id::text IS NULL OR EXISTS (SELECT 1 FROM principals WHERE id = :parent_id AND kind = 'user')
RETURNING *;

-- name: insert_principal_if_absent
-- insert_principal, but an existing id is no error: nothing is inserted (a concurrent insert of
-- the same id makes this wait for its commit, so of two racers one creates).
INSERT INTO principals (id, display_name, status, kind, parent_id, scopes, on_behalf_of)
SELECT :id::text, :display_name::text, 'ACTIVE', :kind::text, :parent_id::text, :scopes::jsonb, :on_behalf_of::jsonb
WHERE :parent_id::text IS NULL OR EXISTS (SELECT 1 FROM principals WHERE id = :parent_id AND kind = 'user')
ON CONFLICT (id) DO NOTHING
RETURNING *;

-- name: get_principal
SELECT * FROM principals WHERE id = :id;

-- name: get_principals
SELECT * FROM principals WHERE id = ANY(:ids::text[]);

-- name: set_principal_status
UPDATE principals SET status = :status, version = version + 1, updated_at = now(),
    ban_reason = CASE WHEN :status = 'ACTIVE' THEN NULL ELSE ban_reason END,
    banned_by = CASE WHEN :status = 'ACTIVE' THEN NULL ELSE banned_by END,
    banned_at = CASE WHEN :status = 'ACTIVE' THEN NULL ELSE banned_at END
WHERE id = :id AND (:expected_version::bigint IS NULL OR version = :expected_version)
RETURNING *;

-- name: ban_principal
UPDATE principals SET status = 'BANNED', ban_reason = :reason, banned_by = :by, banned_at = now(),
    version = version + 1, updated_at = now()
WHERE id = :id
RETURNING *;

-- name: unban_principal
UPDATE principals SET status = 'ACTIVE', ban_reason = NULL, banned_by = NULL, banned_at = NULL,
    version = version + 1, updated_at = now()
WHERE id = :id
RETURNING *;

-- name: set_principal_scopes
UPDATE principals SET scopes = :scopes::jsonb, version = version + 1, updated_at = now()
WHERE id = :id
RETURNING *;

-- name: query_principals
SELECT * FROM principals
WHERE (:kind::text IS NULL OR kind = :kind)
  AND (:status::text IS NULL OR status = :status)
  AND (:parent_id::text IS NULL OR parent_id = :parent_id)
  AND (:after_id::text IS NULL OR id > :after_id)
ORDER BY id
LIMIT :limit;

-- name: count_principals
SELECT count(*) AS n FROM principals WHERE (:kind::text IS NULL OR kind = :kind);

-- name: insert_api_key
-- A key may act as an agent only if the agent's parent is the key's owner: otherwise nothing is
-- inserted (the repository then tells a missing owner or agent from a foreign one).
INSERT INTO api_keys (id, owner_id, key_hash, scopes, name, agent_id, expires_at)
SELECT :id::text, :owner_id::text, :key_hash::text, :scopes::jsonb, :name::text, :agent_id::text, :expires_at::timestamptz
WHERE :agent_id::text IS NULL
   OR EXISTS (SELECT 1 FROM principals WHERE id = :agent_id AND kind = 'agent' AND parent_id = :owner_id)
RETURNING *;

-- name: get_api_key
-- With agent_id: only a key bound to that agent (an agent-bound key reaches the keys of its agent alone).
SELECT * FROM api_keys WHERE id = :id AND (:owner_id::text IS NULL OR owner_id = :owner_id)
  AND (:agent_id::text IS NULL OR agent_id = :agent_id);

-- name: api_key_by_hash
SELECT * FROM api_keys WHERE key_hash = :key_hash;

-- name: api_keys_for_owner
SELECT * FROM api_keys
WHERE owner_id = :owner_id
  AND (:agent_id::text IS NULL OR agent_id = :agent_id)
  AND (:include_dead::boolean OR (NOT revoked AND (expires_at IS NULL OR expires_at > now())))
ORDER BY created_at, id;

-- name: count_live_api_keys
SELECT count(*) AS n FROM api_keys
WHERE owner_id = :owner_id AND NOT revoked AND (expires_at IS NULL OR expires_at > now());

-- name: revoke_api_key
UPDATE api_keys SET revoked = true, revoked_at = coalesce(revoked_at, now())
WHERE id = :id AND (:owner_id::text IS NULL OR owner_id = :owner_id)
  AND (:agent_id::text IS NULL OR agent_id = :agent_id)
RETURNING *;

-- name: mark_api_key_replaced
UPDATE api_keys SET replaced_by = :replaced_by,
    expires_at = least(coalesce(expires_at, :grace_until::timestamptz), :grace_until::timestamptz)
WHERE id = :id
RETURNING *;

-- name: touch_api_key
-- Never backwards: of two concurrent uses the later instant stays.
UPDATE api_keys SET last_used_at = :at::timestamptz
WHERE id = :id AND (last_used_at IS NULL OR last_used_at < :at::timestamptz)
RETURNING id;

-- name: insert_security_event
INSERT INTO security_events (id, kind, principal_id, key_id, actor_id, detail)
VALUES (:id, :kind, :principal_id, :key_id, :actor_id, :detail::jsonb)
RETURNING *;

-- name: query_security_events
SELECT * FROM security_events
WHERE (:kind::text IS NULL OR kind = :kind)
  AND (:principal_id::text IS NULL OR principal_id = :principal_id)
ORDER BY occurred_at DESC, id DESC
LIMIT :limit;

-- name: insert_secret
INSERT INTO secrets (id, owner_id, name, ciphertext) VALUES (:id, :owner_id, :name, :ciphertext) RETURNING *;

-- name: get_secret
SELECT * FROM secrets WHERE owner_id = :owner_id AND name = :name;

-- name: rotate_secret
UPDATE secrets SET ciphertext = :ciphertext, version = version + 1, rotated_at = now()
WHERE owner_id = :owner_id AND name = :name AND (:expected_version::bigint IS NULL OR version = :expected_version)
RETURNING *;

-- name: delete_secret
DELETE FROM secrets WHERE owner_id = :owner_id AND name = :name RETURNING id;

-- name: secret_names
SELECT name FROM secrets WHERE owner_id = :owner_id ORDER BY name;

-- name: any_secret
SELECT EXISTS (SELECT 1 FROM secrets) AS found;

-- ---------------------------------------------------------------- dead letters
-- name: insert_dead_letter
INSERT INTO dead_letters (id, source, ref_id, reason, payload) VALUES (:id, :source, :ref_id, :reason, :payload::jsonb)
RETURNING *;

-- name: get_dead_letter
SELECT * FROM dead_letters WHERE id = :id;

-- name: query_dead_letters
SELECT * FROM dead_letters WHERE (:source::text IS NULL OR source = :source) ORDER BY created_at, id LIMIT :limit;

-- name: delete_dead_letter
DELETE FROM dead_letters WHERE id = :id RETURNING id;

-- ---------------------------------------------------------------- partition leases
-- name: acquire_partitions
INSERT INTO partition_leases ("partition", owner, expires_at, epoch)
SELECT p, :owner, now() + make_interval(secs => :ttl_s::float8), 1 FROM unnest(:partitions::int[]) AS p
ON CONFLICT ("partition") DO UPDATE SET
    owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at,
    epoch = partition_leases.epoch + CASE WHEN partition_leases.owner = EXCLUDED.owner THEN 0 ELSE 1 END
WHERE partition_leases.owner = EXCLUDED.owner OR partition_leases.expires_at < now()
RETURNING "partition";

-- name: renew_partitions
UPDATE partition_leases SET expires_at = now() + make_interval(secs => :ttl_s::float8)
WHERE owner = :owner AND "partition" = ANY(:partitions::int[])
RETURNING "partition";

-- name: release_partitions
DELETE FROM partition_leases WHERE owner = :owner AND "partition" = ANY(:partitions::int[]) RETURNING "partition";

-- name: all_partitions
SELECT * FROM partition_leases ORDER BY "partition";

-- ---------------------------------------------------------------- idempotency keys
-- name: get_idempotency_key
SELECT outcome FROM idempotency_keys WHERE key = :key;

-- name: put_idempotency_key
INSERT INTO idempotency_keys (key, outcome) VALUES (:key, :outcome::jsonb)
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
-- A second instance racing the first waits for its insert and then does nothing: one key.
INSERT INTO mcp_server_keys (name, secret) VALUES (:name, :secret)
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
-- The stats window in one pass over the runs created since least(:since, :since_60m), through
-- runs_created (never every run): by status and reason, n in the window, last_5m / last_60m the run
-- rates; and the lateness of the scheduled runs created in the window, fire (created_at -
-- scheduled_for) and start (started_at - scheduled_for) in seconds: fire_n / start_n count every
-- one, the arrays hold those whose id hashes to 0 under :sample_mask (0: every run; see
-- lateness_sample_mask), ranked in Python (nearest rank, as percentile_disc). One heap pass instead
-- of two (counts, then percentile_disc): the pass is the cost of a long window (docs/benchmarks.md,
-- "Issue 13: page speed"). OFFSET 0 keeps the subquery's columns computed once per row; date_part
-- answers float8 (extract answers numeric: slower).
SELECT status, reason,
       count(*) FILTER (WHERE created_at >= :since) AS n,
       count(*) FILTER (WHERE created_at >= :since_5m) AS last_5m,
       count(*) FILTER (WHERE created_at >= :since_60m) AS last_60m,
       count(*) FILTER (WHERE scheduled) AS fire_n,
       count(started_at) FILTER (WHERE scheduled) AS start_n,
       array_agg(date_part('epoch', created_at - scheduled_for)) FILTER (WHERE scheduled AND ranked) AS fire,
       array_agg(date_part('epoch', started_at - scheduled_for))
           FILTER (WHERE scheduled AND ranked AND started_at IS NOT NULL) AS start
FROM (SELECT status, reason, created_at, scheduled_for, started_at,
             created_at >= :since AND origin = 'schedule' AND scheduled_for IS NOT NULL AS scheduled,
             (hashtext(id) & :sample_mask::int) = 0 AS ranked
      FROM runs WHERE created_at >= least(:since::timestamptz, :since_60m::timestamptz)
      OFFSET 0) AS w
GROUP BY status, reason;

-- name: owner_run_window_counts
SELECT status, reason,
       count(*) FILTER (WHERE created_at >= :since) AS n,
       count(*) FILTER (WHERE created_at >= :since_5m) AS last_5m,
       count(*) FILTER (WHERE created_at >= :since_60m) AS last_60m,
       count(*) FILTER (WHERE scheduled) AS fire_n,
       count(started_at) FILTER (WHERE scheduled) AS start_n,
       array_agg(date_part('epoch', created_at - scheduled_for)) FILTER (WHERE scheduled AND ranked) AS fire,
       array_agg(date_part('epoch', started_at - scheduled_for))
           FILTER (WHERE scheduled AND ranked AND started_at IS NOT NULL) AS start
FROM (SELECT status, reason, created_at, scheduled_for, started_at,
             created_at >= :since AND origin = 'schedule' AND scheduled_for IS NOT NULL AS scheduled,
             (hashtext(id) & :sample_mask::int) = 0 AS ranked
      FROM runs WHERE owner_id = :owner_id AND created_at >= least(:since::timestamptz, :since_60m::timestamptz)
      OFFSET 0) AS w
GROUP BY status, reason;

-- name: run_window_size
-- The runs created since :recent (the last hour of the window at most), counted in runs_created
-- alone: the estimate of the window's size that picks the lateness sample before the pass.
SELECT count(*) AS n FROM runs WHERE created_at >= :recent;

-- name: owner_run_window_size
SELECT count(*) AS n FROM runs WHERE owner_id = :owner_id AND created_at >= :recent;

-- name: waiting_run_ids
-- A bulk cancel's targets and its dry-run count (issue 13): the waiting runs matching the filter,
-- newest first, in one statement over the open runs (finished_at IS NULL implies runs_open's
-- predicate: the in-flight runs are read, never the history, whatever the filter).
SELECT id FROM runs
WHERE finished_at IS NULL AND status = ANY(:statuses::text[])
  AND (:owner_id::text IS NULL OR owner_id = :owner_id)
  AND (:automation_id::text IS NULL OR automation_id = :automation_id)
  AND (:created_after::timestamptz IS NULL OR created_at >= :created_after)
  AND (:created_before::timestamptz IS NULL OR created_at < :created_before)
  AND (:action_type::text IS NULL OR action_type = :action_type)
  AND (:origin::text IS NULL OR origin = :origin)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: attention_counts
-- The needs-attention counts (migration 0012): every UNKNOWN and DEAD run, and the FAILED runs
-- created since :failed_since, from runs_attention (kept by triggers on runs), each an index range
-- of runs_attention_status; never a read of runs.
SELECT (SELECT count(*) FROM runs_attention WHERE status = 'UNKNOWN') AS unknown,
       (SELECT count(*) FROM runs_attention WHERE status = 'DEAD') AS dead,
       (SELECT count(*) FROM runs_attention WHERE status = 'FAILED' AND created_at >= :failed_since) AS failed;

-- name: owner_attention_counts
SELECT (SELECT count(*) FROM runs_attention WHERE owner_id = :owner_id AND status = 'UNKNOWN') AS unknown,
       (SELECT count(*) FROM runs_attention WHERE owner_id = :owner_id AND status = 'DEAD') AS dead,
       (SELECT count(*) FROM runs_attention
        WHERE owner_id = :owner_id AND status = 'FAILED' AND created_at >= :failed_since) AS failed;

-- name: resolve_unknown_run
-- A manual verdict on an UNKNOWN run: compare-and-set on the status, so a run that moved on (or a
-- second resolution) changes nothing. UNKNOWN is final already: no lease, finished_at kept — and
-- named, so that runs_attention's trigger (0012: AFTER UPDATE OF finished_at) sees the change.
UPDATE runs SET status = :status, reason = :reason, updated_at = now(), finished_at = finished_at
WHERE id = :id AND status = 'UNKNOWN' AND (:owner_id::text IS NULL OR owner_id = :owner_id)
RETURNING *;

-- name: oldest_unpublished
SELECT created_at FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT 1;

-- name: requeue_outbox_message
UPDATE outbox SET published_at = NULL WHERE id = :id::bigint AND published_at IS NOT NULL RETURNING id;

-- name: dead_letter_counts
SELECT source, count(*) AS n FROM dead_letters GROUP BY source;

-- name: insert_automation_history
INSERT INTO automation_history (id, automation_id, owner_id, change, actor_id, key_id, "before", "after")
VALUES (:id, :automation_id, :owner_id, :change, :actor_id, :key_id, :before::jsonb, :after::jsonb)
RETURNING *;

-- name: copy_automation_history
COPY automation_history (id, automation_id, owner_id, change, actor_id, key_id, at, before, after) FROM STDIN;

-- name: upsert_instance
INSERT INTO instances (id, roles, actor_states, started_at, seen_at)
VALUES (:id, :roles::jsonb, :actor_states::jsonb, :started_at, now())
ON CONFLICT (id) DO UPDATE SET
    roles = EXCLUDED.roles, actor_states = EXCLUDED.actor_states, started_at = EXCLUDED.started_at,
    seen_at = EXCLUDED.seen_at
RETURNING *;

-- name: all_instances
SELECT * FROM instances ORDER BY id;

-- name: purge_instances
DELETE FROM instances WHERE seen_at < :before RETURNING id;

-- name: automation_history
SELECT * FROM automation_history
WHERE automation_id = :automation_id AND (:owner_id::text IS NULL OR owner_id = :owner_id)
  AND (:after_seq::bigint IS NULL OR seq > :after_seq)
ORDER BY seq
LIMIT :limit;

-- ---------------------------------------------------------------- retention (issue 14, migration 0010)
-- Each statement touches at most :limit rows (the sweeper's batch) and re-checks its condition on the
-- row it removes, so a run that finished (or a row that was published) after the scan is kept, and
-- two sweepers at once remove each row once.

-- name: retention_scan_runs
-- The next :limit runs created before the cutoff, in runs_created order after the cursor, whatever
-- their status: the sweeper deletes the finished ones among them and moves the cursor past all.
SELECT id, finished_at, created_at FROM runs
WHERE created_at < :before AND (created_at, id) > (:after_created::timestamptz, :after_id::text)
ORDER BY created_at, id
LIMIT :limit;

-- name: retention_delete_runs
-- Never an open run: finished_at is NULL exactly for the open statuses (CHECK runs_finished_shape).
DELETE FROM runs WHERE id = ANY(:ids::text[]) AND finished_at < :before RETURNING id;

-- name: retention_delete_audit
DELETE FROM audit WHERE run_id = ANY(:ids::text[]) RETURNING seq;

-- name: retention_scan_outbox
-- Outbox rows in id (insertion) order after the cursor; the sweeper stops at the first one created
-- after the cutoff instead of reading on to the end of the table.
SELECT id, created_at, published_at FROM outbox WHERE id > :after_id::bigint ORDER BY id LIMIT :limit;

-- name: retention_delete_outbox
-- Published rows only: an unpublished row is an event still owed to the bus.
DELETE FROM outbox WHERE id = ANY(:ids::bigint[]) AND published_at < :before RETURNING id;

-- name: retention_delete_dead_letters
DELETE FROM dead_letters
WHERE id IN (SELECT id FROM dead_letters WHERE created_at < :before ORDER BY created_at LIMIT :limit)
RETURNING id;

-- name: retention_delete_idempotency_keys
DELETE FROM idempotency_keys
WHERE key IN (SELECT key FROM idempotency_keys WHERE created_at < :before ORDER BY created_at LIMIT :limit)
RETURNING key;

-- name: acquire_job_lease
-- Taken when free or expired, renewed by its holder; None for anyone else.
INSERT INTO job_leases (name, owner, expires_at)
VALUES (:name, :owner, now() + make_interval(secs => :ttl_s::float8))
ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
WHERE job_leases.owner = EXCLUDED.owner OR job_leases.expires_at < now()
RETURNING name;

-- name: release_job_lease
DELETE FROM job_leases WHERE name = :name AND owner = :owner RETURNING name;

-- === issue 15: speed (batched renewals, the planner's backlog bound) ===

-- name: renew_leases
-- One statement for every run in flight: a renewal round never waits behind per-run statements.
UPDATE runs AS r SET lease_expires_at = now() + make_interval(secs => :lease_s::float8), updated_at = now()
FROM json_to_recordset(:rows::json) AS f (run_id text, epoch bigint)
WHERE r.id = f.run_id AND r.lease_owner = :owner AND r.lease_epoch = f.epoch
  AND r.status IN ('RUNNING', 'COMPENSATING')
RETURNING r.id;

-- name: count_backlog
-- PENDING and leased runs, each count stopped at :limit (read through runs_pending and runs_leased:
-- the cost is bounded by the limit, not by the backlog). A run planned ahead of its instant (fire-ahead)
-- is not backlog until its instant: it waits for no executor before then (the scan steps over those,
-- at most a lead window's instants).
SELECT (SELECT count(*) FROM (SELECT 1 FROM runs WHERE status = 'PENDING'
                              AND (not_before IS NULL OR not_before <= now()) LIMIT :limit) p)
     + (SELECT count(*) FROM (SELECT 1 FROM runs WHERE status IN ('RUNNING', 'COMPENSATING') LIMIT :limit) l) AS n;

-- name: insert_automations
-- A batch of new automations' specification rows in one statement (POST /v1/automations/batch, group
-- commit); RETURNING order is not the input's: the caller joins by id.
INSERT INTO automation_specs (id, owner_id, name, labels, session_id, agent_id, "trigger", action_type,
    action_config, policy, durable, end_at, created_by, created_by_key)
SELECT f.id, f.owner_id, f.name, f.labels, f.session_id, f.agent_id, f."trigger", f.action_type,
       f.action_config, f.policy, f.durable, f.end_at, f.created_by, f.created_by_key
FROM json_to_recordset(:rows::json)
     AS f (id text, owner_id text, name text, labels jsonb, session_id text, agent_id text, "trigger" jsonb,
           action_type text, action_config jsonb, policy jsonb, durable boolean, end_at timestamptz,
           created_by text, created_by_key text)
RETURNING *;

-- name: insert_automation_states
INSERT INTO automation_state (automation_id, "partition", enabled, status, next_run_at, version)
SELECT f.id, f."partition", f.enabled, f.status, f.next_run_at, 1
FROM json_to_recordset(:rows::json)
     AS f (id text, "partition" integer, enabled boolean, status text, next_run_at timestamptz)
RETURNING *;
