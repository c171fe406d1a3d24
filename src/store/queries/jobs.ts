/** Every statement on `jobs`. Parameters are positional; each constant's comment lists them. */
import { JOB_COLUMNS as DEFINITION_COLUMNS } from '../../core/index.js';
import { slotHolders } from './gates.js';

const JOB_COLUMNS = `tenant_id, job_id, handler, payload, payload_schema, schedule, timezone, priority, max_attempts,
  backoff_base_seconds, backoff_cap_seconds, misfire, catch_up_limit, pool, lease_seconds, jitter_seconds,
  timeout_seconds, misfire_threshold_seconds, overlap, max_concurrency, limits, retention, enabled, shard_id, next_run_at, version, created_at, updated_at`;

/**
 * The definition's columns, from the job's field table in core (`JOB_COLUMNS`: one entry per
 * field, in the API's order), then the three the store computes. A new job field is a new entry
 * there (and a migration); this statement follows.
 */
const UPSERT_COLUMNS: readonly { column: string; pgType: string }[] = [
  ...DEFINITION_COLUMNS.map(({ column, pgType }) => ({ column, pgType })),
  { column: 'shard_id', pgType: 'integer' },
  { column: 'next_run_at', pgType: 'timestamptz' },
  { column: 'definition_hash', pgType: 'text' },
];
const names = UPSERT_COLUMNS.map((c) => c.column);
const read = (c: string) => (c === 'payload' ? `COALESCE(j.payload, 'null')` : `j.${c}`);

/**
 * $1 tenant, $2 the jobs (a jsonb array of `jobRow` objects, one per job, keyed by the column names
 * of `j` below), $3 now.
 * A payload that is JSON `null` comes out of the recordset as SQL NULL: it is put back.
 * Inserts, or updates only when the definition changed (no row back: unchanged). A new schedule
 * or timezone takes the freshly computed `next_run_at`; otherwise the job keeps its own. One
 * statement for the whole batch (the job ids must differ). `RETURNING` is the caller's:
 * `jobUpsert` answers each written job's row, `jobUpsertIds` only its id.
 * A written job with a cap (`max_concurrency`, or overlap `skip`/`queue`: 1) keeps its own gate,
 * the `limits` row `job:<id>` (created with the slots its runs already hold); one without has none.
 */
const upsert = (returning: string) => `
WITH written AS (
INSERT INTO jobs (tenant_id, created_at, updated_at, ${names.join(', ')})
SELECT $1, $3, $3, ${names.map(read).join(', ')}
FROM jsonb_to_recordset($2::jsonb) AS j(${UPSERT_COLUMNS.map((c) => `${c.column} ${c.pgType}`).join(', ')})
ON CONFLICT (tenant_id, job_id) DO UPDATE SET
  ${names
    .filter((c) => c !== 'job_id' && c !== 'shard_id' && c !== 'next_run_at')
    .map((c) => `${c} = EXCLUDED.${c}`)
    .join(', ')},
  next_run_at = CASE WHEN jobs.schedule = EXCLUDED.schedule AND jobs.timezone = EXCLUDED.timezone
                     THEN jobs.next_run_at ELSE EXCLUDED.next_run_at END,
  version = jobs.version + 1, updated_at = EXCLUDED.updated_at
WHERE jobs.definition_hash IS DISTINCT FROM EXCLUDED.definition_hash
RETURNING ${returning}, tenant_id AS g_tenant, 'job:' || job_id AS g_key, overlap AS g_overlap,
  CASE WHEN overlap = 'allow' THEN max_concurrency ELSE 1 END AS g_cap
), held AS MATERIALIZED (${slotHolders("ARRAY(SELECT g_tenant || '/' || g_key FROM written WHERE g_cap IS NOT NULL)")}
), gated AS (
  INSERT INTO limits (tenant_id, key, max_concurrency, overlap, in_use, refilled_at, created_at, updated_at)
  SELECT w.g_tenant, w.g_key, w.g_cap, NULLIF(w.g_overlap, 'allow'),
    (SELECT count(*) FROM held h WHERE h.gate = w.g_tenant || '/' || w.g_key), $3, $3, $3
  FROM written w WHERE w.g_cap IS NOT NULL
  ORDER BY w.g_tenant || '/' || w.g_key
  ON CONFLICT (tenant_id, key) DO UPDATE SET max_concurrency = EXCLUDED.max_concurrency,
    overlap = EXCLUDED.overlap, updated_at = EXCLUDED.updated_at
), ungated AS (
  DELETE FROM limits l USING written w
  WHERE w.g_cap IS NULL AND l.tenant_id = w.g_tenant AND l.key = w.g_key
  RETURNING l.id
), releases_dropped AS (
  DELETE FROM limit_releases r WHERE r.limit_id IN (SELECT id FROM ungated)
), credits_dropped AS (
  DELETE FROM limit_credits c WHERE c.limit_id IN (SELECT id FROM ungated)
)
SELECT * FROM written`;

