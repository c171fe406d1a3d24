/**
 * The reads of runs: one run, pages of a tenant's or a job's runs (each on the index that serves
 * it), counts by state, the ready queue's depth, and runs no live worker serves. Every read of a
 * run goes through the `run_states` view. Parameters are positional; each constant's comment lists
 * them.
 */

import { WINDOW_GRAIN_MS, WINDOW_MS } from '../../core/index.js';
import { gateSet, slotHolders } from './gates.js';
import { oldestLiveGrain, tokensNow, windowCap, windowUsed } from './room.js';
import { RUN_COLUMNS, WRITTEN_COLUMNS } from './runs.js';

/** $1 tenant, $2 run */
export const runGet = `SELECT ${RUN_COLUMNS} FROM run_states WHERE tenant_id = $1 AND run_id = $2`;

/**
 * $1 tenant, $2 run ids (uuid[]), $3 lease tokens (uuid[], pairwise), $4 now: the runs of those
 * pairs whose lease is live and which are the tenant's, on the claims' and the runs' primary keys.
 */
export const runIdsLiveOfTenant = `
SELECT r.run_id
FROM unnest($2::uuid[], $3::uuid[]) AS l(run_id, lease_token)
JOIN run_claims c ON c.lease_token = l.lease_token AND l.run_id = ANY(c.run_ids) AND c.lease_expires_at > $4
JOIN runs r ON r.run_id = l.run_id AND r.state = 'pending' AND r.tenant_id = $1`;

/** $1 tenant, $2 run ids (uuid[]): those of them that are the tenant's runs, on the primary key. */
export const runIdsOfTenant = `SELECT run_id FROM runs WHERE run_id = ANY($2::uuid[]) AND tenant_id = $1`;

/**
 * A page statement's shape: how many rows it returns (a page and one more, which tells whether
 * there is a next page) and whether it continues after a cursor. Both are written into the
 * statement's text, not passed as parameters: every connection plans with a generic plan
 * (`plan_cache_mode=force_generic_plan`, db.ts), which sees no parameter's value. It plans
 * `LIMIT $n` for a tenth of the rows, and keeps `$n IS NULL OR slot < $n` out of the index as a
 * filter; on a tenant of 10 million runs the first made the tenant's page a sequential scan of
 * every run and a sort (seconds, depending on the statistics of the day), the second made each
 * page after a cursor read every run newer than it (issue 21). A literal limit and one statement
 * per shape leave the planner one good plan: down the index, from the cursor, for so many rows.
 */
export interface PageShape {
  rows: number;
  after: boolean;
}

/** `LIMIT <rows>`, a literal: a positive integer, never text from a caller. */
function limitRows(rows: number): string {
  if (!Number.isSafeInteger(rows) || rows < 1) throw new Error(`a page of ${rows} rows`);
  return `LIMIT ${rows}`;
}

/**
 * $1 tenant, $2 job, then $3 state when `withState`, then the cursor slot when `shape.after`.
 * One job's history newest first, on the unique (tenant_id, job_id, scheduled_for) index: the slot
 * is unique within a job, so it alone orders the page and continues strictly after the cursor.
 * The page is chosen in `runs` and then read through `run_states`: joined to the claims first, a
 * generic plan hashes every run of the job and sorts them (a job's whole history for one page).
 * `withState`: a state `runs` stores as it is shown (succeeded, dead, cancelled, skipped); pending
 * and running runs, which the claims tell apart, have `runListOfJobInState`.
 */
export const runListOfJob = (shape: PageShape, withState: boolean) => `
SELECT ${RUN_COLUMNS} FROM run_states
WHERE run_id IN (
  SELECT run_id FROM runs
  WHERE tenant_id = $1 AND job_id = $2${withState ? ' AND state = $3' : ''}
    ${shape.after ? `AND scheduled_for < $${withState ? 4 : 3}::timestamptz` : ''}
  ORDER BY scheduled_for DESC
  ${limitRows(shape.rows)})
ORDER BY scheduled_for DESC`;

/**
 * $1 tenant, $2 job, $3 state ('pending' | 'running'), then the cursor slot when `shape.after`.
 * One job's pending or running runs newest first, as `runListOfJob`; the state is the claims'
 * (`run_states`), so the job's runs are read until the page is full.
 */
