/**
 * Scheduling delay read from run history (core's `delay.ts` says what it measures): a tenant's
 * delay series in buckets of slots (`GET /v1/delay`), and the jobs of every tenant with the latest
 * runs and the most dead ones in a recent window (the `tock_job_*` gauges). Both read `runs` by
 * slot through the indexes that lead with the tenant (`runs_by_tenant`, or the unique
 * (tenant_id, job_id, scheduled_for) for one job) and read no column a completion writes into an
 * index: no new index, and completions stay HOT.
 */

/**
 * The most runs of one tenant `runJobDelayTop` reads (its newest slots in the window): a sample
 * costs at most this many rows per tenant however busy the window.
 */
export const JOB_DELAY_RUNS_PER_TENANT = 10_000;

/** A run's delay in ms, from the columns of `runs` aliased `r`: its start minus when it became due. */
const delayMs = (r: string) =>
  `GREATEST(0, extract(epoch FROM ${r}.started_at - GREATEST(${r}.available_at, ${r}.created_at)) * 1000)::float8`;

/** The runs a delay is read from: ended, so `started_at` and `available_at` are the last attempt's. */
const ENDED = `r.state IN ('succeeded', 'dead') AND r.started_at IS NOT NULL`;

/**
 * A delay series' buckets from the runs chosen by `where` (over `runs r`): $4 the window's start
 * (epoch ms), $5 its step (ms), $6 pool (or null). One row per bucket with runs, by index: the
 * count, the nearest-rank 50th and 99th percentiles (`percentile_disc`: an observed delay) and the
 * largest.
 */
const delaySeries = (where: string) => `
SELECT floor((extract(epoch FROM r.scheduled_for) * 1000 - $4::float8) / $5::float8)::int AS bucket,
  count(*)::int AS runs,
  percentile_disc(0.5) WITHIN GROUP (ORDER BY r.delay_ms) AS p50,
  percentile_disc(0.99) WITHIN GROUP (ORDER BY r.delay_ms) AS p99,
  max(r.delay_ms) AS max
FROM (
  SELECT r.scheduled_for, ${delayMs('r')} AS delay_ms FROM runs r
  WHERE ${where} AND ${ENDED} AND ($6::text IS NULL OR r.pool = $6)
) r
GROUP BY 1
ORDER BY 1`;

/**
 * $1 tenant, $2 from, $3 to (slots in [from, to)), $4 from (epoch ms), $5 step (ms), $6 pool (or
 * null). The tenant's delay series, down `runs_by_tenant` over the range's slots.
 */
export const runDelaySeries = delaySeries(
  'r.tenant_id = $1 AND r.scheduled_for >= $2 AND r.scheduled_for < $3',
);

/**
 * The same with $7 job: one job's series, down the unique (tenant_id, job_id, scheduled_for) index.
 * A statement of its own: a generic plan keeps `$7 IS NULL OR job_id = $7` out of the index.
 */
export const runDelaySeriesOfJob = delaySeries(
  'r.tenant_id = $1 AND r.job_id = $7 AND r.scheduled_for >= $2 AND r.scheduled_for < $3',
);

/**
 * $1 from, $2 now (slots in [from, now]), $3 most jobs per ranking. Every tenant's jobs with
 * runs whose slot is in the window (of each tenant its newest JOB_DELAY_RUNS_PER_TENANT), ranked
 * twice: by their latest run (the largest delay of their ended runs, and of their queued runs the
 * wait so far, so a job whose runs do not start at all ranks too) and by their dead runs; the rows in the first $3 of either ranking (the dead ranking only
 * jobs with a dead run), with the count of jobs seen. The tenants come from a walk down the
 * tenant's first index column (one probe per tenant), then each tenant's window down
 * `runs_by_tenant` from the newest slot, at most JOB_DELAY_RUNS_PER_TENANT runs (a literal: a
 * generic plan sees no parameter's value; the LIMIT also keeps the planner from
 * hashing the tenants against a scan of a whole index): no index leads with the slot alone, and a
 * run insert should not pay for one.
 * A pending run's wait is looked up in the queue by its key, for that run alone (a join could hash
 * the whole queue, a backlog of millions, at every sample); a claimed run not ended yet has none
 * there and counts at its end (it started), so a job with only such runs is left out.
 */
export const runJobDelayTop = `
WITH RECURSIVE tenants AS (
  (SELECT tenant_id FROM runs ORDER BY tenant_id LIMIT 1)
  UNION ALL
  SELECT (SELECT r.tenant_id FROM runs r WHERE r.tenant_id > t.tenant_id ORDER BY r.tenant_id LIMIT 1)
  FROM tenants t WHERE t.tenant_id IS NOT NULL
), seen AS (
  SELECT r.tenant_id, r.job_id, max(r.delay_ms) AS delay_ms, count(*) FILTER (WHERE r.state = 'dead')::int AS dead
  FROM tenants t
  CROSS JOIN LATERAL (
    SELECT r.tenant_id, r.job_id, r.state,
      CASE WHEN r.state = 'pending' THEN (
        SELECT GREATEST(0, extract(epoch FROM $2::timestamptz - GREATEST(q.available_at, r.created_at)) * 1000)::float8
        FROM run_queue q WHERE q.run_id = r.run_id
      ) ELSE ${delayMs('r')} END AS delay_ms
    FROM runs r
    WHERE r.tenant_id = t.tenant_id AND r.scheduled_for >= $1 AND r.scheduled_for <= $2
      AND (r.state = 'pending' OR ${ENDED})
    ORDER BY r.scheduled_for DESC
    LIMIT ${JOB_DELAY_RUNS_PER_TENANT}
  ) r
  GROUP BY r.tenant_id, r.job_id
  HAVING max(r.delay_ms) IS NOT NULL
), ranked AS (
  SELECT s.*, count(*) OVER () AS jobs,
    row_number() OVER (ORDER BY s.delay_ms DESC, s.tenant_id, s.job_id) AS by_delay,
    row_number() OVER (ORDER BY s.dead DESC, s.tenant_id, s.job_id) AS by_dead
  FROM seen s
)
SELECT tenant_id, job_id, delay_ms, dead, jobs::int AS jobs, by_delay <= $3 AS late, dead > 0 AND by_dead <= $3 AS dying
FROM ranked
WHERE by_delay <= $3 OR (dead > 0 AND by_dead <= $3)`;
