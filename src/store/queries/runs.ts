/** Every statement on `runs` and `attempts`. Parameters are positional; each constant's comment lists them. */

export const RUN_COLUMNS = `run_id, tenant_id, job_id, scheduled_for, state, attempt, max_attempts, handler,
  payload, pool, priority, available_at, lease_owner, lease_expires_at, last_error, created_at,
  started_at, finished_at`;

/**
 * $1 tenants, $2 jobs, $3 slots, $4 sort keys, $5 now, $6 available_at (slot + jitter).
 * Materialises slots from their (locked) jobs; a slot that already has a run is skipped silently.
 */
export const runInsertSlots = `
INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
  backoff_base_seconds, backoff_cap_seconds, lease_seconds, timeout_seconds, available_at, sort_key, created_at)
SELECT j.tenant_id, j.job_id, v.slot, j.max_attempts, j.handler, j.payload, j.pool, j.priority,
  j.backoff_base_seconds, j.backoff_cap_seconds, j.lease_seconds, j.timeout_seconds, v.available_at, v.sort_key, $5
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $6::timestamptz[])
  AS v(tenant_id, job_id, slot, sort_key, available_at)
JOIN jobs j ON j.tenant_id = v.tenant_id AND j.job_id = v.job_id
ON CONFLICT (tenant_id, job_id, scheduled_for) DO NOTHING
RETURNING run_id, tenant_id, job_id, scheduled_for`;

/** $1 tenant, $2 job, $3 slot */
export const runBySlot = `SELECT run_id FROM runs WHERE tenant_id = $1 AND job_id = $2 AND scheduled_for = $3`;

/** $1 tenant, $2 run */
export const runGet = `SELECT ${RUN_COLUMNS} FROM runs WHERE tenant_id = $1 AND run_id = $2`;

/**
 * $1 run. The attempts that ended in failure, release or expiry have rows; the running or
 * succeeded attempt is read from the run row. (A row an earlier version wrote at claim, outcome
 * still null, is the run row's attempt again, so it is not shown.)
 */
export const attemptsOfRun = `
SELECT attempt, worker_id, started_at, finished_at, outcome, error, output
FROM attempts WHERE run_id = $1 AND outcome IS NOT NULL
UNION ALL
SELECT r.attempt, r.lease_owner, r.started_at,
  CASE WHEN r.state = 'succeeded' THEN r.finished_at END,
  CASE WHEN r.state = 'succeeded' THEN 'succeeded' END, NULL, r.output
FROM runs r WHERE r.run_id = $1 AND r.state IN ('running', 'succeeded')
ORDER BY started_at, attempt`;

/**
 * The row of attempts that just ended in failure, release or expiry, from the rows a CTE named
 * "ended" returned: lease_token, run_id, ended_attempt (the attempt that ended), lease_owner,
 * started_at, outcome, error, output. Completes in place a row an earlier version wrote at claim.
 */
const recordEnded = (finishedAt: string) => `
  INSERT INTO attempts (lease_token, run_id, attempt, worker_id, started_at, finished_at, outcome, error, output)
  SELECT lease_token, run_id, ended_attempt, lease_owner, started_at, ${finishedAt}, outcome, error, output FROM ended
  ON CONFLICT (lease_token) DO UPDATE SET finished_at = EXCLUDED.finished_at, outcome = EXCLUDED.outcome,
    error = EXCLUDED.error, output = EXCLUDED.output`;

/**
 * $1 tenant, $2 job, $3 state (or null), $4 cursor slot (or null), $5 limit.
 * One job's history newest first, on the unique (tenant_id, job_id, scheduled_for) index: the slot
 * is unique within a job, so it alone orders the page and continues strictly after the cursor.
 */
export const runListOfJob = `
SELECT ${RUN_COLUMNS} FROM runs
WHERE tenant_id = $1 AND job_id = $2
  AND ($3::text IS NULL OR state = $3)
  AND ($4::timestamptz IS NULL OR scheduled_for < $4::timestamptz)
ORDER BY scheduled_for DESC
LIMIT $5`;

/**
 * $1 tenant, $2 state (or null), $3 cursor slot (or null), $4 cursor run id, $5 limit.
 * A tenant's runs newest first; the row comparison continues strictly after the cursor. A finished
 * state reads runs_finished; pending and running runs are few (their partial indexes hold them).
 */
export const runList = `
SELECT ${RUN_COLUMNS} FROM runs
WHERE tenant_id = $1
  AND ($2::text IS NULL OR state = $2)
  AND ($3::timestamptz IS NULL OR (scheduled_for, run_id) < ($3::timestamptz, $4::uuid))
ORDER BY scheduled_for DESC, run_id DESC
LIMIT $5`;

/** $1 tenant (or null) */
export const runCountByState = `
SELECT state, count(*)::int AS n FROM runs WHERE ($1::text IS NULL OR tenant_id = $1) GROUP BY state`;

