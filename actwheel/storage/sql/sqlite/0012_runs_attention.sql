-- The dashboard's "needs attention" counts (issue 13): one row per UNKNOWN, DEAD or FAILED run, kept
-- by triggers in the statement that moves a run in or out (or inserts or deletes it). See the
-- PostgreSQL migration of the same number for why a table and not a partial index on runs.status,
-- and why the update trigger is on finished_at (a claim is not checked; resolve_unknown_run names it).
CREATE TABLE runs_attention (
    run_id      text PRIMARY KEY,
    owner_id    text NOT NULL,
    status      text NOT NULL CHECK (status IN ('UNKNOWN', 'DEAD', 'FAILED')),
    created_at  integer NOT NULL
);
CREATE INDEX runs_attention_status ON runs_attention (status, created_at);
CREATE INDEX runs_attention_owner ON runs_attention (owner_id, status, created_at);

CREATE TRIGGER runs_attention_insert AFTER INSERT ON runs
WHEN NEW.status IN ('UNKNOWN', 'DEAD', 'FAILED')
BEGIN
    INSERT OR REPLACE INTO runs_attention (run_id, owner_id, status, created_at)
    VALUES (NEW.id, NEW.owner_id, NEW.status, NEW.created_at);
END;

CREATE TRIGGER runs_attention_update AFTER UPDATE OF finished_at ON runs
WHEN OLD.status IS NOT NEW.status
     AND (OLD.status IN ('UNKNOWN', 'DEAD', 'FAILED') OR NEW.status IN ('UNKNOWN', 'DEAD', 'FAILED'))
BEGIN
    DELETE FROM runs_attention WHERE run_id = OLD.id;
    INSERT INTO runs_attention (run_id, owner_id, status, created_at)
    SELECT NEW.id, NEW.owner_id, NEW.status, NEW.created_at WHERE NEW.status IN ('UNKNOWN', 'DEAD', 'FAILED');
END;

CREATE TRIGGER runs_attention_delete AFTER DELETE ON runs
WHEN OLD.status IN ('UNKNOWN', 'DEAD', 'FAILED')
BEGIN
    DELETE FROM runs_attention WHERE run_id = OLD.id;
END;

INSERT INTO runs_attention (run_id, owner_id, status, created_at)
SELECT id, owner_id, status, created_at FROM runs WHERE status IN ('UNKNOWN', 'DEAD', 'FAILED');
