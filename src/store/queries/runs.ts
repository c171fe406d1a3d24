/**
 * Every statement that writes `runs`, `run_queue`, `run_claims` and `attempts`, and the attempts
 * of a run (the reads of runs are in `run-reads.ts`). Parameters are positional; each constant's
 * comment lists them.
 *
 * Since migration 0007 a claim does not write the run row: the run leaves `run_queue` and one
 * `run_claims` row (per claim and lease length) lists it. The attempt's end writes the run row
 * once, with the claim's token, worker and start, and takes the run off its claim. Reads go
 * through the `run_states` view, which shows a pending run that a claim lists as running.
 */

import { gatesOf, giveBack } from './gates.js';
import { deadDeliveries, lostWorkerDeliveries } from './notifications.js';
import { REPORT_COLUMNS, writeReports } from './progress.js';

export const RUN_COLUMNS = `run_id, tenant_id, job_id, scheduled_for, state, attempt, max_attempts, handler,
  payload, pool, priority, available_at, lease_owner, lease_expires_at, last_error, created_at,
  started_at, finished_at, claimed_at`;

/** RUN_COLUMNS of a row written to `runs` (no claim holds it: no expiry). */
export const WRITTEN_COLUMNS = RUN_COLUMNS.replace(
  'lease_expires_at',
  'NULL::timestamptz AS lease_expires_at',
);

/**
 * Queues the runs a CTE named `src` returned (run_id, tenant_id, job_id, pool, handler, priority,
 * available_at, sort_key, gates).
 */
export const enqueue = (src: string, where = 'true') => `
  INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates)
  SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key, gates FROM ${src} WHERE ${where}`;

/**
 * Takes the runs a CTE named `ended` returned (run_id, lease_token) off their claims, which an
 * earlier CTE named `live` (lease_token, run_ids) locked: a claim left with no run goes. Whether a
 * claim is shrunk or deleted is decided on `live`, the locked and so latest version of the claim,
 * not on the version this statement's snapshot sees: when another statement took a run off the
 * same claim while this one waited for the lock, the snapshot's list is stale, and deciding on it
 * did neither (the claim kept listing a run that had ended).
 */
export const unclaim = `
  unclaiming AS MATERIALIZED (
    SELECT e.lease_token, e.ids, cardinality(l.run_ids) > cardinality(e.ids) AS shrinks
    FROM (SELECT lease_token, array_agg(run_id) AS ids FROM ended GROUP BY lease_token) e
    JOIN live l ON l.lease_token = e.lease_token
  ), unclaimed AS (
    UPDATE run_claims c SET run_ids = ARRAY(SELECT unnest(c.run_ids) EXCEPT ALL SELECT unnest(u.ids))
    FROM unclaiming u WHERE c.lease_token = u.lease_token AND u.shrinks
  ), emptied AS (
    DELETE FROM run_claims c USING unclaiming u WHERE c.lease_token = u.lease_token AND NOT u.shrinks
  )`;

/**
 * One row per run of the claims a CTE named `claims` returned (lease_token, run_ids, and `columns`),
 * materialised: a join with it hashes the runs (the planner, which guesses 10 elements per array,
 * would otherwise unnest every claim once per given run).
 */
export const MEMBERS = (claims: string, ...columns: string[]) => `
  SELECT x.run_id, c.lease_token, ${columns.map((col) => `c.${col}`).join(', ')}
  FROM ${claims} c CROSS JOIN unnest(c.run_ids) AS x(run_id)`;

/**
 * For a CTE named `given` (run_id, lease_token, …) and $3 now: `live`, the claims its tokens name
 * that are still live, locked FOR NO KEY UPDATE (two writers of one claim take turns; a reaper
 * deleting it waits). A given run is its claim's when that claim's list holds it: joined by token,
 * then `g.run_id = ANY(l.run_ids)`, a scan of one inline list of at most CLAIM_PART_RUNS ids, which
 * costs less than unnesting the claims into a row per run and hashing those.
 */
