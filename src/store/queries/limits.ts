/**
 * Statements on `limits` as an operator sees them (`PUT/GET/DELETE /v1/limits/{key}`) and the
 * limit gauges of `/metrics`. The claim and the end of an attempt keep `tokens`, `refilled_at`,
 * the window (`recent_at`, `recent_n`) and `in_use` (claims.ts, gates.ts); these statements never
 * write a job's own gate (`job:…`, written with its job) nor the overlap columns (`overlap`,
 * `busy_from`, `freed_at`). They read slots in use as they stand, the releases no claim has folded
 * yet subtracted (`limit_states`).
 *
 * Token arithmetic is the claim's: a bucket holding `tokens` at `refilled_at` holds
 * `least(burst, tokens + rate × seconds since)` later (core's `tokensAfter`); what a claim may take
 * is that, within the one-second window's room (core's `roomAt`, the claim's `roomNow`).
 */

import { creditedSlots, creditedTokens, pendingReleases, slotHolders } from './gates.js';
import { roomNow } from './room.js';

const LIMIT_COLUMNS = `tenant_id, key, rate, burst, tokens, refilled_at, recent_at, recent_n, max_concurrency, in_use, created_at,
  updated_at, credited_tokens`;

/**
 * $1 tenant, $2 key, $3 rate, $4 burst, $5 max_concurrency, $6 now.
 * Creates or replaces a named limit (or the tenant's own). A new limit starts full (`burst`
 * tokens) with the slots running runs already hold of its gate (`slotHolders`: slots outlive a
 * deleted limit; their runs give them back when they end). A replaced one keeps `in_use` (and its
 * pending releases); its tokens are refilled to now at the old rate, then capped by the new burst
 * (a limit that had no rate starts full; one that has none keeps 0). A new limit starts with an
 * empty window (no recent starts); a replaced one keeps its window, so the starts of the last
 * second count against the new cap. `created`: the row is new. No row: the key is a job's own gate.
 */
export const limitPut = `
INSERT INTO limits AS l (tenant_id, key, rate, burst, tokens, refilled_at, max_concurrency, in_use, created_at, updated_at)
VALUES ($1::text, $2::text, $3::double precision, $4::integer, coalesce($4::integer, 0), $6, $5::integer,
  (SELECT count(*) FROM (${slotHolders("ARRAY[$1::text || '/' || $2::text]")}) h), $6, $6)
ON CONFLICT (tenant_id, key) DO UPDATE SET
  rate = EXCLUDED.rate,
  burst = EXCLUDED.burst,
  max_concurrency = EXCLUDED.max_concurrency,
  tokens = CASE
    WHEN EXCLUDED.rate IS NULL THEN 0
    WHEN l.rate IS NULL THEN EXCLUDED.burst
    ELSE least(EXCLUDED.burst::double precision - ${creditedTokens('l')},
      l.tokens + l.rate * greatest(0, extract(epoch FROM (EXCLUDED.refilled_at - l.refilled_at))))
  END,
  refilled_at = greatest(l.refilled_at, EXCLUDED.refilled_at),
  updated_at = EXCLUDED.updated_at
WHERE l.key NOT LIKE 'job:%'
RETURNING ${LIMIT_COLUMNS.replace('in_use', `GREATEST(0, l.in_use - ${pendingReleases('l')} - ${creditedSlots('l')}) AS in_use`).replace('credited_tokens', `(${creditedTokens('l')})::double precision AS credited_tokens`)},
  (xmax = 0) AS created`;

/** $1 tenant, $2 keys. Those of these keys the tenant has defined a limit for (what jobs may list). */
export const limitKeysDefined = `SELECT key FROM limits WHERE tenant_id = $1 AND key = ANY($2::text[])`;

/**
 * Most queued runs of its tenant one limit's held count reads: a tenant's backlog of millions costs
 * a read of at most this many index entries per exhausted limit, not a scan of its queue.
 */
export const HELD_SCAN = 10_000;

/**
 * The limits `chosen` picks (a SELECT of `id`, `gate` and LIMIT_COLUMNS over `limit_states l`, bounded by
 * its own LIMIT), by gate, each with `held_runs`: the queued runs available by `now` that pass its
 * gate, counted only while it is exhausted (less than a whole unit of room, `roomNow`: no whole
 * token after refill or its one-second window at its cap; or every slot in use), else 0. A tenant
 * key's gate is passed by every run of the tenant; a job key's by that job's runs; a named limit's
 * by the runs whose `gates` name it. The due runs of each tenant with an exhausted limit are read
 * once, longest due first down `run_queue_late`, at most HELD_SCAN of them, and counted by gate, by
 * job and in all: a tenant's 500 exhausted limits cost one read of its queue, not 500.
 * `held_capped` says the read stopped at HELD_SCAN, so `held_runs` counts only the runs among
 * those. The gauges (`limitGauges`) and the API's
 * reads (`limitGet`, `limitList`) count held runs with this one statement, so `/metrics` and
 * `GET /v1/limits` agree.
 */
