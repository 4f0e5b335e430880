-- Bounded history under load (issue 14): per-table autovacuum settings for the three tables the
-- retention sweeper deletes from (runs, audit, outbox). See docs/storage.md, "Retention".
--
-- The server's defaults vacuum a table once a fifth of it is dead (scale factor 0.2): with a 30-day
-- retention that is six days of deleted runs kept as dead tuples before any of their space is reused,
-- so the table grows by that much beyond its live rows, and the claim and finish paths read through
-- it. One percent (plus a floor of 1000 rows, so a small table is not vacuumed for every few rows)
-- keeps the dead part small whatever the retention. The same for the insert-driven vacuum (audit and
-- outbox rows are inserted, then only deleted: it sets their pages all-visible and freezes them in
-- small steps, not in one pass over the whole table at the wraparound limit).
--
-- A cost limit of 1000 (the server's is 200 by default): a vacuum of these tables runs five times as
-- fast between its 2 ms sleeps, and a table with a cost setting of its own is left out of the
-- balancing that shares the limit among all running autovacuum workers — other tables' vacuums do
-- not slow it down. Analyze at two percent: the planner's row counts follow a table whose rows come
-- and go at the same rate.
--
-- autovacuum_naptime (60 s by default: each table is looked at once a minute at most) is a server
-- setting, not a table's: the sweeper's deletes of one minute wait for the next look.
ALTER TABLE runs SET (
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_vacuum_cost_delay = 2, autovacuum_vacuum_cost_limit = 1000,
    autovacuum_analyze_scale_factor = 0.02
);
ALTER TABLE audit SET (
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_vacuum_cost_delay = 2, autovacuum_vacuum_cost_limit = 1000,
    autovacuum_analyze_scale_factor = 0.02
);
ALTER TABLE outbox SET (
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_vacuum_cost_delay = 2, autovacuum_vacuum_cost_limit = 1000,
    autovacuum_analyze_scale_factor = 0.02
);
