/**
 * Retention: the tenant's settings, the maintenance lease the pruner holds, and the pruning pass
 * itself. Parameters are positional; each constant's comment lists them.
 */

/** $1 tenant. The tenant's own settings (null: none set), and the shortest override among its jobs, ms. */
export const retentionOfTenant = `
SELECT (SELECT retention FROM tenant_retention WHERE tenant_id = $1) AS retention,
  (SELECT extract(epoch FROM min(NULLIF(e.value, 'forever')::interval)) * 1000
   FROM jobs j CROSS JOIN jsonb_each_text(j.retention) AS e
   WHERE j.tenant_id = $1 AND j.retention IS NOT NULL)::float8 AS jobs_shortest_ms`;

/** $1 tenant, $2 retention (jsonb), $3 now. Replaces the tenant's settings. */
export const putTenantRetention = `
INSERT INTO tenant_retention (tenant_id, retention, updated_at) VALUES ($1, $2::jsonb, $3)
ON CONFLICT (tenant_id) DO UPDATE SET retention = EXCLUDED.retention, updated_at = EXCLUDED.updated_at`;

/**
 * The tenants that have runs, one index probe each (a skip scan of `runs_by_tenant`), in order,
 * after $1 (or from the first when null), at most $2.
 */
export const tenantsWithRuns = `
WITH RECURSIVE t AS (
  (SELECT tenant_id FROM runs WHERE $1::text IS NULL OR tenant_id > $1 ORDER BY tenant_id LIMIT 1)
  UNION ALL
  SELECT (SELECT r.tenant_id FROM runs r WHERE r.tenant_id > t.tenant_id ORDER BY r.tenant_id LIMIT 1)
  FROM t WHERE t.tenant_id IS NOT NULL
)
SELECT tenant_id FROM t WHERE tenant_id IS NOT NULL LIMIT $2`;

/**
 * $1 name, $2 owner, $3 now, $4 lease ms. Takes or renews the named lease: a row when `owner`
 * holds it until now + lease, none when another owner's lease is live.
 */
export const takeMaintenanceLease = `
INSERT INTO maintenance_leases (name, owner, expires_at)
VALUES ($1, $2, $3::timestamptz + $4 * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
WHERE maintenance_leases.owner = EXCLUDED.owner OR maintenance_leases.expires_at <= $3
RETURNING owner`;

/** $1 name, $2 owner. Gives the lease back, if `owner` holds it. */
export const releaseMaintenanceLease = `DELETE FROM maintenance_leases WHERE name = $1 AND owner = $2`;

/**
 * A pruned run as one line of the archive (JSON text): every column of its row but its lease token,
 * with `attempts` (its ended attempts' rows, oldest first; a succeeded attempt is the run row) and
 * `progress` (what its attempts' handlers reported), both without lease tokens. `d` is the deleted
 * row, as the statement saw it before the delete (its attempts and reports go by cascade after).
 */
const ARCHIVE_LINE = `(to_jsonb(d) - 'lease_token') || jsonb_build_object(
    'attempts', COALESCE((SELECT jsonb_agg(to_jsonb(a) - 'lease_token' ORDER BY a.attempt, a.started_at)
      FROM attempts a WHERE a.run_id = d.run_id), '[]'),
    'progress', COALESCE((SELECT jsonb_agg(to_jsonb(p) - 'lease_token' ORDER BY p.updated_at)
      FROM attempt_progress p WHERE p.run_id = d.run_id), '[]'))`;

