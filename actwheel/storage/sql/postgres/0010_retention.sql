-- Bounded history (issue 14): finished runs with their audit rows, published outbox rows, dead
-- letters and idempotency keys are removed once older than the retention, in bounded batches, by
-- the retention sweeper (actwheel/actors/retention.py). See docs/storage.md, "Retention".
--
-- Runs are found by creation time through runs_created (created_at, id), the index the dashboard
-- added in 0008 (a retention test checks it is there), not through an index on finished_at: a finish
-- is not a HOT update already (it moves finished_at, runs_open's predicate), so it writes an entry
-- in every index of runs, and an index on finished_at would add one more per finish, for the
-- sweeper's sake alone. A run is removed when it finished before the cutoff; it was created before
-- it too (created_at <= finished_at), so the creation-time range holds every candidate.
-- Dead letters by age (they had only (source, created_at)). They are few: the index costs nothing.
CREATE INDEX dead_letters_created ON dead_letters (created_at);

-- One holder at a time for periodic jobs of the whole installation (the retention sweeper): a
-- lease by name, on the database clock, renewed by its holder, taken over once expired. Speed
-- only (invariant 9): every delete re-checks its condition, so two holders at once are harmless.
-- Not partition_leases: tickers count that table's owners to share the partitions.
CREATE TABLE job_leases (
    name        text PRIMARY KEY,
    owner       text NOT NULL,
    expires_at  timestamptz NOT NULL
);
