/** Every statement on `jobs`. Parameters are positional; each constant's comment lists them. */

const JOB_COLUMNS = `tenant_id, job_id, handler, payload, schedule, timezone, priority, max_attempts,
  backoff_base_seconds, backoff_cap_seconds, misfire, catch_up_limit, pool, lease_seconds, jitter_seconds,
  timeout_seconds, misfire_threshold_seconds, enabled, shard_id, next_run_at, version, created_at, updated_at`;

/**
 * $1 tenant, $2 job, $3 handler, $4 payload, $5 schedule, $6 timezone, $7 priority, $8 max_attempts,
 * $9 backoff base, $10 backoff cap, $11 misfire, $12 catch_up_limit, $13 pool, $14 lease_seconds,
 * $15 shard, $16 next_run_at, $17 definition_hash, $18 now, $19 jitter_seconds, $20 timeout_seconds,
 * $21 misfire_threshold_seconds.
 * Inserts, or updates only when the definition changed (no row back: unchanged). A new schedule
 * or timezone takes the freshly computed `next_run_at`; otherwise the job keeps its own.
 */
export const jobUpsert = `
INSERT INTO jobs (tenant_id, job_id, handler, payload, schedule, timezone, priority, max_attempts,
  backoff_base_seconds, backoff_cap_seconds, misfire, catch_up_limit, pool, lease_seconds, shard_id,
  next_run_at, definition_hash, created_at, updated_at, jitter_seconds, timeout_seconds,
  misfire_threshold_seconds)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $18, $19, $20, $21)
ON CONFLICT (tenant_id, job_id) DO UPDATE SET
  handler = EXCLUDED.handler, payload = EXCLUDED.payload, schedule = EXCLUDED.schedule,
  timezone = EXCLUDED.timezone, priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
  backoff_base_seconds = EXCLUDED.backoff_base_seconds, backoff_cap_seconds = EXCLUDED.backoff_cap_seconds,
  misfire = EXCLUDED.misfire, catch_up_limit = EXCLUDED.catch_up_limit, pool = EXCLUDED.pool,
  lease_seconds = EXCLUDED.lease_seconds, jitter_seconds = EXCLUDED.jitter_seconds,
  timeout_seconds = EXCLUDED.timeout_seconds, misfire_threshold_seconds = EXCLUDED.misfire_threshold_seconds,
  definition_hash = EXCLUDED.definition_hash,
  next_run_at = CASE WHEN jobs.schedule = EXCLUDED.schedule AND jobs.timezone = EXCLUDED.timezone
                     THEN jobs.next_run_at ELSE EXCLUDED.next_run_at END,
  version = jobs.version + 1, updated_at = EXCLUDED.updated_at
WHERE jobs.definition_hash IS DISTINCT FROM EXCLUDED.definition_hash
RETURNING ${JOB_COLUMNS}, (xmax = 0) AS inserted`;

/**
 * The bulk form of \`jobUpsert\`: $1 tenant, then one array per column, in \`jobUpsert\`'s order
 * ($2 jobs … $21 misfire_threshold_seconds, with $18 now a single instant). One statement for the whole
 * batch; unchanged definitions return no row.
 */
