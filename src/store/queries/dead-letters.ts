/**
 * The dead letters an operator picks by filter, for a count and a bulk replay (`runReplay` writes
 * them). Parameters are positional; each constant's comment lists them. Both read `runs_parked`
 * (a tenant's parked runs, newest slot first), so a filter reads the tenant's dead runs and none
 * of its others.
 */

/**
 * The filter of `runDeadMatching` and `runDeadCount`: $1 tenant, $2 job (or null), $3 text the last
 * error holds, any case, taken literally (or null), $4 first slot (included, or null), $5 end of
 * the slots (excluded, or null). With a job, a statement of its own where the job is an equality:
 * under a generic plan (every Tock connection plans so) `$2 IS NULL OR job_id = $2` keeps the job
 * out of the index, and a job's count read every dead run of its tenant (0.7 s a count at 10
 * million runs, 198,000 of them dead); `job_id = $2` reads the job's runs only, down the unique
 * (tenant_id, job_id, scheduled_for) index.
 */
const deadFilter = (byJob: boolean) => `tenant_id = $1 AND parked = 'dead' AND state = 'dead'
  AND ${byJob ? 'job_id = $2' : '$2::text IS NULL'}
  AND ($3::text IS NULL OR strpos(lower(last_error), lower($3)) > 0)
  AND ($4::timestamptz IS NULL OR scheduled_for >= $4)
  AND ($5::timestamptz IS NULL OR scheduled_for < $5)`;

/**
 * The filter ($1-$5), $6 after slot and $7 after run (the cursor, or nulls), $8 rows. The matching
 * dead runs, newest slot first, after the cursor: what a replay needs of each.
 */
const deadMatching = (byJob: boolean) => `
SELECT run_id, priority, scheduled_for FROM runs
WHERE ${deadFilter(byJob)}
  AND ($6::timestamptz IS NULL OR (scheduled_for, run_id) < ($6::timestamptz, $7::uuid))
ORDER BY scheduled_for DESC, run_id DESC
LIMIT $8`;
export const runDeadMatching = deadMatching(false);
export const runDeadMatchingOfJob = deadMatching(true);

/** The filter ($1-$5), $6 most counted. How many dead runs match, counted up to $6. */
const deadCount = (byJob: boolean) => `
SELECT count(*)::int AS n FROM (SELECT 1 FROM runs WHERE ${deadFilter(byJob)} LIMIT $6) m`;
export const runDeadCount = deadCount(false);
export const runDeadCountOfJob = deadCount(true);