/**
 * One batch of a tenant's pruning. $1 tenant, $2 now, $3 horizon (no run scheduled at or after it
 * is looked at), $4 and $5 the (slot, run) the previous batch ended at (nulls: from the oldest),
 * $6 most runs to look at, $7 the built-in defaults (jsonb), $8 dry run (count only), $9 soon (ms).
 *
 * Looks at the tenant's runs from the oldest slot on, through \`runs_by_tenant\` (read backwards),
 * and deletes those that ended more than their retention ago: the job's value for the state, else
 * the tenant's, else the default; \`forever\` is never. Pending and running runs (state \`pending\`)
 * are never deleted. The delete checks the state and end it read again on the row it locks, so a
 * run replayed meanwhile stays. Attempts, reports and queue rows go by their foreign keys' cascade.
 *
 * Returns how many runs it looked at, the last one's place, the runs deleted (or, dry, that would
 * be) by state, and for the next pass: whether it kept a run that expires within $9 ms (one that
 * ended after its slot: a retry, a long run), and the last run before the first such one. A pass
 * that starts after that place meets the run again once it has expired; runs kept longer (a
 * pending run, a longer retention) are met again by a pass from the oldest run.
 *
 * With `archive`, also `archive`: the deleted runs as lines (`ARCHIVE_LINE`) by the UTC day of
 * their slot, a JSON object of day (YYYY-MM-DD) to lines joined by newlines, in slot order; null
 * when none was deleted.
 */
const pruneBatchOf = (archive: boolean) => `
WITH settings AS (
  SELECT $7::jsonb || coalesce((SELECT retention FROM tenant_retention WHERE tenant_id = $1), '{}') AS retention
), scanned AS MATERIALIZED (
  SELECT r.run_id, r.job_id, r.state, r.finished_at, r.scheduled_for FROM runs r
  WHERE r.tenant_id = $1 AND r.scheduled_for < $3
    AND ($4::timestamptz IS NULL OR (r.scheduled_for, r.run_id) > ($4::timestamptz, $5::uuid))
  ORDER BY r.scheduled_for, r.run_id
  LIMIT $6
), judged AS MATERIALIZED (
  SELECT s.run_id, s.state, s.finished_at, s.scheduled_for,
    NULLIF(coalesce(j.retention ->> s.state, t.retention ->> s.state), 'forever')::interval AS keep
  FROM scanned s
  CROSS JOIN settings t
  LEFT JOIN jobs j ON j.tenant_id = $1 AND j.job_id = s.job_id
), expired AS MATERIALIZED (
  SELECT run_id, state, finished_at FROM judged WHERE state <> 'pending' AND finished_at < $2::timestamptz - keep
), deleted AS (
  DELETE FROM runs r USING expired e
  WHERE NOT $8::boolean AND r.run_id = e.run_id AND r.state = e.state AND r.finished_at = e.finished_at
  RETURNING ${archive ? 'r.*' : 'r.state'}
), last AS (
  SELECT scheduled_for, run_id FROM scanned ORDER BY scheduled_for DESC, run_id DESC LIMIT 1
), soon AS (
  SELECT scheduled_for, run_id FROM judged
  WHERE state <> 'pending' AND finished_at >= $2::timestamptz - keep
    AND finished_at < $2::timestamptz - keep + $9 * interval '1 millisecond'
  ORDER BY scheduled_for, run_id LIMIT 1
), settled AS (
  SELECT j.scheduled_for, j.run_id FROM judged j, soon w
  WHERE (j.scheduled_for, j.run_id) < (w.scheduled_for, w.run_id)
  ORDER BY j.scheduled_for DESC, j.run_id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM scanned)::int AS scanned,
  (SELECT scheduled_for FROM last) AS last_slot, (SELECT run_id FROM last) AS last_run,
  EXISTS (SELECT 1 FROM soon) AS soon,
  (SELECT scheduled_for FROM settled) AS settled_slot, (SELECT run_id FROM settled) AS settled_run,
  coalesce((SELECT jsonb_object_agg(state, n) FROM (
    SELECT state, count(*) AS n FROM deleted GROUP BY state
    UNION ALL
    SELECT state, count(*) FROM expired WHERE $8::boolean GROUP BY state) c), '{}') AS by_state${
      archive
        ? `,
  (SELECT json_object_agg(day, lines) FROM (
    SELECT to_char(d.scheduled_for AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
      string_agg((${ARCHIVE_LINE})::text, E'\\n' ORDER BY d.scheduled_for, d.run_id) AS lines
    FROM deleted d GROUP BY 1) a) AS archive`
        : ''
    }`;

/** One batch of a tenant's pruning (`pruneBatchOf`). */
export const pruneBatch = pruneBatchOf(false);

/** One batch of a tenant's pruning that also answers the deleted runs as archive lines (`pruneBatchOf`). */
export const pruneBatchArchived = pruneBatchOf(true);
