/**
 * The fragments of SQL that concern the gates a run passes (issue 18): which gates, who holds
 * their concurrency slots, and how the end of an attempt gives its slots back. The claim, which
 * takes tokens and slots, is in `claims.ts`.
 *
 * A run passes its tenant's gate (`<t>/tenant:<t>`), its job's own (`<t>/job:<j>`) and the named
 * limits its job listed when the run was made (`runs.gates`); a gate without a row in `limits`
 * lets everything through. Since migration 0015 the slots a claim took are recorded on its claim
 * row: `run_claims.gates`, the gates with a concurrency cap that the claim took a slot of for each
 * of its runs that passes them. A run of that claim holds a slot of gate G exactly when G is both
 * in its claim's `gates` and in its own gate set: no row per run and gate is written or deleted.
 */

import { JOB_KEY_PREFIX, MAX_JITTER_SECONDS } from '../../core/index.js';
import { RUNS_CHANNEL } from './channel.js';

/**
 * The gates a run of the row `q` (tenant_id, job_id, gates: a queued run or a run) passes: its
 * tenant's, its job's own and the named limits it took from its job.
 */
export const gateSet = (q: string) =>
  `(ARRAY[${q}.tenant_id || '/tenant:' || ${q}.tenant_id, ${q}.tenant_id || '/job:' || ${q}.job_id] || COALESCE(${q}.gates, '{}'))`;

/**
 * The gates of the named limits a job (the row `j`) lists, as a new run of it takes them
 * (`<tenant>/<key>`), or null when it lists none.
 */
export const gatesOf = (j: string) =>
  `NULLIF(ARRAY(SELECT ${j}.tenant_id || '/' || k FROM unnest(${j}.limits) AS k), '{}')`;

/**
 * Rows (gate, run_id): the running runs that hold a slot of one of `gates` (a text[] expression),
 * from the claims that took them (expired claims the reaper has not ended yet included: their
 * runs give their slots back when they are reaped). The claims whose `gates` share none of
 * `gates` are passed over without unnesting their runs.
 */
export const slotHolders = (gates: string) => `
  SELECT g.gate, x.run_id FROM run_claims c
  CROSS JOIN unnest(c.gates) AS g(gate)
  CROSS JOIN unnest(c.run_ids) AS x(run_id)
  JOIN runs r ON r.run_id = x.run_id
  WHERE c.gates && ${gates} AND g.gate = ANY(${gates}) AND g.gate = ANY(${gateSet('r')})`;

/**
 * The slots the ends of attempts gave back to the limit row `l` that no claim has folded into its
 * `in_use` yet: its releases' totals (`limit_releases`, migration 0015) less those folded
 * (`l.released`). `limit_states` shows `in_use` less these.
 */
export const pendingReleases = (l: string) =>
  `GREATEST(0, COALESCE((SELECT sum(r.released) FROM limit_releases r WHERE r.limit_id = ${l}.id), 0) - ${l}.released)::integer`;

/** How many shards a limit's release totals have: the end of an attempt adds to its connection's. */
export const RELEASE_SHARDS = 16;

/** Why a run of a job with overlap `skip` is `skipped` (its `last_error`). */
const SKIPPED_REASON = 'overlap skip: the slot arrived while an earlier run of the job was running';

/**
 * Marks `skipped` (final, parked, `finished_at` = `now`) the still pending runs a CTE named `src`
 * (run_id) took off the queue: the slots of a `skip` job that arrived while its run ran.
 */
export const skipRuns = (src: string, now: string) => `
  UPDATE runs r SET state = 'skipped', finished_at = ${now}, parked = 'skipped', last_error = '${SKIPPED_REASON}'
  FROM ${src} d WHERE r.run_id = d.run_id AND r.state = 'pending'`;

/**
 * Gives back, for `now`, the concurrency slots of the runs a CTE named `ended` (run_id,
 * lease_token, tenant_id, job_id, gates) held under the claims a CTE named `claims` (lease_token,
 * gates) read. `freed` counts the slots per gate (gates of the run's that its claim took a slot
 * of; counted per distinct gate set first). Without a lock on any limit row (migration 0015):
 * `released` adds them to the limits' release totals (the shard of this connection, rows taken
 * in id order, so two completions that share a shard never deadlock), which the next claim
 * through a limit folds into `in_use`, and wakes idle claimers (`pg_notify`, once per
 * transaction) when a limit may have been full (its `in_use`, releases not folded counted, at its
 * cap), so runs it held back may go now. Only then: a
 * transaction that notifies takes a lock that serialises its commit with every other notifying
 * one.
 * A job's gate with overlap `skip` is written at once instead: `freeing` locks it (in gate order,
 * the order a claim locks gates in, so the two never deadlock), `given_back` lowers `in_use` and
 * stamps `freed_at`, and its job's queued runs whose slot arrived while the run ran (after its
 * start, `busy_from`, and before now) are dropped: they become `skipped` here, whether or not a
 * claim saw them in time. Runs a claimer holds locked are left to that claim, which drops them by
 * the same rule (SKIP LOCKED: this statement never waits for a queue row while it holds a gate).
 * The ended runs themselves (a retry due at once) are not overlaps. The queue is read by its key,
 * for those runs only (`overlapped_runs`): as a join, the planner may hash it, and a hash join reads
 * its outer side's first row before it finds the inner side empty, which is a scan of the queue up
 * to its first due run in every completion of every other job. (Which gates are `skip` is read
 * from this statement's snapshot: a job switched to `skip` while its run ran gives that run's slot
 * back through the totals, and the slots that arrived during that one run are not dropped.)
 */
