-- When an attempt started, an error's message apart from its stack, and attempt numbers that go on
-- across replays.
--
-- * `started_at` (runs and attempts) was the claim's time, which a worker claiming ahead
--   (`--claim-ahead`, 250 ms by default) takes before the slot: a run looked started early and its
--   duration was inflated. It is now the handler's start as the worker reports it, kept within
--   [claimed_at, the attempt's end]; where no start is reported (a reaped attempt, an older
--   worker), the earliest the handler could have started, the later of the claim and
--   `available_at`. The claim's time is kept apart in `claimed_at` (null on rows written before).
-- * `last_error` and `attempts.error` were the whole stack. They are now the message, and
--   `attempts.error_stack` the stack. Rows written before are split here: the text before the
--   first line of the form "    at …" is the message.
-- * A replay started the run over at attempt 1, so the attempts of two passes had the same
--   numbers. A replay now goes on from the last attempt with a fresh budget: `first_attempt` is the
--   attempt its pass began at, and `max_attempts` grows by the budget (max_attempts − first_attempt
--   + 1 before the replay), so "dead once attempt >= max_attempts" holds unchanged.
ALTER TABLE runs ADD COLUMN claimed_at timestamptz;
ALTER TABLE runs ADD COLUMN first_attempt integer NOT NULL DEFAULT 1;
ALTER TABLE attempts ADD COLUMN claimed_at timestamptz;
ALTER TABLE attempts ADD COLUMN error_stack text;

-- Rows written before keep claimed_at null (their started_at is the claim's time): filling it in
-- would rewrite every ended run, in the one transaction the migrations run in.

UPDATE attempts SET error_stack = error, error = substring(error FROM '^(.*?)\n {4}at ')
WHERE error ~ '\n {4}at ';
UPDATE runs SET last_error = substring(last_error FROM '^(.*?)\n {4}at ')
WHERE last_error ~ '\n {4}at ';

-- The view gains the claim's time (appended: a view's columns keep their places), and a running
-- run's start is the earliest its handler can start, the later of its claim and its available_at.
CREATE OR REPLACE VIEW run_states AS
SELECT r.run_id, r.tenant_id, r.job_id, r.scheduled_for,
  CASE WHEN c.lease_token IS NULL THEN r.state ELSE 'running' END AS state,
  r.attempt, r.max_attempts, r.handler, r.payload, r.pool, r.priority, r.backoff_base_seconds,
  r.backoff_cap_seconds, r.lease_seconds, r.timeout_seconds, r.available_at, r.sort_key,
  CASE WHEN c.lease_token IS NULL THEN r.lease_owner ELSE c.worker_id END AS lease_owner,
  CASE WHEN c.lease_token IS NULL THEN r.lease_token ELSE c.lease_token END AS lease_token,
  c.lease_expires_at, r.last_error, r.created_at,
  CASE WHEN c.lease_token IS NULL THEN r.started_at ELSE GREATEST(c.claimed_at, r.available_at) END AS started_at,
  r.finished_at, r.output, r.parked,
  CASE WHEN c.lease_token IS NULL THEN r.claimed_at ELSE c.claimed_at END AS claimed_at
FROM runs r
LEFT JOIN (
  SELECT x.run_id, c.lease_token, c.worker_id, c.claimed_at, c.lease_expires_at
  FROM run_claims c CROSS JOIN unnest(c.run_ids) AS x(run_id)
) c ON c.run_id = r.run_id AND r.state = 'pending';

COMMENT ON COLUMN runs.started_at IS
  'When the handler of the last ended attempt started (reported by the worker, within [claimed_at, end]); unreported: greatest(claimed_at, available_at).';
COMMENT ON COLUMN runs.claimed_at IS 'When the last ended attempt was claimed (up to the claim-ahead before its slot).';
COMMENT ON COLUMN runs.first_attempt IS 'The attempt the current pass began at: 1, or after a replay the attempt after the last.';
COMMENT ON COLUMN attempts.error_stack IS 'The stack of the error whose message is in error, when the handler threw one.';