const LIVE = `
  live AS (
    SELECT c.lease_token, c.worker_id, c.claimed_at, c.run_ids, c.gates FROM run_claims c
    WHERE c.lease_token IN (SELECT lease_token FROM given) AND c.lease_expires_at > $3
    FOR NO KEY UPDATE
  )`;

/**
 * When an attempt started: the handler's start the worker reported (`reported`, or null), kept
 * within [the later of the claim and `available_at`, the attempt's end] — a worker's word is
 * trusted no further (a run claimed ahead of its slot cannot have started before it); unreported
 * (a reaped attempt, an older worker), that earliest possible start. Never after `end`: an attempt
 * that ended before its slot (a release; a client completing early) started when it ended.
 * (`GREATEST` skips a null `reported`.)
 */
export const startOf = (claimed: string, reported: string, available: string, end: string) =>
  `LEAST(${end}::timestamptz, GREATEST(${claimed}, ${available}, ${reported}))`;

/**
 * The row of attempts that just ended in failure, release or expiry, from the rows a CTE named
 * "ended" returned: lease_token, run_id, ended_attempt (the attempt that ended), lease_owner,
 * started_at, claimed_at, outcome, error, error_stack, output. Completes in place a row an earlier
 * version wrote at claim.
 */
export const recordEnded = (finishedAt: string, where = 'true') => `
  INSERT INTO attempts (lease_token, run_id, attempt, worker_id, started_at, claimed_at, finished_at, outcome, error,
    error_stack, output)
  SELECT lease_token, run_id, ended_attempt, lease_owner, started_at, claimed_at, ${finishedAt}, outcome, error,
    error_stack, output FROM ended WHERE ${where}
  ON CONFLICT (lease_token, run_id) DO UPDATE SET finished_at = EXCLUDED.finished_at, outcome = EXCLUDED.outcome,
    error = EXCLUDED.error, error_stack = EXCLUDED.error_stack, output = EXCLUDED.output,
    started_at = EXCLUDED.started_at, claimed_at = EXCLUDED.claimed_at`;

/**
 * $1 tenants, $2 jobs, $3 slots, $4 sort keys, $5 now, $6 available_at (slot + jitter).
 * Materialises slots from their (locked) jobs and queues them; a slot that already has a run is
 * skipped silently.
 */
export const runInsertSlots = `
WITH inserted AS (
  INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
    backoff_base_seconds, backoff_cap_seconds, lease_seconds, timeout_seconds, available_at, sort_key, created_at, gates)
  SELECT j.tenant_id, j.job_id, v.slot, j.max_attempts, j.handler, j.payload, j.pool, j.priority,
    j.backoff_base_seconds, j.backoff_cap_seconds, j.lease_seconds, j.timeout_seconds, v.available_at, v.sort_key, $5,
    ${gatesOf('j')}
  FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $6::timestamptz[])
    AS v(tenant_id, job_id, slot, sort_key, available_at)
  JOIN jobs j ON j.tenant_id = v.tenant_id AND j.job_id = v.job_id
  ON CONFLICT (tenant_id, job_id, scheduled_for) DO NOTHING
  RETURNING run_id, tenant_id, job_id, scheduled_for, pool, handler, priority, available_at, sort_key, gates
), queued AS (${enqueue('inserted')}
)
SELECT run_id, tenant_id, job_id, scheduled_for FROM inserted`;

/** $1 tenant, $2 job, $3 slot */
export const runBySlot = `SELECT run_id FROM runs WHERE tenant_id = $1 AND job_id = $2 AND scheduled_for = $3`;

/**
 * $1 run. The attempts that ended in failure, release or expiry have rows; the running attempt is
 * its claim, the succeeded one its run row. (A row an earlier version wrote at claim, outcome still
 * null, is one of those again, so it is not shown.) Each with what its handler reported, if it did
 * (`attempt_progress`, by the attempt's token).
 */