export const jobUpsertMany = `
INSERT INTO jobs (tenant_id, job_id, handler, payload, schedule, timezone, priority, max_attempts,
  backoff_base_seconds, backoff_cap_seconds, misfire, catch_up_limit, pool, lease_seconds, shard_id,
  next_run_at, definition_hash, created_at, updated_at, jitter_seconds, timeout_seconds,
  misfire_threshold_seconds)
SELECT $1, v.job_id, v.handler, v.payload, v.schedule, v.timezone, v.priority, v.max_attempts,
  v.backoff_base, v.backoff_cap, v.misfire, v.catch_up_limit, v.pool, v.lease_seconds, v.shard_id,
  v.next_run_at, v.definition_hash, $18, $18, v.jitter_seconds, v.timeout_seconds, v.misfire_threshold_seconds
FROM unnest($2::text[], $3::text[], $4::jsonb[], $5::text[], $6::text[], $7::int[], $8::int[],
  $9::int[], $10::int[], $11::text[], $12::int[], $13::text[], $14::int[], $15::int[],
  $16::timestamptz[], $17::text[], $19::int[], $20::int[], $21::int[])
  AS v(job_id, handler, payload, schedule, timezone, priority, max_attempts, backoff_base, backoff_cap,
       misfire, catch_up_limit, pool, lease_seconds, shard_id, next_run_at, definition_hash,
       jitter_seconds, timeout_seconds, misfire_threshold_seconds)
ON CONFLICT (tenant_id, job_id) DO UPDATE SET
  handler = EXCLUDED.handler, payload = EXCLUDED.payload, schedule = EXCLUDED.schedule,
  timezone = EXCLUDED.timezone, priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
  backoff_base_seconds = EXCLUDED.backoff_base_seconds, backoff_cap_seconds = EXCLUDED.backoff_cap_seconds,
  misfire = EXCLUDED.misfire, catch_up_limit = EXCLUDED.catch_up_limit, pool = EXCLUDED.pool,
  lease_seconds = EXCLUDED.lease_seconds, jitter_seconds = EXCLUDED.jitter_seconds,
  timeout_seconds = EXCLUDED.timeout_seconds, misfire_threshold_seconds = EXCLUDED.misfire_threshold_seconds,
  definition_hash = EXCLUDED.definition_hash,
  next_run_at = CASE WHEN jobs.schedule = EXCLUDED.schedule AND jobs.timezone = EXCLUDED.timezone
                     THEN jobs.next_run_at ELSE EXCLUDED.next_run_at END,
  version = jobs.version + 1, updated_at = EXCLUDED.updated_at
WHERE jobs.definition_hash IS DISTINCT FROM EXCLUDED.definition_hash
RETURNING job_id, (xmax = 0) AS inserted`;

/** $1 tenant, $2 job ids. The schedule of existing jobs (to accept re-applied past one-shots). */
export const jobSchedules = `
SELECT job_id, schedule, timezone FROM jobs WHERE tenant_id = $1 AND job_id = ANY($2::text[])`;

/** $1 tenant, $2 job */
export const jobGet = `SELECT ${JOB_COLUMNS} FROM jobs WHERE tenant_id = $1 AND job_id = $2`;

/** $1 tenant, $2 after job_id (or null), $3 limit */
export const jobList = `
SELECT ${JOB_COLUMNS} FROM jobs
WHERE tenant_id = $1 AND ($2::text IS NULL OR job_id > $2)
ORDER BY job_id LIMIT $3`;

/** $1 tenant, $2 job, $3 now */
export const jobPause = `
UPDATE jobs SET enabled = false, updated_at = $3
WHERE tenant_id = $1 AND job_id = $2
RETURNING ${JOB_COLUMNS}`;

/** $1 tenant, $2 job, $3 now, $4 next_run_at from now. Only a paused job changes. */
export const jobResume = `
UPDATE jobs SET enabled = true, next_run_at = $4, updated_at = $3
WHERE tenant_id = $1 AND job_id = $2 AND NOT enabled
RETURNING ${JOB_COLUMNS}`;

/** $1 tenant, $2 job */
export const jobDelete = `DELETE FROM jobs WHERE tenant_id = $1 AND job_id = $2 RETURNING job_id`;

/**
 * $1 horizon (now + lookahead), $2 batch size, $3 shard ids (null: all).
 * The due scan: locks up to a batch of due jobs, skipping those another scheduler holds.
 */
export const jobDueLock = `
SELECT tenant_id, job_id, schedule, timezone, next_run_at, misfire, catch_up_limit, priority, jitter_seconds,
  misfire_threshold_seconds
FROM jobs
WHERE enabled AND next_run_at <= $1 AND ($3::int[] IS NULL OR shard_id = ANY($3::int[]))
ORDER BY next_run_at
LIMIT $2
FOR UPDATE SKIP LOCKED`;

/** $1 tenants, $2 jobs, $3 new next_run_at (null: exhausted). Advances the jobs a tick planned. */
export const jobAdvanceMany = `
UPDATE jobs SET next_run_at = v.next_run_at
FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS v(tenant_id, job_id, next_run_at)
WHERE jobs.tenant_id = v.tenant_id AND jobs.job_id = v.job_id`;
