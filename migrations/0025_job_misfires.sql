-- Misfires per job, in the database (issue 22, item 3): a tick that finds a job behind (its
-- next_run_at older than the misfire threshold) lets the job's policy drop missed slots, and until
-- now only the scheduler's log line and its tick result counted them, in that one process. Now the
-- tick's job update (`jobAdvanceMany`, which writes next_run_at anyway) also adds the slots dropped
-- to `misfired_slots` and sets `misfired_at` to the tick's instant, so every server's metrics read
-- the same: the `tock_job_misfired_slots` and `tock_job_last_misfire_timestamp_seconds` gauges list
-- the jobs whose last misfire is recent.
--
-- * `misfired_slots`: slots dropped since the job was created, where countable (a cron backlog too
--   long to walk is recorded in `misfired_at` without a count).
-- * `misfired_at`: the last tick that found the job behind and dropped slots; null: never.
-- * `jobs_misfired`: the recent misfires, newest first, without reading every job. Partial: a job
--   that never misfired has no entry. The tick's update of jobs is never HOT (it writes next_run_at,
--   which `jobs_due` indexes), so this index adds an entry to the updates of jobs that misfired
--   once, and changes nothing for the others; `runs` and the completions are untouched.
ALTER TABLE jobs ADD COLUMN misfired_slots bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN misfired_at timestamptz;
CREATE INDEX jobs_misfired ON jobs (misfired_at DESC) WHERE misfired_at IS NOT NULL;

COMMENT ON COLUMN jobs.misfired_slots IS 'Slots the misfire policy dropped since the job was created, where countable.';
COMMENT ON COLUMN jobs.misfired_at IS 'The last tick that found the job behind and dropped slots; null: never.';