export const runListOfJobInState = (shape: PageShape) => `
SELECT ${RUN_COLUMNS} FROM run_states
WHERE tenant_id = $1 AND job_id = $2 AND state = $3
  ${shape.after ? 'AND scheduled_for < $4::timestamptz' : ''}
ORDER BY scheduled_for DESC
${limitRows(shape.rows)}`;

/** The cursor of a tenant's pages, $n slot and $n+1 run id: a row comparison the index reads from. */
const afterCursor = (shape: PageShape, n: number) =>
  shape.after ? `AND (scheduled_for, run_id) < ($${n}::timestamptz, $${n + 1}::uuid)` : '';

/**
 * $1 tenant, then the cursor slot and run id when `shape.after` ($2, $3).
 * A tenant's runs newest first, on runs_by_tenant; the row comparison continues strictly after the
 * cursor. Runs in one state have statements of their own.
 */
export const runList = (shape: PageShape) => `
SELECT ${RUN_COLUMNS} FROM run_states
WHERE tenant_id = $1 ${afterCursor(shape, 2)}
ORDER BY scheduled_for DESC, run_id DESC
${limitRows(shape.rows)}`;

/**
 * $1 tenant, then the cursor ($2 slot, $3 run id) when `shape.after`. A tenant's succeeded runs
 * newest first, on runs_by_tenant. From `runs` itself: no claim holds a succeeded run.
 */
export const runListSucceeded = (shape: PageShape) => `
SELECT ${WRITTEN_COLUMNS} FROM runs
WHERE tenant_id = $1 AND state = 'succeeded' ${afterCursor(shape, 2)}
ORDER BY scheduled_for DESC, run_id DESC
${limitRows(shape.rows)}`;

/** A tenant's runs whose ids `ids` (a subquery) returns, newest first: $1 tenant, then the cursor ($2, $3). */
const listAmong = (ids: string, state: string) => (shape: PageShape) =>
  `
SELECT ${RUN_COLUMNS} FROM run_states
WHERE run_id IN (${ids}) AND tenant_id = $1 AND state = '${state}' ${afterCursor(shape, 2)}
ORDER BY scheduled_for DESC, run_id DESC
${limitRows(shape.rows)}`;

/** $1 tenant, then the cursor ($2 slot, $3 run id) when `shape.after`. The tenant's queued runs. */
export const runListQueued = listAmong('SELECT run_id FROM run_queue WHERE tenant_id = $1', 'pending');

/** $1 tenant, then the cursor ($2 slot, $3 run id) when `shape.after`. The tenant's claimed runs. */
export const runListClaimed = listAmong('SELECT unnest(run_ids) FROM run_claims', 'running');

/**
 * $1 tenant, $2 state ('dead' | 'cancelled' | 'skipped'), then the cursor ($3 slot, $4 run id)
 * when `shape.after`. On runs_parked.
 */
export const runListParked = (shape: PageShape) => `
SELECT ${WRITTEN_COLUMNS} FROM runs
WHERE tenant_id = $1 AND parked = $2 ${afterCursor(shape, 3)}
ORDER BY scheduled_for DESC, run_id DESC
${limitRows(shape.rows)}`;

/** The planner's estimate of the rows of \`runs\` (the schema's), kept by vacuum and analyze; −1 before the first. */
export const runRowsEstimate = `SELECT reltuples::float8 AS n FROM pg_class WHERE oid = 'runs'::regclass`;

/**
 * Runs per state, all tenants, without reading every run: pending from the queue, running from
 * the claims, dead, cancelled and skipped from \`runs_parked\` (a partial index of those runs only),
 * and the rest of the table's estimated rows (\`runRowsEstimate\`, $1) as succeeded. The exact
 * \`runCountByState\` reads the whole table: 2.2 s at 10 million runs.
 */
export const runCountSample = `
SELECT 'pending' AS state, count(*)::float8 AS n FROM run_queue
UNION ALL
SELECT 'running', coalesce(sum(cardinality(run_ids)), 0)::float8 FROM run_claims
UNION ALL
SELECT parked, count(*)::float8 FROM runs WHERE parked IS NOT NULL GROUP BY parked`;

