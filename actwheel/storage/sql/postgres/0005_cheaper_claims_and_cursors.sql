-- HOT updates for the two hottest writes: the cursor advance and the claim.
--
-- PostgreSQL updates a row in place on its page (a HOT update: no new entry in any index) only
-- when no column that an index uses, in its key or in its predicate, changes and the page has
-- room for the new version. Before this migration neither write qualified:
--   * the cursor advance moved next_run_at, the key of both due indexes and a column of their
--     predicate (next_run_at IS NOT NULL): three new index entries per fire;
--   * the claim moved status (in the predicates of runs_pending and runs_leased), updated_at
--     (runs_pending's key) and lease_expires_at (runs_leased's key): a new entry in every index
--     of runs, four per claim, the unique ones with a uniqueness check each.
--
-- automation_state: the due indexes are keyed by the hour that next_run_at falls in (due_bucket,
-- a stored generated column, so it cannot disagree with next_run_at). An advance within the
-- same hour changes no indexed column; the due queries bound the bucket, then next_run_at.
ALTER TABLE automation_state SET (fillfactor = 50);
ALTER TABLE automation_state ADD COLUMN due_bucket timestamptz
    GENERATED ALWAYS AS (date_bin('1 hour', next_run_at, TIMESTAMPTZ '2000-01-01 00:00:00+00')) STORED;
DROP INDEX automation_state_due;
DROP INDEX automation_state_due_any;
CREATE INDEX automation_state_due ON automation_state ("partition", due_bucket)
    WHERE enabled AND status = 'ACTIVE' AND due_bucket IS NOT NULL;
CREATE INDEX automation_state_due_any ON automation_state (due_bucket)
    WHERE enabled AND status = 'ACTIVE' AND due_bucket IS NOT NULL;

-- runs: the three status-keyed partial indexes give way to one index of the open runs
-- (finished_at IS NULL), keyed by automation (the overlap check reads it, instead of an
-- automation's whole history through runs_automation_time). A claim changes none of its
-- columns, so with room on the page (fillfactor 50: half of each page is kept for the claimed
-- versions) a claim writes no index entry. Sweeps (stale PENDING, expired leases, due retries)
-- read the open runs, which are what is in flight, not the history.
-- The index is only right if finished_at is NULL exactly for the open statuses: the CHECK makes
-- it so (rows written before it are made to agree first).
UPDATE runs SET finished_at = NULL
WHERE status IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING') AND finished_at IS NOT NULL;
UPDATE runs SET finished_at = updated_at
WHERE status NOT IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING') AND finished_at IS NULL;
ALTER TABLE runs ADD CONSTRAINT runs_finished_shape CHECK (
    (finished_at IS NULL) = (status IN ('PENDING', 'RUNNING', 'RETRY_WAIT', 'COMPENSATING')));
-- A run's JSON values are snapshots written once and read whole, never queried inside: json
-- (checked, stored as sent) instead of jsonb (parsed into a tree on the way in, printed back on
-- the way out) costs the server ≈ 1 µs less per run created, and less per run claimed (the claim
-- returns them). This rewrites the table, at its old fillfactor, before the new one is set.
ALTER TABLE runs
    ALTER COLUMN action_config TYPE json, ALTER COLUMN policy TYPE json, ALTER COLUMN context TYPE json,
    ALTER COLUMN result TYPE json, ALTER COLUMN error TYPE json;
ALTER TABLE runs ALTER COLUMN context SET DEFAULT '{}'::json;
ALTER TABLE runs SET (fillfactor = 50);
DROP INDEX runs_pending;
DROP INDEX runs_leased;
DROP INDEX runs_retry_wait;
CREATE INDEX runs_open ON runs (automation_id) WHERE finished_at IS NULL;

-- outbox: the relay's wake-up is sent by the insert itself (one NOTIFY per statement, and
-- PostgreSQL folds equal notifications of a transaction into one, delivered at commit), instead
-- of one more round trip per committing transaction. The channel is per schema, as the
-- listener computes it.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('actwheel_outbox_' || left(encode(sha256(convert_to(TG_TABLE_SCHEMA, 'UTF8')), 'hex'), 12), '');
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- Outbox bodies of batched events run to tens of kilobytes: lz4 compresses them several times
-- faster than the default pglz (where the server was built without lz4, pglz stays).
DO $$
BEGIN
    ALTER TABLE outbox ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available: outbox bodies keep the default compression';
END
$$;
