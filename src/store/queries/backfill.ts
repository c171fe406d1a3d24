/**
 * The statement of a range backfill (`POST /v1/jobs/{job_id}/backfill`): the runs of many slots of
 * one job, in one statement. Parameters are positional; the comment lists them.
 */
import { gatesOf } from './gates.js';
import { enqueue } from './runs.js';

/**
 * $1 tenant, $2 job, $3 slots (timestamptz[]), $4 their sort keys (timestamptz[]), $5 now.
 * The run of each slot from the tenant's job's definition, available at its slot and queued; a
 * slot that already has a run (in any state) is left as it is: one run per (job, slot). The job is
 * read FOR KEY SHARE, so a delete of it waits for this statement and then cancels the runs it
 * queued (without the lock, a delete between this statement's read and its commit would leave
 * them pending for a job that is gone). Answers `job` (1, or 0 when the tenant has no such job)
 * and `created`.
 */
export const runInsertBackfill = `
WITH job AS MATERIALIZED (
  SELECT * FROM jobs WHERE tenant_id = $1 AND job_id = $2 FOR KEY SHARE
), inserted AS (
  INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
    backoff_base_seconds, backoff_cap_seconds, lease_seconds, timeout_seconds, available_at, sort_key, created_at, gates)
  SELECT j.tenant_id, j.job_id, v.slot, j.max_attempts, j.handler, j.payload, j.pool, j.priority,
    j.backoff_base_seconds, j.backoff_cap_seconds, j.lease_seconds, j.timeout_seconds, v.slot, v.sort_key, $5,
    ${gatesOf('j')}
  FROM job j CROSS JOIN unnest($3::timestamptz[], $4::timestamptz[]) AS v(slot, sort_key)
  ON CONFLICT (tenant_id, job_id, scheduled_for) DO NOTHING
  RETURNING run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates
), queued AS (${enqueue('inserted')}
)
SELECT (SELECT count(*) FROM job)::int AS job, (SELECT count(*) FROM inserted)::int AS created`;
