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

-- An attempt row is now written once, when the attempt ends (completion, failure, release or
-- expiry), from the run row, which holds the running attempt's worker, token and start. A row
-- written at claim by an earlier version is completed in place (ON CONFLICT on the token).
COMMENT ON TABLE attempts IS 'One row per finished attempt (a claim that ended); the running attempt is on its run row.';
