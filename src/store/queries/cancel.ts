/**
 * Cancelling a run: the one statement that ends a pending run by an operator's word, whether it
 * waits in the queue or runs under a claim. Parameters are positional; the comment lists them.
 */
import { giveBack } from './gates.js';
import { recordEnded, startOf, unclaim } from './runs.js';

/**
 * $1 tenant, $2 run, $3 now. The tenant's pending run becomes `cancelled` (`finished_at` now,
 * `parked = 'cancelled'`), from wherever it is:
 *
 * - queued: its queue row goes (locked by the delete, so a claimer's `SKIP LOCKED` passes it by);
 * - running: the claim that lists it is locked `FOR NO KEY UPDATE`, live or expired (an expired
 *   claim the reaper has not taken yet still holds it), as every statement that ends an attempt
 *   locks it. The run is taken off the claim (`unclaim`; a claim left empty goes), which revokes its
 *   lease: the worker's next heartbeat reports it lost and aborts the handler, and its late
 *   completion, failure or release finds no claim listing it and is refused as lost. The ended
 *   attempt gets its row in attempts with the outcome `cancelled`, and the run row records it
 *   (token, worker, claim, start) as a failure's end does.
 *
 * A concurrent completion (or failure, release, reap) of the same run takes the claim's lock first
 * or after: whichever runs second re-reads the locked claim, finds the run gone from it (and the run
 * row no longer pending), and writes nothing. So exactly one of them ends the attempt.
 *
 * A running run's slots of limits are given back (`giveBack`, from its claim's `gates`), as every end
 * of an attempt does.
 *
 * `ended` has one row per run cancelled (at most one): run_id, lease_token (the claim's, or null
 * for a run taken from the queue: no attempt ended and it held nothing), tenant_id, ended_attempt,
 * lease_owner, started_at, claimed_at, outcome, error, error_stack, output (the columns
 * `recordEnded` reads). No row: nothing was cancelled (not the tenant's, not pending, or it moved
 * between the queue and a claim while this statement ran; the caller reads it to say which).
 */
export const runCancel = `
WITH target AS (
  SELECT run_id FROM runs WHERE run_id = $2 AND tenant_id = $1 AND state = 'pending'
), dequeued AS (
  DELETE FROM run_queue q WHERE q.run_id = (SELECT run_id FROM target)
  RETURNING q.run_id
), live AS (
  SELECT c.lease_token, c.worker_id, c.claimed_at, c.run_ids, c.gates FROM run_claims c
  WHERE (SELECT run_id FROM target) = ANY(c.run_ids)
  FOR NO KEY UPDATE
), held AS (
  SELECT run_id, NULL::uuid AS lease_token, NULL::text AS worker_id, NULL::timestamptz AS claimed_at FROM dequeued
  UNION ALL
  SELECT t.run_id, l.lease_token, l.worker_id, l.claimed_at FROM live l CROSS JOIN target t
), ended AS (
  UPDATE runs r SET state = 'cancelled', finished_at = $3, parked = 'cancelled',
    lease_token = COALESCE(h.lease_token, r.lease_token), lease_owner = COALESCE(h.worker_id, r.lease_owner),
    claimed_at = COALESCE(h.claimed_at, r.claimed_at),
    started_at = CASE WHEN h.lease_token IS NULL THEN r.started_at
      ELSE ${startOf('h.claimed_at', 'NULL::timestamptz', 'r.available_at', '$3')} END
  FROM held h
  WHERE r.run_id = h.run_id AND r.tenant_id = $1 AND r.state = 'pending'
  RETURNING r.run_id, h.lease_token, r.tenant_id, r.job_id, r.gates, r.attempt AS ended_attempt, h.worker_id AS lease_owner,
    r.started_at, h.claimed_at, 'cancelled'::text AS outcome, NULL::text AS error, NULL::text AS error_stack,
    NULL::text AS output
), ${unclaim}, recorded AS (${recordEnded('$3::timestamptz', 'lease_token IS NOT NULL')}
), ${giveBack('$3::timestamptz', 'live')}
SELECT run_id, lease_token FROM ended`;