export const jobUpsert = upsert(`${JOB_COLUMNS}, (xmax = 0) AS inserted`);
export const jobUpsertIds = upsert('job_id, (xmax = 0) AS inserted');

/** $1 tenant, $2 job ids. The rows of these jobs (the ones an upsert left unchanged). */
export const jobGetMany = `SELECT ${JOB_COLUMNS} FROM jobs WHERE tenant_id = $1 AND job_id = ANY($2::text[])`;

/** $1 tenant, $2 job ids. The schedule of existing jobs (to accept re-applied past one-shots). */
export const jobSchedules = `
SELECT job_id, schedule, timezone FROM jobs WHERE tenant_id = $1 AND job_id = ANY($2::text[])`;

/** $1 tenant, $2 job */
export const jobGet = `SELECT ${JOB_COLUMNS} FROM jobs WHERE tenant_id = $1 AND job_id = $2`;

/**
 * $1 tenant, $2 after job_id (or null), $3 limit, $4 id prefix (or null), $5 state (`active`,
 * `paused`, `finished`, or null), $6 pool (or null), $7 handler (or null).
 * A page of the tenant's jobs in byte order of the id (`jobs_by_id_bytes`, migration 0026): the
 * prefix is the index range `[$4, $4 || U+10FFFF)` (ids are ASCII, so every id that starts with $4
 * is in it and no other), matched as text, never as a LIKE pattern (`%`, `_` and `\` are
 * themselves). State, pool and handler are checked on the rows of that range, in id order.
 */
export const jobList = `
SELECT ${JOB_COLUMNS} FROM jobs
WHERE tenant_id = $1 AND ($2::text IS NULL OR job_id COLLATE "C" > $2)
  AND ($4::text IS NULL OR (job_id COLLATE "C" >= $4 AND job_id COLLATE "C" < $4 || chr(1114111)
       AND starts_with(job_id, $4)))
  AND ($5::text IS NULL OR CASE $5 WHEN 'paused' THEN NOT enabled
                                   WHEN 'active' THEN enabled AND next_run_at IS NOT NULL
                                   ELSE enabled AND next_run_at IS NULL END)
  AND ($6::text IS NULL OR pool = $6)
  AND ($7::text IS NULL OR handler = $7)
ORDER BY job_id COLLATE "C" LIMIT $3`;

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

/** $1 tenant, $2 job. The job goes with its own gate (`job:<id>`), if it had one, its pending releases and its credits. */
export const jobDelete = `
WITH deleted AS (DELETE FROM jobs WHERE tenant_id = $1 AND job_id = $2 RETURNING job_id),
ungated AS (
  DELETE FROM limits WHERE tenant_id = $1 AND key = 'job:' || $2 AND EXISTS (SELECT 1 FROM deleted) RETURNING id
),
releases_dropped AS (DELETE FROM limit_releases r WHERE r.limit_id IN (SELECT id FROM ungated)),
credits_dropped AS (DELETE FROM limit_credits c WHERE c.limit_id IN (SELECT id FROM ungated))
SELECT job_id FROM deleted`;

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

/**
 * $1 tenants, $2 jobs, $3 new next_run_at (null: exhausted), $4 slots the misfire policy dropped
 * (int[]), $5 whether it dropped any (bool[]: a cron backlog too long to count drops an unknown
 * number), $6 now. Advances the jobs a tick planned, and records their misfires (migration 0025).
 */
export const jobAdvanceMany = `
UPDATE jobs SET next_run_at = v.next_run_at, misfired_slots = jobs.misfired_slots + v.dropped,
  misfired_at = CASE WHEN v.misfired THEN $6::timestamptz ELSE jobs.misfired_at END
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[], $5::bool[])
  AS v(tenant_id, job_id, next_run_at, dropped, misfired)
WHERE jobs.tenant_id = v.tenant_id AND jobs.job_id = v.job_id`;

/**
 * $1 since, $2 most jobs. The jobs of every tenant whose last misfire is at or after $1, newest
 * first, at most $2, with the count of all of them, down `jobs_misfired`.
 */
export const jobMisfiredRecent = `
SELECT tenant_id, job_id, misfired_slots, misfired_at, count(*) OVER ()::int AS jobs
FROM jobs
WHERE misfired_at >= $1
ORDER BY misfired_at DESC, tenant_id, job_id
LIMIT $2`;