/**
 * $1 pool, $2 now, $3 max, $4 worker, $5 default lease ms, $6 handlers (or null), $7 tenant (or null),
 * $8 ahead ms (runs becoming claimable up to this long after now are claimed too; 0: only due ones).
 * The claim. The LIMIT … SKIP LOCKED select sits in a CTE (a subquery in IN (…) may be re-run and
 * claim more than $3) and the UPDATE re-checks the state. The attempt's row is written when it ends.
 */
export const runClaim = `
WITH picked AS (
  SELECT run_id FROM runs
  WHERE state = 'pending' AND pool = $1 AND available_at <= $2::timestamptz + $8::int * interval '1 millisecond'
    AND ($6::text[] IS NULL OR handler = ANY($6::text[]))
    AND ($7::text IS NULL OR tenant_id = $7)
  ORDER BY sort_key
  LIMIT $3
  FOR UPDATE SKIP LOCKED
), claimed AS (
  UPDATE runs r SET state = 'running', lease_owner = $4, lease_token = gen_random_uuid(),
    lease_expires_at = $2::timestamptz + COALESCE(r.lease_seconds * 1000, $5) * interval '1 millisecond',
    started_at = $2
  FROM picked
  WHERE r.run_id = picked.run_id AND r.state = 'pending'
  RETURNING r.run_id, r.tenant_id, r.job_id, r.handler, r.payload, r.pool, r.scheduled_for, r.attempt,
    r.max_attempts, r.lease_token, r.lease_expires_at, r.sort_key, r.available_at, r.timeout_seconds
)
SELECT run_id, tenant_id, job_id, handler, payload, pool, scheduled_for, attempt, max_attempts, lease_token,
  lease_expires_at, available_at, timeout_seconds
FROM claimed ORDER BY sort_key`;

/**
 * $1 run ids, $2 tokens, $3 now, $4 default lease ms, $5 tenant (or null).
 * Renews every live lease; the rest are lost.
 */
export const runHeartbeatMany = `
UPDATE runs r SET lease_expires_at = $3::timestamptz + COALESCE(r.lease_seconds * 1000, $4) * interval '1 millisecond'
FROM unnest($1::uuid[], $2::uuid[]) AS v(run_id, lease_token)
WHERE r.run_id = v.run_id AND r.lease_token = v.lease_token AND r.state = 'running' AND r.lease_expires_at > $3
  AND ($5::text IS NULL OR r.tenant_id = $5)
RETURNING r.run_id, r.lease_expires_at`;

/**
 * $1 run ids, $2 tokens, $3 now, $4 tenant (or null), $5 output tails (or nulls).
 * Success, only under a live lease. The succeeded attempt is the run row (worker, start, finish,
 * output): no attempt row is written.
 */
export const runCompleteMany = `
UPDATE runs r SET state = 'succeeded', finished_at = $3, lease_expires_at = NULL, last_error = NULL,
  output = v.output
FROM unnest($1::uuid[], $2::uuid[], $5::text[]) AS v(run_id, lease_token, output)
WHERE r.run_id = v.run_id AND r.lease_token = v.lease_token AND r.state = 'running' AND r.lease_expires_at > $3
  AND ($4::text IS NULL OR r.tenant_id = $4)
RETURNING r.run_id`;

/** $1 run, $2 token, $3 now, $4 tenant (or null). What a failure needs to decide between retry and dead letter. */
export const runFailRead = `
SELECT attempt, max_attempts, priority, backoff_base_seconds, backoff_cap_seconds
FROM runs WHERE run_id = $1 AND lease_token = $2 AND state = 'running' AND lease_expires_at > $3
  AND ($4::text IS NULL OR tenant_id = $4)`;

/**
 * $1 run, $2 token, $3 now, $4 new state ('pending' | 'dead'), $5 available_at, $6 sort_key, $7 error,
 * $8 output tail (or null).
 * A failed attempt under a live lease: retry (next attempt) or dead letter.
 */
export const runFail = `
WITH ended AS (
  UPDATE runs SET state = $4,
    attempt = attempt + CASE WHEN $4 = 'pending' THEN 1 ELSE 0 END,
    available_at = COALESCE($5, available_at), sort_key = COALESCE($6, sort_key),
    last_error = $7, lease_expires_at = NULL,
    finished_at = CASE WHEN $4 = 'dead' THEN $3::timestamptz END
  WHERE run_id = $1 AND lease_token = $2 AND state = 'running' AND lease_expires_at > $3
  RETURNING run_id, lease_token, attempt, available_at,
    attempt - CASE WHEN $4 = 'pending' THEN 1 ELSE 0 END AS ended_attempt, lease_owner, started_at,
    'failed'::text AS outcome, $7::text AS error, $8::text AS output
), recorded AS (${recordEnded('$3::timestamptz')}
)
SELECT attempt, available_at FROM ended`;

/**
 * $1 run ids, $2 tokens, $3 now, $4 reason, $5 tenant (or null). Back to pending, same attempt, same place in the queue;
 * only under a live lease (an expired one is the reaper's, and counts as an attempt).
 */
