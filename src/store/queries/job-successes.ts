/**
 * Statements on `job_successes` (migration 0029): when each job last succeeded, recorded by the
 * metrics sampler from run history rather than by the completion (which writes no more than its
 * run), and the jobs whose last success is oldest, for the `tock_job_last_success_*` gauges.
 */

/** The most runs of one tenant `jobSuccessRecord` reads (its newest slots in the lookback). */
export const JOB_SUCCESS_RUNS_PER_TENANT = 10_000;

/**
 * $1 from, $2 now (slots in [from, now]). Records the latest success of every job with a
 * succeeded run among its tenant's newest JOB_SUCCESS_RUNS_PER_TENANT runs with a slot in the
 * range: the tenants from a walk down the first column of `runs_by_tenant` (one probe each), each
 * tenant's runs down it from the newest slot (no index leads with the slot or the end, and a
 * completion should not pay for one). A job's row moves only forward, and is written only when it
 * does (`fresh`, and `WHERE` on the conflict for a race): a sample that finds nothing new writes
 * and locks nothing. In key order, so two servers sampling at once lock the rows they share in one
 * order (no deadlock). Jobs deleted meanwhile are left out (the join, whose `KEY SHARE` lock waits
 * for a delete in flight and then skips the job, rather than fail the foreign key); their rows go
 * with them (the key cascades).
 */
export const jobSuccessRecord = `
WITH RECURSIVE tenants AS (
  (SELECT tenant_id FROM runs ORDER BY tenant_id LIMIT 1)
  UNION ALL
  SELECT (SELECT r.tenant_id FROM runs r WHERE r.tenant_id > t.tenant_id ORDER BY r.tenant_id LIMIT 1)
  FROM tenants t WHERE t.tenant_id IS NOT NULL
), found AS (
  SELECT r.tenant_id, r.job_id, max(r.finished_at) AS succeeded_at
  FROM tenants t CROSS JOIN LATERAL (
    SELECT r.tenant_id, r.job_id, r.state, r.finished_at FROM runs r
    WHERE r.tenant_id = t.tenant_id AND r.scheduled_for >= $1 AND r.scheduled_for <= $2
    ORDER BY r.scheduled_for DESC, r.run_id DESC
    LIMIT ${JOB_SUCCESS_RUNS_PER_TENANT}
  ) r
  WHERE t.tenant_id IS NOT NULL AND r.state = 'succeeded' AND r.finished_at IS NOT NULL
  GROUP BY r.tenant_id, r.job_id
), fresh AS (
  SELECT f.* FROM found f
  LEFT JOIN job_successes s ON s.tenant_id = f.tenant_id AND s.job_id = f.job_id
  WHERE s.succeeded_at IS NULL OR s.succeeded_at < f.succeeded_at
)
INSERT INTO job_successes AS s (tenant_id, job_id, succeeded_at)
SELECT f.tenant_id, f.job_id, f.succeeded_at FROM fresh f
JOIN jobs j ON j.tenant_id = f.tenant_id AND j.job_id = f.job_id
ORDER BY f.tenant_id, f.job_id
FOR KEY SHARE OF j
ON CONFLICT (tenant_id, job_id) DO UPDATE SET succeeded_at = EXCLUDED.succeeded_at
WHERE s.succeeded_at < EXCLUDED.succeeded_at`;

/** Jobs with a recorded success counted at most: past it the count says "at least". */
export const JOB_SUCCESS_COUNT_CAP = 100_000;

/**
 * $1 most jobs. Forgets the recorded success of the jobs among the 10 × $1 oldest that have no slot
 * to come (paused, or a one-shot that ran): they would sit at the front of `jobSuccessOldest` for
 * good, and one tenant's paused jobs would push every other tenant's out of the gauge. A job that
 * is resumed is tracked again from its next success. Rows another server is writing are skipped
 * (SKIP LOCKED), not waited for: two samples never wait on each other.
 */
export const jobSuccessForgetIdle = `
WITH idle AS (
  SELECT s.tenant_id, s.job_id
  FROM job_successes s
  JOIN jobs j ON j.tenant_id = s.tenant_id AND j.job_id = s.job_id
  WHERE (s.tenant_id, s.job_id) IN (SELECT tenant_id, job_id FROM job_successes ORDER BY succeeded_at LIMIT 10 * $1::int)
    AND NOT (j.enabled AND j.next_run_at IS NOT NULL)
  ORDER BY s.tenant_id, s.job_id
  FOR UPDATE OF s SKIP LOCKED
)
DELETE FROM job_successes s USING idle i WHERE s.tenant_id = i.tenant_id AND s.job_id = i.job_id`;

/**
 * $1 most jobs. The jobs with a slot to come whose last success is oldest, oldest first, at most
 * $1, down `job_successes_oldest` (at most 10 × $1 entries read, after `jobSuccessForgetIdle` has
 * dropped the idle ones among them), each with the count of jobs with a recorded success (at most
 * JOB_SUCCESS_COUNT_CAP); one row with null job when none is answered.
 */
export const jobSuccessOldest = `
SELECT c.jobs, o.tenant_id, o.job_id, o.succeeded_at
FROM (SELECT count(*)::int AS jobs FROM (SELECT 1 FROM job_successes LIMIT ${JOB_SUCCESS_COUNT_CAP}) x) c
LEFT JOIN LATERAL (
  SELECT s.tenant_id, s.job_id, s.succeeded_at
  FROM (SELECT * FROM job_successes ORDER BY succeeded_at LIMIT 10 * $1::int) s
  JOIN jobs j ON j.tenant_id = s.tenant_id AND j.job_id = s.job_id AND j.enabled AND j.next_run_at IS NOT NULL
  ORDER BY s.succeeded_at, s.tenant_id, s.job_id
  LIMIT $1
) o ON true
ORDER BY o.succeeded_at, o.tenant_id, o.job_id`;