const withHeldRuns = (now: string, chosen: string) => `
WITH chosen AS (${chosen}), sampled AS (
  SELECT l.*,
    (l.rate IS NOT NULL AND ${roomNow('l', now)} < 1) OR coalesce(l.in_use >= l.max_concurrency, false) AS exhausted
  FROM chosen l
), due AS MATERIALIZED (
  SELECT t.tenant_id, q.job_id, q.gates
  FROM (SELECT DISTINCT tenant_id FROM sampled WHERE exhausted) t
  CROSS JOIN LATERAL (
    SELECT q.job_id, q.gates FROM run_queue q
    WHERE q.tenant_id = t.tenant_id AND q.available_at <= ${now}::timestamptz
    ORDER BY q.available_at, q.run_id
    LIMIT ${HELD_SCAN}
  ) q
), by_tenant AS (
  SELECT tenant_id, count(*)::int AS n FROM due GROUP BY tenant_id
), by_gate AS (
  SELECT d.tenant_id, g.gate, count(*)::int AS n FROM due d CROSS JOIN LATERAL unnest(d.gates) AS g(gate)
  GROUP BY d.tenant_id, g.gate
), by_job AS (
  SELECT tenant_id, job_id, count(*)::int AS n FROM due GROUP BY tenant_id, job_id
)
SELECT s.*,
  CASE WHEN NOT s.exhausted THEN 0
       WHEN s.key LIKE 'tenant:%' THEN coalesce(t.n, 0)
       WHEN s.key LIKE 'job:%' THEN coalesce(j.n, 0)
       ELSE coalesce(g.n, 0) END AS held_runs,
  s.exhausted AND coalesce(t.n, 0) >= ${HELD_SCAN} AS held_capped
FROM sampled s
LEFT JOIN by_tenant t ON t.tenant_id = s.tenant_id
LEFT JOIN by_gate g ON g.tenant_id = s.tenant_id AND g.gate = s.gate
LEFT JOIN by_job j ON s.key LIKE 'job:%' AND j.tenant_id = s.tenant_id AND j.job_id = substr(s.key, 5)
ORDER BY s.gate`;

/** $1 tenant, $2 key, $3 now. Any key, a job's own gate too (the gauges and tests read those), with its held runs. */
export const limitGet = withHeldRuns(
  '$3',
  `SELECT l.id, l.gate, ${LIMIT_COLUMNS} FROM limit_states l WHERE l.tenant_id = $1 AND l.key = $2`,
);

/**
 * $1 tenant, $2 after this key (null: from the first), $3 rows, $4 now. Jobs' own gates are shown
 * on the job. A tenant's gates are `<tenant>/<key>`, so by gate is by key.
 */
export const limitList = withHeldRuns(
  '$4',
  `SELECT l.id, l.gate, ${LIMIT_COLUMNS} FROM limit_states l
  WHERE l.tenant_id = $1 AND l.key NOT LIKE 'job:%' AND ($2::text IS NULL OR l.key > $2)
  ORDER BY l.key LIMIT $3`,
);

/**
 * $1 tenant, $2 key. Deletes a limit unless a job of the tenant lists it (`job_id`: the first such
 * job, and nothing is deleted). `existed` false: the tenant has no such limit. A tenant key is
 * never listed by a job (`validateJob` refuses it). The runs holding its slots keep holding them
 * (their claims list the gate) and give them back when they end.
 */
export const limitDelete = `
WITH target AS (
  SELECT key FROM limits WHERE tenant_id = $1::text AND key = $2::text AND key NOT LIKE 'job:%'
), user_job AS (
  SELECT job_id FROM jobs
  WHERE tenant_id = $1 AND $2 = ANY(limits) AND $2 NOT LIKE 'tenant:%'
  ORDER BY job_id LIMIT 1
), deleted AS (
  DELETE FROM limits l
  WHERE l.tenant_id = $1 AND l.key = $2 AND l.key NOT LIKE 'job:%' AND NOT EXISTS (SELECT 1 FROM user_job)
  RETURNING l.key, l.id
), releases_dropped AS (
  DELETE FROM limit_releases r WHERE r.limit_id IN (SELECT id FROM deleted)
), credits_dropped AS (
  DELETE FROM limit_credits c WHERE c.limit_id IN (SELECT id FROM deleted)
)
SELECT EXISTS (SELECT 1 FROM target) AS existed,
  (SELECT job_id FROM user_job) AS job_id,
  EXISTS (SELECT 1 FROM deleted) AS deleted`;

/**
 * $1 now, $2 rows. Every limit (all tenants, jobs' own gates included), by gate, at most $2, for
 * the gauges, each row with `total`, the count of all limits, and `held_runs` (`withHeldRuns`).
 */
export const limitGauges = withHeldRuns(
  '$1',
  `SELECT l.id, l.gate, ${LIMIT_COLUMNS}, count(*) OVER ()::int AS total
  FROM limit_states l
  ORDER BY l.gate LIMIT $2`,
);
