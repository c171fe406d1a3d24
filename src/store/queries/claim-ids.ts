/**
 * The statements that find a claim by its claim id (migration 0009): a retried claim answers the
 * claim it made before, and a server whose client went away releases what it claimed.
 */
import { CLAIMED_COLUMNS } from './claimed.js';
import { giveBack } from './gates.js';
import { enqueue, MEMBERS, recordEnded, startOf, unclaim } from './runs.js';

/**
 * $1 claim id, $2 now, $3 worker, $4 tenant (or null).
 * The live claims a claim id names, of the same worker and tenant (another tenant's id finds
 * nothing), marked retried, with the runs they still hold in `sort_key` order: the answer a retry
 * gets, same runs and same tokens. On run_claims_claim_id, whose key (migration 0010) is this scope
 * (claim id, tenant, worker, lease length), so only ever a probe of that index.
 */
export const claimAgain = `
WITH found AS (
  UPDATE run_claims c SET retried = true
  WHERE c.claim_id = $1::uuid AND c.worker_id = $3 AND c.tenant_id IS NOT DISTINCT FROM $4::text
    AND c.lease_expires_at > $2
  RETURNING c.lease_token, c.lease_expires_at, c.run_ids
), members AS MATERIALIZED (${MEMBERS('found', 'lease_expires_at')}
)
SELECT ${CLAIMED_COLUMNS('r', 'm')}
FROM members m JOIN runs r ON r.run_id = m.run_id
WHERE r.state = 'pending'
ORDER BY r.sort_key`;

/**
 * $1 claim id, $2 worker, $3 now, $4 reason, $5 tenant (or null).
 * Gives back, as `runReleaseMany` does (same attempt, same place in the queue, no attempt spent),
 * every run of the live claims a claim id names, unless a retry was answered with that claim: its
 * worker then holds the leases. The lock makes a concurrent retry wait (it then finds nothing) or,
 * if the retry came first, rechecks `retried` and releases nothing.
 */
export const claimRelease = `
WITH live AS (
  SELECT c.lease_token, c.worker_id, c.claimed_at, c.run_ids, c.gates FROM run_claims c
  WHERE c.claim_id = $1::uuid AND c.worker_id = $2 AND c.tenant_id IS NOT DISTINCT FROM $5::text
    AND c.lease_expires_at > $3 AND NOT c.retried
  FOR NO KEY UPDATE
), members AS MATERIALIZED (${MEMBERS('live', 'worker_id', 'claimed_at')}
), ended AS (
  SELECT r.run_id, m.lease_token, r.tenant_id, r.job_id, r.pool, r.handler, r.priority, r.available_at,
    r.sort_key, r.gates, r.attempt AS ended_attempt, m.worker_id AS lease_owner,
    ${startOf('m.claimed_at', 'NULL::timestamptz', 'r.available_at', '$3')} AS started_at, m.claimed_at,
    'released'::text AS outcome, $4::text AS error, NULL::text AS error_stack, NULL::text AS output
  FROM members m JOIN runs r ON r.run_id = m.run_id
  WHERE r.state = 'pending'
), queued AS (${enqueue('ended')}
), ${unclaim}, recorded AS (${recordEnded('$3::timestamptz')}
), ${giveBack('$3::timestamptz', 'live')}
SELECT run_id FROM ended`;