/**
 * $1 tenant (or null). Runs per state: the claims' runs are running, and are among the pending
 * runs of `runs`.
 */
export const runCountByState = `
WITH stored AS (
  SELECT state, count(*)::int AS n FROM runs WHERE ($1::text IS NULL OR tenant_id = $1) GROUP BY state
), claimed AS (
  SELECT count(*)::int AS n FROM run_claims c, unnest(c.run_ids) AS x(run_id)
  WHERE $1::text IS NULL OR EXISTS (SELECT 1 FROM runs r WHERE r.run_id = x.run_id AND r.tenant_id = $1)
)
SELECT state, n - CASE WHEN state = 'pending' THEN (SELECT n FROM claimed) ELSE 0 END AS n FROM stored
UNION ALL
SELECT 'running', n FROM claimed`;

/** $1 now. Claimable queued runs by pool and priority: the ready queue's depth per queue and class. */
export const runReadyByPriority = `
SELECT pool, priority, count(*)::int AS n FROM run_queue WHERE available_at <= $1 GROUP BY pool, priority`;

/**
 * The shortest wait a limit's next token gives an idle claimer, ms: it wakes at most ten times a
 * second for tokens (several claimers share a bucket: the first to wake takes what refilled).
 */
export const MIN_TOKEN_WAIT_MS = 100;

/**
 * $1 pool, $2 now (the instant of the caller's claim that found too little: what it saw then is
 * what it waits on), $3 tenant (or null), $4 tenants (or null), $5 the caller's claim-ahead, ms.
 * The earliest instant after $2 a run may become claimable (it may be past already: the caller
 * claims again at once): the pool's next queued available_at, or, for a limit of these tenants
 * without room at $2, the instant it has room for one more:
 * - a limit that ran out of tokens at its last claim and is not full again: its next whole token,
 *   at least MIN_TOKEN_WAIT_MS on (several claimers share a bucket: the first to wake takes what
 *   refilled, and the others must not chase each fraction of a token);
 * - a limit whose one-second window is at its cap: the instant its oldest live sub-window leaves
 *   it (an exact instant, without that floor; if it frees too little, the claimer wakes again for
 *   the next one);
 * the later of the two when both hold; and $5 later: a caller wakes that much before an answer,
 * which is right for a run's slot but too early for a token. Runs held by a limit then wait for
 * its room, not a poll interval; a slot given back wakes claimers by NOTIFY instead. A limit
 * nothing waits for stops waking anyone once its bucket is full and its window has room.
 */
export const runNextAvailable = `
SELECT LEAST(
  (SELECT min(available_at) FROM run_queue
   WHERE pool = $1 AND available_at > $2 AND ($3::text IS NULL OR tenant_id = $3)
     AND ($4::text[] IS NULL OR tenant_id = ANY($4::text[]))),
  (SELECT min($2::timestamptz + ($5::int + GREATEST(
        CASE WHEN b.dry THEN GREATEST(${MIN_TOKEN_WAIT_MS}, ceil((floor(b.tokens) + 1 - b.tokens) / b.rate * 1000)) ELSE 0 END,
        CASE WHEN b.full THEN b.frees_at - extract(epoch FROM $2::timestamptz) * 1000 ELSE 0 END))
      * interval '1 millisecond')
   FROM (
     SELECT w.*, w.spent AND w.tokens < w.burst AS dry, w.used >= w.cap AS full FROM (
       SELECT l.rate, l.burst, l.tokens < 1 AS spent, ${tokensNow('l')} AS tokens, ${windowUsed('l')} AS used,
         ${windowCap('l')} AS cap,
         (SELECT (min(j) + 1) * ${WINDOW_GRAIN_MS} + ${WINDOW_MS} FROM unnest(l.recent_at) AS j
          WHERE j >= ${oldestLiveGrain('$2')}) AS frees_at
       FROM limits l
       WHERE l.rate IS NOT NULL AND (l.tokens < 1 OR l.recent_at IS NOT NULL) AND ($3::text IS NULL OR l.tenant_id = $3)
         AND ($4::text[] IS NULL OR l.tenant_id = ANY($4::text[]))
     ) w
   ) b
   WHERE b.dry OR b.full)
) AS at`;