export const attemptsOfRun = `
SELECT a.attempt, a.worker_id, a.started_at, a.claimed_at, a.finished_at, a.outcome, a.error, a.error_stack,
  a.output, ${REPORT_COLUMNS}
FROM attempts a LEFT JOIN attempt_progress p ON p.run_id = a.run_id AND p.lease_token = a.lease_token
WHERE a.run_id = $1 AND a.outcome IS NOT NULL
UNION ALL
SELECT r.attempt, r.lease_owner, r.started_at, r.claimed_at,
  CASE WHEN r.state = 'succeeded' THEN r.finished_at END,
  CASE WHEN r.state = 'succeeded' THEN 'succeeded' END, NULL, NULL, r.output, ${REPORT_COLUMNS}
FROM run_states r LEFT JOIN attempt_progress p ON p.run_id = r.run_id AND p.lease_token = r.lease_token
WHERE r.run_id = $1 AND r.state IN ('running', 'succeeded')
ORDER BY attempt, started_at`;

/**
 * $1 run ids, $2 tokens, $3 now, $4 tenant (or null), $5 reports (jsonb, or null: see `writeReports`).
 * Renews the live claims the leases belong to (each by its own lease length), and returns each
 * given run its claim still lists; the rest are lost. What the handlers reported is written for
 * those runs alone. A claim is renewed only when it holds a given
 * (run, token) pair, and with a tenant only when that run is the tenant's: a token alone renews
 * nothing, so another tenant's leaked token cannot pin that tenant's runs as running. (The pair
 * is checked against the claim's array with `= ANY`, which stops at the first match; `given` is
 * still unnested once.)
 */
export const runHeartbeatMany = `
WITH given AS (
  SELECT v.run_id, v.lease_token FROM unnest($1::uuid[], $2::uuid[]) AS v(run_id, lease_token)
  WHERE $4::text IS NULL OR EXISTS (SELECT 1 FROM runs r WHERE r.run_id = v.run_id AND r.tenant_id = $4)
), renewed AS (
  UPDATE run_claims c SET lease_expires_at = $3::timestamptz + c.lease_ms * interval '1 millisecond'
  WHERE c.lease_token IN (SELECT lease_token FROM given) AND c.lease_expires_at > $3
    AND EXISTS (SELECT 1 FROM given g WHERE g.lease_token = c.lease_token AND g.run_id = ANY(c.run_ids))
  RETURNING c.lease_token, c.lease_expires_at, c.run_ids
), members AS MATERIALIZED (${MEMBERS('renewed', 'lease_expires_at')}
), kept AS (
  SELECT g.run_id, g.lease_token, m.lease_expires_at FROM given g
  JOIN members m ON m.run_id = g.run_id AND m.lease_token = g.lease_token
), ${writeReports('$5', 'kept', '$3::timestamptz')}
SELECT run_id, lease_expires_at FROM kept`;

/**
 * $1 run ids, $2 tokens, $3 now, $4 tenant (or null), $5 output tails (or nulls), $6 handler starts
 * (epoch ms, or nulls: numbers cost the driver a third of what dates do to send), $7 reports (jsonb,
 * or null: see `writeReports`).
 * Success, only under a live lease. The succeeded attempt is the run row (worker, claim, start,
 * finish, output): no attempt row is written; what its handler reported last is. Answers the given
 * runs it did not complete (their lease was lost): a batch that all succeeded, the usual case,
 * answers no row, so neither the server writes nor the driver reads a row per run.
 */
export const runCompleteMany = `
WITH given AS (
  SELECT v.run_id, v.lease_token, v.output, to_timestamp(v.started_ms / 1000) AS started
  FROM unnest($1::uuid[], $2::uuid[], $5::text[], $6::float8[]) AS v(run_id, lease_token, output, started_ms)
), ${LIVE}, ended AS (
  UPDATE runs r SET state = 'succeeded', finished_at = $3, lease_token = l.lease_token, lease_owner = l.worker_id,
    started_at = ${startOf('l.claimed_at', 'g.started', 'r.available_at', '$3')}, claimed_at = l.claimed_at,
    last_error = NULL, output = g.output
  FROM given g JOIN live l ON l.lease_token = g.lease_token AND g.run_id = ANY(l.run_ids)
  WHERE r.run_id = g.run_id AND r.state = 'pending' AND ($4::text IS NULL OR r.tenant_id = $4)
  RETURNING r.run_id, l.lease_token, r.tenant_id, r.job_id, r.gates
), ${unclaim}, ${giveBack('$3::timestamptz', 'live')}, ${writeReports('$7', 'ended', '$3::timestamptz')}
SELECT g.run_id FROM given g WHERE g.run_id NOT IN (SELECT run_id FROM ended)`;