export const giveBack = (now: string, claims: string) => `
  freed AS MATERIALIZED (
    SELECT g.gate, sum(s.n)::integer AS n FROM (
      SELECT ${gateSet('e')} AS gs, c.gates AS taken, count(*) AS n
      FROM ended e JOIN ${claims} c ON c.lease_token = e.lease_token
      WHERE c.gates IS NOT NULL GROUP BY 1, 2
    ) s CROSS JOIN LATERAL unnest(s.gs) AS g(gate)
    WHERE g.gate = ANY(s.taken)
    GROUP BY g.gate
  ), released AS (
    INSERT INTO limit_releases AS r (limit_id, shard, released)
    SELECT l.id, pg_backend_pid() % ${RELEASE_SHARDS}, f.n FROM freed f
    JOIN limits l ON l.gate = f.gate
    WHERE l.overlap IS DISTINCT FROM 'skip'
    ORDER BY l.id
    ON CONFLICT (limit_id, shard) DO UPDATE SET released = r.released + EXCLUDED.released
    RETURNING (
      SELECT pg_notify('${RUNS_CHANNEL}', '') FROM limits l
      WHERE l.id = r.limit_id AND l.in_use >= l.max_concurrency
    )
  ), freeing AS (
    SELECT l.gate, l.tenant_id, l.key, l.overlap, l.busy_from FROM limits l
    WHERE l.gate IN (SELECT gate FROM freed) AND l.overlap = 'skip' ORDER BY l.gate FOR NO KEY UPDATE
  ), given_back AS (
    UPDATE limits l SET in_use = GREATEST(0, l.in_use - f.n), freed_at = ${now}
    FROM freed f
    WHERE l.gate = f.gate AND l.gate IN (SELECT gate FROM freeing)
    RETURNING pg_notify('${RUNS_CHANNEL}', '')
  ), overlapped_runs AS (
    SELECT r.run_id, f.busy_from FROM freeing f
    JOIN runs r ON r.tenant_id = f.tenant_id AND r.job_id = substr(f.key, ${JOB_KEY_PREFIX.length + 1})
      AND r.scheduled_for <= ${now} AND r.scheduled_for > f.busy_from - interval '${MAX_JITTER_SECONDS} seconds'
    WHERE f.overlap = 'skip' AND f.key LIKE '${JOB_KEY_PREFIX}%' AND r.run_id NOT IN (SELECT run_id FROM ended)
  ), overlapped_slots AS (
    SELECT q.run_id FROM run_queue q JOIN overlapped_runs o ON o.run_id = q.run_id
    WHERE q.run_id = ANY(ARRAY(SELECT run_id FROM overlapped_runs))
      AND q.available_at > o.busy_from AND q.available_at < ${now}
    FOR UPDATE OF q SKIP LOCKED
  ), overlaps_dequeued AS (
    DELETE FROM run_queue q WHERE q.run_id IN (SELECT run_id FROM overlapped_slots) RETURNING q.run_id
  ), overlaps_skipped AS (${skipRuns('overlaps_dequeued', now)}
  )`;

/**
 * Credits (migration 0017): how many lanes a limit's credits are spread over (a claim's lane is
 * its connection's, `pg_backend_pid() % CREDIT_LANES`), how many sub-windows one grant covers
 * (this one and the next CREDIT_GRAINS − 1, one credit row each), and how many batches of the
 * granting claim's size one credit row holds at most. A grant takes at most 1/(2 × CREDIT_LANES)
 * of the room left, so all the lanes together never hold more than half of what the limit had.
 */
export const CREDIT_LANES = 8;
export const CREDIT_GRAINS = 4;
export const CREDIT_BATCHES = 16;

/** The slots the credits of the limit row `l` set aside (no run holds them). */
export const creditedSlots = (l: string) =>
  `COALESCE((SELECT sum(c.slots) FROM limit_credits c WHERE c.limit_id = ${l}.id), 0)::integer`;

/**
 * The tokens the credits of the limit row `l` hold: spent from its bucket, not yet by a run. The
 * bucket refills only up to its burst less these (`tokensNow`), so that bucket and credits
 * together never hold more than the burst: a run a credit pays for later still counts as taken
 * then, and no span of d seconds starts more than burst + rate × d.
 */
export const creditedTokens = (l: string) =>
  `COALESCE((SELECT sum(c.tokens) FROM limit_credits c WHERE c.limit_id = ${l}.id), 0)`;