export const runReleaseMany = `
WITH ended AS (
  UPDATE runs r SET state = 'pending', lease_expires_at = NULL
  FROM unnest($1::uuid[], $2::uuid[]) AS v(run_id, lease_token)
  WHERE r.run_id = v.run_id AND r.lease_token = v.lease_token AND r.state = 'running' AND r.lease_expires_at > $3
    AND ($5::text IS NULL OR r.tenant_id = $5)
  RETURNING r.run_id, r.lease_token, r.attempt AS ended_attempt, r.lease_owner, r.started_at,
    'released'::text AS outcome, $4::text AS error, NULL::text AS output
), recorded AS (${recordEnded('$3::timestamptz')}
)
SELECT run_id FROM ended`;

/** $1 now, $2 batch. Runs whose lease expired, oldest expiry first. */
export const runReapCandidates = `
SELECT run_id, lease_token, tenant_id, job_id, scheduled_for, attempt, max_attempts, priority,
  backoff_base_seconds, backoff_cap_seconds
FROM runs WHERE state = 'running' AND lease_expires_at < $1
ORDER BY lease_expires_at LIMIT $2`;

/**
 * $1 run ids, $2 tokens, $3 new states, $4 available_at, $5 sort keys, $6 now.
 * Guarded by the token read and the expiry, so a run completed or re-claimed since stays as it is.
 */
export const runReap = `
WITH ended AS (
  UPDATE runs r SET state = v.state,
    attempt = r.attempt + CASE WHEN v.state = 'pending' THEN 1 ELSE 0 END,
    available_at = COALESCE(v.available_at, r.available_at), sort_key = COALESCE(v.sort_key, r.sort_key),
    last_error = 'lease expired', lease_expires_at = NULL,
    finished_at = CASE WHEN v.state = 'dead' THEN $6::timestamptz END
  FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[])
    AS v(run_id, lease_token, state, available_at, sort_key)
  WHERE r.run_id = v.run_id AND r.lease_token = v.lease_token AND r.state = 'running' AND r.lease_expires_at < $6
  RETURNING r.run_id, r.lease_token, r.tenant_id, r.job_id, r.scheduled_for, r.state, r.attempt,
    r.attempt - CASE WHEN v.state = 'pending' THEN 1 ELSE 0 END AS ended_attempt, r.lease_owner, r.started_at,
    'lease_expired'::text AS outcome, 'lease expired'::text AS error, NULL::text AS output
), recorded AS (${recordEnded('$6::timestamptz')}
)
SELECT run_id, lease_token, tenant_id, job_id, scheduled_for, state, attempt FROM ended`;

/** $1 tenant, $2 run, $3 now, $4 sort key. A dead run back to pending with fresh attempts. */
export const runReplay = `
UPDATE runs SET state = 'pending', attempt = 1, available_at = $3, sort_key = $4, finished_at = NULL,
  lease_expires_at = NULL
WHERE tenant_id = $1 AND run_id = $2 AND state = 'dead'
RETURNING ${RUN_COLUMNS}`;

/** $1 tenant, $2 job, $3 now. Pending runs of a deleted job never run. */
export const runCancelPendingOfJob = `
UPDATE runs SET state = 'cancelled', finished_at = $3
WHERE tenant_id = $1 AND job_id = $2 AND state = 'pending'`;

/** $1 tenant, $2 job, $3 slot, $4 sort key, $5 now. One ad-hoc run from the job's definition. */
export const runInsertOne = `
INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
  backoff_base_seconds, backoff_cap_seconds, lease_seconds, timeout_seconds, available_at, sort_key, created_at)
SELECT tenant_id, job_id, $3, max_attempts, handler, payload, pool, priority,
  backoff_base_seconds, backoff_cap_seconds, lease_seconds, timeout_seconds, $3, $4, $5
FROM jobs WHERE tenant_id = $1 AND job_id = $2
ON CONFLICT (tenant_id, job_id, scheduled_for) DO NOTHING
RETURNING ${RUN_COLUMNS}`;

/**
 * The wake-up hint for idle workers, delivered when the transaction commits: at most one per
 * tick or write. Polling stays the source of truth; a lost notification only costs a poll.
 */
export const RUNS_CHANNEL = 'tock_runs';
export const runNotify = `SELECT pg_notify('${RUNS_CHANNEL}', '')`;

/** Reads the database's own clock (epoch ms) for the offset clock. */
export const clockRead = `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`;

/** $1 now. Claimable pending runs by priority: the ready queue's depth per class. */
export const runReadyByPriority = `
SELECT priority, count(*)::int AS n FROM runs WHERE state = 'pending' AND available_at <= $1 GROUP BY priority`;

/** $1 pool, $2 now, $3 tenant (or null). The earliest future available_at of the pool's pending runs. */
export const runNextAvailable = `
SELECT min(available_at) AS at FROM runs
WHERE state = 'pending' AND pool = $1 AND available_at > $2 AND ($3::text IS NULL OR tenant_id = $3)`;