/** $1 run, $2 token, $3 now, $4 tenant (or null). What a failure needs to decide between retry and dead letter. */
export const runFailRead = `
SELECT r.attempt, r.max_attempts, r.priority, r.backoff_base_seconds, r.backoff_cap_seconds
FROM runs r JOIN run_claims c ON c.lease_token = $2 AND r.run_id = ANY(c.run_ids) AND c.lease_expires_at > $3
WHERE r.run_id = $1 AND r.state = 'pending' AND ($4::text IS NULL OR r.tenant_id = $4)`;

/**
 * $1 run, $2 token, $3 now, $4 new state ('pending' | 'dead'), $5 available_at, $6 sort_key, $7 error
 * message, $8 output tail (or null), $9 handler start (epoch ms, or null), $10 error stack (or null),
 * $11 report (jsonb, or null: see `writeReports`).
 * A failed attempt under a live lease: retry (next attempt, queued again) or dead letter; a dead
 * letter also writes the `run.dead` deliveries of the tenant's notifications that want it (none: no write).
 */
export const runFail = `
WITH live AS (
  SELECT lease_token, worker_id, claimed_at, run_ids, gates FROM run_claims
  WHERE lease_token = $2 AND $1 = ANY(run_ids) AND lease_expires_at > $3
  FOR NO KEY UPDATE
), ended AS (
  UPDATE runs r SET state = $4,
    attempt = r.attempt + CASE WHEN $4 = 'pending' THEN 1 ELSE 0 END,
    available_at = COALESCE($5, r.available_at), sort_key = COALESCE($6, r.sort_key),
    last_error = $7, lease_token = l.lease_token, lease_owner = l.worker_id,
    started_at = ${startOf('l.claimed_at', 'to_timestamp($9::float8 / 1000)', 'r.available_at', '$3')}, claimed_at = l.claimed_at,
    finished_at = CASE WHEN $4 = 'dead' THEN $3::timestamptz END,
    parked = CASE WHEN $4 = 'dead' THEN 'dead' END
  FROM live l
  WHERE r.run_id = $1 AND r.state = 'pending'
  RETURNING r.run_id, r.lease_token, r.attempt, r.available_at, r.tenant_id, r.job_id, r.pool, r.handler,
    r.priority, r.sort_key, r.gates, r.state,
    r.attempt - CASE WHEN $4 = 'pending' THEN 1 ELSE 0 END AS ended_attempt, r.lease_owner, r.started_at,
    r.claimed_at, 'failed'::text AS outcome, $7::text AS error, $10::text AS error_stack, $8::text AS output
), queued AS (${enqueue('ended', "state = 'pending'")}
), ${unclaim}, recorded AS (${recordEnded('$3::timestamptz')}
), ${giveBack('$3::timestamptz', 'live')}, ${writeReports('$11', 'ended', '$3::timestamptz')},
${deadDeliveries('ended', '$3::timestamptz')}
SELECT attempt, available_at FROM ended`;

/**
 * $1 run ids, $2 tokens, $3 now, $4 reason, $5 tenant (or null), $6 handler starts (epoch ms, or
 * nulls: never started). Back to the queue, same attempt, same place; only under a live lease (an expired one is
 * the reaper's, and counts as an attempt). The run row is not written: the released attempt's row
 * in attempts says who held it.
 */
