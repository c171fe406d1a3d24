/** What a claim answers per run: the claim statements' and `claimAgain`'s columns. */
import { epochMs } from './room.js';

/**
 * The columns of a claimed run, `r` its run row and `c` its claim: its instants as epoch ms
 * (float8), which the driver reads for a fraction of what it spends parsing a timestamp's text.
 * Read by position (`toClaimed` in store/claims.ts): a change of order here is one there.
 */
export const CLAIMED_COLUMNS = (
  r: string,
  c: string,
) => `${r}.run_id, ${r}.tenant_id, ${r}.job_id, ${r}.handler,
  ${r}.payload, ${r}.pool, ${epochMs(`${r}.scheduled_for`)} AS scheduled_for, ${r}.attempt, ${r}.max_attempts,
  ${c}.lease_token, ${epochMs(`${c}.lease_expires_at`)} AS lease_expires_at, ${epochMs(`${r}.available_at`)} AS available_at,
  ${r}.timeout_seconds, ${epochMs(`${r}.created_at`)} AS created_at`;
