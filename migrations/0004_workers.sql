-- Workers: a per-job timeout (snapshotted on each run) and the tail of each attempt's output.
ALTER TABLE jobs ADD COLUMN timeout_seconds integer CHECK (timeout_seconds BETWEEN 1 AND 86400);
ALTER TABLE runs ADD COLUMN timeout_seconds integer;
ALTER TABLE attempts ADD COLUMN output text;