export const runReleaseMany = `
WITH given AS (
  SELECT v.run_id, v.lease_token, to_timestamp(v.started_ms / 1000) AS started
  FROM unnest($1::uuid[], $2::uuid[], $6::float8[]) AS v(run_id, lease_token, started_ms)
), ${LIVE}, ended AS (
  SELECT r.run_id, l.lease_token, r.tenant_id, r.job_id, r.pool, r.handler, r.priority, r.available_at,
    r.sort_key, r.gates, r.attempt AS ended_attempt, l.worker_id AS lease_owner,
    ${startOf('l.claimed_at', 'g.started', 'r.available_at', '$3')} AS started_at, l.claimed_at,
    'released'::text AS outcome, $4::text AS error, NULL::text AS error_stack, NULL::text AS output
  FROM given g JOIN live l ON l.lease_token = g.lease_token AND g.run_id = ANY(l.run_ids)
  JOIN runs r ON r.run_id = g.run_id
  WHERE r.state = 'pending' AND ($5::text IS NULL OR r.tenant_id = $5)
), queued AS (${enqueue('ended')}
), ${unclaim}, recorded AS (${recordEnded('$3::timestamptz')}
), ${giveBack('$3::timestamptz', 'live')}
SELECT run_id FROM ended`;

/**
 * $1 now, $2 claims. The runs of the claims whose lease expired, oldest expiry first: every run of
 * each claim, so that the reap can end the claim.
 */
export const runReapCandidates = `
WITH expired AS (
  SELECT lease_token, run_ids FROM run_claims WHERE lease_expires_at < $1 ORDER BY lease_expires_at LIMIT $2
)
SELECT r.run_id, e.lease_token, r.tenant_id, r.job_id, r.scheduled_for, r.attempt, r.max_attempts, r.priority,
  r.backoff_base_seconds, r.backoff_cap_seconds
FROM expired e CROSS JOIN unnest(e.run_ids) AS x(run_id) JOIN runs r ON r.run_id = x.run_id`;

/**
 * $1 run ids, $2 tokens, $3 new states, $4 available_at, $5 sort keys, $6 now.
 * Ends the claims read (only those still expired: one renewed since stays) and each of their runs
 * still listed (a run that ended since is not). A run of such a claim that the reaper did not read
 * goes back to the queue as it was, so no run is left without a queue row or a claim. Writes the
 * `run.dead` and `worker.lost` deliveries of the notifications that want them (none: no write).
 */
export const runReap = `
WITH given AS (
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::timestamptz[])
    AS v(run_id, lease_token, state, available_at, sort_key)
), expired AS (
  DELETE FROM run_claims c WHERE c.lease_token IN (SELECT lease_token FROM given) AND c.lease_expires_at < $6
  RETURNING c.lease_token, c.worker_id, c.claimed_at, c.run_ids, c.gates
), members AS MATERIALIZED (${MEMBERS('expired', 'worker_id', 'claimed_at')}
), held AS (
  SELECT m.run_id, m.lease_token, m.worker_id, m.claimed_at, g.state, g.available_at, g.sort_key
  FROM members m LEFT JOIN given g ON g.run_id = m.run_id AND g.lease_token = m.lease_token
), ended AS (
  UPDATE runs r SET state = COALESCE(h.state, 'pending'),
    attempt = r.attempt + CASE WHEN h.state = 'pending' THEN 1 ELSE 0 END,
    available_at = COALESCE(h.available_at, r.available_at), sort_key = COALESCE(h.sort_key, r.sort_key),
    last_error = CASE WHEN h.state IS NULL THEN r.last_error ELSE 'lease expired' END,
    lease_token = h.lease_token, lease_owner = h.worker_id, claimed_at = h.claimed_at,
    started_at = ${startOf('h.claimed_at', 'NULL::timestamptz', 'r.available_at', '$6')},
    finished_at = CASE WHEN h.state = 'dead' THEN $6::timestamptz END,
    parked = CASE WHEN h.state = 'dead' THEN 'dead' END
  FROM held h
  WHERE r.run_id = h.run_id AND r.state = 'pending'
  RETURNING r.run_id, r.lease_token, r.tenant_id, r.job_id, r.scheduled_for, r.state, r.attempt, r.pool, r.handler,
    r.priority, r.available_at, r.sort_key, r.gates, h.state IS NOT NULL AS reaped,
    r.attempt - CASE WHEN h.state = 'pending' THEN 1 ELSE 0 END AS ended_attempt, r.lease_owner, r.started_at,
    r.claimed_at, 'lease_expired'::text AS outcome, 'lease expired'::text AS error, NULL::text AS error_stack,
    NULL::text AS output
), queued AS (${enqueue('ended', "state = 'pending'")}
), recorded AS (${recordEnded('$6::timestamptz', 'reaped')}
), ${giveBack('$6::timestamptz', 'expired')},
${deadDeliveries('ended', '$6::timestamptz')}, ${lostWorkerDeliveries('ended', '$6::timestamptz')}
SELECT run_id, lease_token, tenant_id, job_id, scheduled_for, state, attempt FROM ended WHERE reaped`;

