/**
 * Cancelling a run (`runCancel`): a queued run leaves the queue, a running one loses its claim (its
 * lease is revoked: its worker's next heartbeat finds it lost, and its late result is refused), and
 * either way it ends `cancelled`. The invariant it keeps is the other ends' of an attempt: the
 * statement locks the run's claim as they do, so of a cancel and a completion (failure, release,
 * reap) of the same attempt exactly one writes. A run that is no longer pending is a conflict naming
 * its state, with nothing written.
 */
import { ConflictError, NotFoundError } from '../core/index.js';
import { checkInstant, UUID } from './checks.js';
import { runCancel } from './queries/cancel.js';
import type { Queryable } from './rows.js';
import { getRun } from './run-reads.js';
import type { RunWithAttempts } from './types.js';

/**
 * How many times a cancel is tried while its run keeps moving between the queue and a claim (a
 * claim, a release, a retry) under it; each move is a write of another party, so a second try
 * almost always settles it.
 */
export const CANCEL_TRIES = 5;

/** Cancels the tenant's pending (queued or running) run; its state afterwards, with its attempts. */
export async function cancelRun(
  db: Queryable,
  p: { tenantId: string; runId: string; now: number },
): Promise<RunWithAttempts> {
  const now = checkInstant(p.now, 'now');
  if (!UUID.test(p.runId)) throw new NotFoundError(`run ${p.runId} does not exist`, { run_id: p.runId });
  for (let i = 0; i < CANCEL_TRIES; i++) {
    const { rows } = await db.query(runCancel, [p.tenantId, p.runId, now]);
    // Not the tenant's: a NotFoundError from the read.
    const run = await getRun(db, p);
    if (rows[0]) return run;
    if (run.state !== 'pending' && run.state !== 'running') {
      const message = `run ${p.runId} is ${run.state}; only a pending or running run can be cancelled`;
      throw new ConflictError(message, { state: run.state });
    }
    // Still pending: it moved between the queue and a claim while the statement ran. Again.
  }
  throw new ConflictError(`run ${p.runId} kept changing state while being cancelled; try again`);
}