/**
 * $1 now, $2 tenant (or null: every tenant), $3 most groups, $4 liveness of a worker row without
 * its own `live_ms`, ms.
 * Claimable runs that no live worker serves, by (tenant, pool, handler), longest waiting first,
 * with the number of such groups and runs over all of them (before the LIMIT). A live worker row
 * serves its pool, its tenant (a remote worker's row) or its `info.tenants` (a worker on the
 * database given --tenant) or else every tenant, and its `info.handlers` or else every handler.
 * What each worker serves is expanded once into `served` (NULL: any); the four anti-joins are
 * equality joins, so each hashes `served` instead of testing every group against every worker.
 * It reads the claimable part of `run_queue` once, as `runReadyByPriority` does.
 */
export const runUnserved = `
WITH ready AS (
  SELECT tenant_id, pool, handler, count(*)::int AS n, min(available_at) AS since
  FROM run_queue
  WHERE available_at <= $1 AND ($2::text IS NULL OR tenant_id = $2)
  GROUP BY tenant_id, pool, handler
), served AS MATERIALIZED (
  SELECT DISTINCT COALESCE(w.tenant_id, t.tenant) AS tenant_id, w.info ->> 'pool' AS pool, h.handler
  FROM nodes w
  LEFT JOIN LATERAL jsonb_array_elements_text(
    CASE WHEN jsonb_typeof(w.info -> 'tenants') = 'array' THEN w.info -> 'tenants' END) AS t(tenant) ON true
  LEFT JOIN LATERAL jsonb_array_elements_text(
    CASE WHEN jsonb_typeof(w.info -> 'handlers') = 'array' THEN w.info -> 'handlers' END) AS h(handler) ON true
  WHERE w.role = 'worker'
    AND ($2::text IS NULL OR w.tenant_id IS NULL OR w.tenant_id = $2)
    AND w.last_seen_at > $1::timestamptz - interval '1 millisecond' *
      CASE WHEN jsonb_typeof(w.info -> 'live_ms') = 'number' THEN (w.info ->> 'live_ms')::float8 ELSE $4::float8 END
)
SELECT r.tenant_id, r.pool, r.handler, r.n, r.since,
  count(*) OVER ()::int AS groups, sum(r.n) OVER ()::bigint AS runs
FROM ready r
WHERE NOT EXISTS (SELECT 1 FROM served s WHERE s.tenant_id = r.tenant_id AND s.pool = r.pool AND s.handler = r.handler)
  AND NOT EXISTS (SELECT 1 FROM served s WHERE s.tenant_id = r.tenant_id AND s.pool = r.pool AND s.handler IS NULL)
  AND NOT EXISTS (SELECT 1 FROM served s WHERE s.tenant_id IS NULL AND s.pool = r.pool AND s.handler = r.handler)
  AND NOT EXISTS (SELECT 1 FROM served s WHERE s.tenant_id IS NULL AND s.pool = r.pool AND s.handler IS NULL)
ORDER BY r.since, r.tenant_id, r.pool, r.handler
LIMIT $3`;

/**
 * $1 tenant, $2 runs (uuid[], a page's at most). The gates with a limit that each of these queued
 * runs passes (none for a run not queued), each with its bucket and recent starts as stored
 * (core's `roomAt` refills them), its slots, and one run holding a slot: what `waitingFor` reads
 * to say what holds the runs, for one run or a page of them in one statement.
 */
export const runGates = `
SELECT q.run_id, l.key, l.rate, l.burst, l.tokens, l.refilled_at, l.recent_at, l.recent_n, l.credited_tokens,
  l.max_concurrency, l.in_use, l.overlap,
  (SELECT h.run_id FROM (${slotHolders('ARRAY[l.gate]')}) h LIMIT 1) AS holder
FROM run_queue q CROSS JOIN LATERAL unnest(${gateSet('q')}) AS g(gate)
JOIN limit_states l ON l.gate = g.gate
WHERE q.tenant_id = $1 AND q.run_id = ANY($2::uuid[])
ORDER BY q.run_id, l.key`;

/** $1 tenant, $2 runs (uuid[]). Their queue rows (pending runs no claim holds). */
export const runQueued = `
SELECT run_id, pool, handler, available_at FROM run_queue WHERE tenant_id = $1 AND run_id = ANY($2::uuid[])`;