/**
 * $1 tenant, $2 runs (uuid[]), $3 now, $4 their sort keys (timestamptz[], in the order of $2).
 * Dead runs back to the queue with a fresh budget of attempts, numbered on from their last (so the
 * attempts of two passes are told apart): the pass begins at attempt + 1 and may go
 * max_attempts − first_attempt + 1 attempts, as the last did. A run of another tenant, or one no
 * longer dead (replayed, or pruned, meanwhile), is not written and has no row back: the single
 * replay (one run) and the bulk one (a batch of `runDeadMatching`) are this one statement.
 */
export const runReplay = `
WITH replayed AS (
  UPDATE runs SET state = 'pending', attempt = attempt + 1, first_attempt = attempt + 1,
    max_attempts = attempt + (max_attempts - first_attempt + 1), available_at = $3, sort_key = v.key,
    finished_at = NULL, parked = NULL
  FROM unnest($2::uuid[], $4::timestamptz[]) AS v(id, key)
  WHERE tenant_id = $1 AND run_id = v.id AND state = 'dead'
  RETURNING ${WRITTEN_COLUMNS}, sort_key, gates
), queued AS (${enqueue('replayed')}
)
SELECT ${RUN_COLUMNS} FROM replayed`;

/** $1 tenant, $2 job, $3 now. Queued runs of a deleted job never run (claimed ones finish). */
export const runCancelPendingOfJob = `
WITH dequeued AS (
  DELETE FROM run_queue q
  USING runs r
  WHERE r.tenant_id = $1 AND r.job_id = $2 AND r.state = 'pending' AND q.run_id = r.run_id
  RETURNING q.run_id
)
UPDATE runs SET state = 'cancelled', finished_at = $3, parked = 'cancelled'
FROM dequeued WHERE runs.run_id = dequeued.run_id`;

/**
 * $1 tenant, $2 job, $3 slot, $4 sort key, $5 now, $6 payload (JSON text, or null: the job's).
 * One ad-hoc run from the job's definition, queued.
 */
export const runInsertOne = `
WITH inserted AS (
  INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
    backoff_base_seconds, backoff_cap_seconds, lease_seconds, timeout_seconds, available_at, sort_key, created_at, gates)
  SELECT j.tenant_id, j.job_id, $3, j.max_attempts, j.handler, COALESCE($6::jsonb, j.payload), j.pool, j.priority,
    j.backoff_base_seconds, j.backoff_cap_seconds, j.lease_seconds, j.timeout_seconds, $3, $4, $5, ${gatesOf('j')}
  FROM jobs j WHERE j.tenant_id = $1 AND j.job_id = $2
  ON CONFLICT (tenant_id, job_id, scheduled_for) DO NOTHING
  RETURNING ${WRITTEN_COLUMNS}, sort_key, gates
), queued AS (${enqueue('inserted')}
)
SELECT ${RUN_COLUMNS} FROM inserted`;

/** Reads the database's own clock (epoch ms) for the offset clock. */
export const clockRead = `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`;
