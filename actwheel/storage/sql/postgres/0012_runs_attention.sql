-- The dashboard's "needs attention" counts (issue 13): every UNKNOWN and DEAD run whatever its age,
-- and the FAILED runs by creation time, without reading runs and without an index on runs.status.
--
-- runs_attention holds one row per run whose status is UNKNOWN, DEAD or FAILED, written by the
-- triggers below in the transaction that moves the run there (or inserts it so) and removed in the
-- one that moves it out (an UNKNOWN run resolved to SUCCEEDED) or deletes it (the retention
-- sweeper): the database keeps it right, whichever statement changes a run. The counts read it
-- through its own small indexes (see docs/benchmarks.md, "Issue 13: page speed").
--
-- Why not a partial index on runs (status) WHERE status IN ('UNKNOWN', 'DEAD'): PostgreSQL makes an
-- update HOT only when no column that any index uses, in its key or in its predicate, changes. A
-- claim changes status (PENDING → RUNNING), so such an index would make every claim a non-HOT
-- update again, undoing 0005 (measured: 0 % of claims HOT instead of ≈ 90 %, claim_many +12 to +26 µs
-- per run, +40–85 %; bench/attention.py). A trigger is not an index: claims stay HOT.
--
-- Which statements the triggers see: an insert (WHEN on the new status), a delete (WHEN on the old),
-- and an UPDATE that names finished_at. Every status change between an open status (finished_at
-- NULL) and a final one must name finished_at — CHECK runs_finished_shape (0005) refuses it
-- otherwise — so finish, recover_expired and the cancels are seen; a claim (PENDING → RUNNING, both
-- open) and a lease renewal do not name it: their rows are never checked against the WHEN clause.
-- The one change between two final statuses, resolve_unknown_run (UNKNOWN → SUCCEEDED / FAILED),
-- names it (finished_at = finished_at) for that reason: a new statement moving a finished run to
-- another final status must do the same (tests/storage/test_storage_attention.py checks each path).
--
-- What it costs (server time per row, triggers enabled vs disabled, alternating; docs/benchmarks.md,
-- "Issue 13: page speed"): PostgreSQL fetches the old row version for every row of any UPDATE of a
-- table with an AFTER ROW UPDATE trigger, before it looks at the trigger's column list: ≈ +1 µs per
-- claimed (or renewed) row, the claim still HOT; a finish ≈ +2 µs per row with 7 % of runs ending
-- UNKNOWN, DEAD or FAILED, ≈ +17 µs for each run that does (the function and three index entries
-- here); an insert, nothing measurable.
CREATE TABLE runs_attention (
    run_id      text PRIMARY KEY,
    owner_id    text NOT NULL,
    status      text NOT NULL CHECK (status IN ('UNKNOWN', 'DEAD', 'FAILED')),
    created_at  timestamptz NOT NULL
);
CREATE INDEX runs_attention_status ON runs_attention (status, created_at);
CREATE INDEX runs_attention_owner ON runs_attention (owner_id, status, created_at);

CREATE FUNCTION runs_attention_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.status IN ('UNKNOWN', 'DEAD', 'FAILED') THEN
        DELETE FROM runs_attention WHERE run_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.status IN ('UNKNOWN', 'DEAD', 'FAILED') THEN
        INSERT INTO runs_attention (run_id, owner_id, status, created_at)
        VALUES (NEW.id, NEW.owner_id, NEW.status, NEW.created_at)
        ON CONFLICT (run_id) DO UPDATE SET status = EXCLUDED.status;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER runs_attention_insert AFTER INSERT ON runs FOR EACH ROW
    WHEN (NEW.status IN ('UNKNOWN', 'DEAD', 'FAILED')) EXECUTE FUNCTION runs_attention_sync();
CREATE TRIGGER runs_attention_update AFTER UPDATE OF finished_at ON runs FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          AND (OLD.status IN ('UNKNOWN', 'DEAD', 'FAILED') OR NEW.status IN ('UNKNOWN', 'DEAD', 'FAILED')))
    EXECUTE FUNCTION runs_attention_sync();
CREATE TRIGGER runs_attention_delete AFTER DELETE ON runs FOR EACH ROW
    WHEN (OLD.status IN ('UNKNOWN', 'DEAD', 'FAILED')) EXECUTE FUNCTION runs_attention_sync();

-- The runs already there (one pass over runs, once).
INSERT INTO runs_attention (run_id, owner_id, status, created_at)
SELECT id, owner_id, status, created_at FROM runs WHERE status IN ('UNKNOWN', 'DEAD', 'FAILED');
