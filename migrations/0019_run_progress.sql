-- Progress and logs from a handler (issue 19, item 6): `ctx.progress(n, message?)` and
-- `ctx.log(line)`, shown by `GET /v1/runs/{id}` and `tock runs show` while the run goes on and after.
--
-- One row per attempt that reported anything, keyed like `attempts` by the attempt's lease token
-- (a released attempt keeps its number, so the number alone does not name an attempt), with the
-- run first so that a run's rows are one index range (its reads, and the cascade when a run is
-- deleted). A separate table rather than columns of `attempts` or `run_claims`: the running
-- attempt has no `attempts` row and its claim is shared by a batch of runs, and an attempt that
-- reports nothing (most) costs nothing: no row, and the heartbeat's statement writes none.
--
-- The worker sends what its handler reported with its next heartbeat (and the rest with the
-- result); the store writes it in the heartbeat's (or the result's) statement, only for a run whose
-- lease that statement found live. Progress is any finite number, the latest wins, with its message
-- (at most 200 characters); `logs` is the attempt's last 100 lines (each at most 1,000 characters),
-- trimmed on write, and `logs_dropped` counts the lines dropped to keep it so (by the store or,
-- before they were sent, by the worker). Text is sanitised before it is written.
--
-- fillfactor 50: a long run reporting every second rewrites its row; room on the page keeps those
-- updates HOT (no index column changes).
CREATE TABLE attempt_progress (
  run_id       uuid NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  lease_token  uuid NOT NULL,
  progress     double precision,
  message      text,
  logs         text[] NOT NULL DEFAULT '{}',
  logs_dropped bigint NOT NULL DEFAULT 0 CHECK (logs_dropped >= 0),
  updated_at   timestamptz NOT NULL,
  PRIMARY KEY (run_id, lease_token)
) WITH (fillfactor = 50);

COMMENT ON TABLE attempt_progress IS
  'What a handler reported (ctx.progress, ctx.log) per attempt: latest progress and message, last 100 log lines.';
COMMENT ON COLUMN attempt_progress.logs_dropped IS 'Log lines dropped, oldest first, to keep the last 100.';
