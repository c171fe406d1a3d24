// Shared by the benchmarks: the backlog they drain, and how figures are summarised.

/** The median of a list of numbers (the upper one of the middle two for an even count). */
export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Empties runs and attempts, then inserts `n` ready runs of job `bench/noop` at distinct past slots. */
export async function seedBacklog(pool, n) {
  await pool.query('TRUNCATE runs, attempts');
  await pool.query(
    `INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
       backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at)
     SELECT 'bench', 'noop', t, 3, 'noop', '{}', 'default', 0, 2, 3600, t, t, t
     FROM generate_series(1, $1::int) AS i, LATERAL (SELECT timestamptz '2026-01-01' + i * interval '1 ms' AS t) s`,
    [n],
  );
  await pool.query('VACUUM ANALYZE runs');
}
