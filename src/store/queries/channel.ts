/** The channel of NOTIFY that wakes idle claimers (read by `store/notify.ts`). */

/**
 * The wake-up hint for idle workers, delivered when the transaction commits: at most one per
 * tick or write. Polling stays the source of truth; a lost notification only costs a poll.
 */
export const RUNS_CHANNEL = 'tock_runs';

export const runNotify = `SELECT pg_notify('${RUNS_CHANNEL}', '')`;
