-- Throughput: fewer index writes per run. A claim and a completion each change `state`, so neither
-- is a HOT update, and each puts a new entry into every index of `runs` whose predicate the new row
-- meets. This keeps the indexes the hot path does not need off it:
-- * runs_history duplicated the unique (tenant_id, job_id, scheduled_for) index, which serves a
--   job's history (the slot is unique within a job, so the run id adds no order).
-- * runs_by_state covered every state. Pending and running runs are few and have their own partial
--   indexes (runs_ready, runs_running); listing by state needs an index for the finished ones,
--   which are most of the table. A claim (pending -> running) now writes no entry to it.
DROP INDEX runs_history;
DROP INDEX runs_by_state;
CREATE INDEX runs_finished ON runs (tenant_id, state, scheduled_for DESC, run_id DESC)
  WHERE state IN ('succeeded', 'dead', 'cancelled');

-- Attempt rows: an attempt that ends in a failure, a release or an expired lease gets its row when
-- it ends, from the run row, which holds the running attempt's number, worker (lease_owner), token
-- and start. The attempt that succeeds is the run row itself: its worker, start, finish and the
-- handler's output (the new column) are on it, so a success writes no second row. Rows an earlier
-- version wrote at claim for attempts still running say nothing the run row does not.
ALTER TABLE runs ADD COLUMN output text;
DELETE FROM attempts WHERE outcome IS NULL;
COMMENT ON TABLE attempts IS
  'One row per attempt that ended in failure, release or an expired lease; the running or succeeded attempt is its run row.';
