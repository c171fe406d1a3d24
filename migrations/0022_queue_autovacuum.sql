-- Autovacuum of the queue tables by a fixed number of rows (issue 21, item 3). Every run passes
-- through run_queue (inserted, then deleted by its claim) and run_claims (one row per claim,
-- shrunk by completions, then deleted): both churn every row, and their dead rows are what the
-- autovacuum must keep up with, whatever the number of live rows.
--
-- Until now both had autovacuum_vacuum_scale_factor 0.02 (migration 0007): a threshold of
-- 50 + 2 % of the live rows, which grows with a standing backlog (500,000 queued runs of a pool no
-- worker serves: 10,050 dead rows before a vacuum). Now:
-- * run_queue: 1,000 dead (or inserted) rows, about 2 s of churn at 500 runs/s, at any size;
-- * run_claims: 100 dead (or inserted) rows: a claim is one row for a batch of runs, so at 500
--   runs/s it gathered about 700 dead rows a minute; a threshold of 2,000 (tried) had it vacuumed
--   once in 210 s against 3 times (2,182 dead rows, 0.58 MB against 0.39-0.44 MB);
-- * no cost-based sleeps (autovacuum_vacuum_cost_delay 0): both are small and hot, and a vacuum
--   that sleeps leaves the claims scanning dead rows longer (run_queue's 20 vacuums in 210 s at
--   a 10 s naptime took 0.32 s in all, against 0.97 s with the 2 ms default);
-- * analyze stays at 2 % of the rows (the defaults' 50 rows plus it), as before.
--
-- Measured with bench/vacuum.mjs (a private PostgreSQL 15, autovacuum on, 500 runs/s through a
-- real Worker for 210 s; docs/benchmarks.md has the table). What bounds these tables is how often
-- the autovacuum visits the database, autovacuum_naptime, a server setting no migration can
-- change: at the default 1 min, both settings vacuumed run_queue on each visit (3 in 210 s), which
-- peaked at 37,000 dead rows and 6.4-6.7 MB; at 10 s, 4,700 dead rows and 1.2-1.3 MB. With the
-- 500,000-run backlog at a 10 s naptime, the fixed threshold vacuumed run_queue 22 times against
-- 12 and held 4,700 dead rows on average against 8,100 (13,750 at most against 14,900), in
-- 0.57 s of vacuuming against 2.01 s; sizes were the same (79 MB, the backlog's).
ALTER TABLE run_queue SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0,
  autovacuum_vacuum_insert_threshold = 1000,
  autovacuum_analyze_scale_factor = 0.02,
  autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE run_claims SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 100,
  autovacuum_vacuum_insert_scale_factor = 0,
  autovacuum_vacuum_insert_threshold = 100,
  autovacuum_analyze_scale_factor = 0.02,
  autovacuum_vacuum_cost_delay = 0
);
