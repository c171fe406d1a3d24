-- A misfire threshold per job (issue 15, item 12). A job is behind, and its misfire policy applies,
-- when its next_run_at is older than this many seconds; NULL takes the scheduler's default (the
-- store's `misfireThresholdMs`, 60 s). Read by the due scan (`jobDueLock`) only: no index.
ALTER TABLE jobs ADD COLUMN misfire_threshold_seconds integer
  CHECK (misfire_threshold_seconds BETWEEN 0 AND 86400);
