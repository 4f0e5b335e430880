-- Bounded history (issue 14): finished runs with their audit rows, published outbox rows, dead
-- letters and idempotency keys are removed once older than the retention, in bounded batches, by
-- the retention sweeper (actwheel/actors/retention.py). See docs/storage.md, "Retention".
--
-- Runs are found by creation time through runs_created (created_at, id) from 0008 (a retention
-- test checks it is there), not through an index on finished_at: see the PostgreSQL twin of this file.
-- The freed pages are given back to the file by PRAGMA incremental_vacuum after each batch. That
-- needs auto_vacuum = INCREMENTAL, which an existing database only takes on a VACUUM, and VACUUM
-- cannot run inside the migration's transaction: the store sets it when it starts (a new file gets
-- it before its first table; an existing one is vacuumed once if it is small, else a warning says
-- how to do it by hand).
CREATE INDEX dead_letters_created ON dead_letters (created_at);

CREATE TABLE job_leases (
    name        text PRIMARY KEY,
    owner       text NOT NULL,
    expires_at  integer NOT NULL
);
