/**
 * Range backfill: the runs of every slot of a job's schedule in `[from, to)`, created in one
 * statement, each only if its slot has none (one run per (job, slot), so a repeated or overlapping
 * backfill creates only what is missing). Which slots, and the bound on their count, are core's
 * (`backfillSlots`); everything is checked before the one write, so a refused backfill writes
 * nothing.
 */
import { backfillSlots, checkBackfillRange, NotFoundError, type Schedule, sortKey } from '../core/index.js';
import { checkInstant } from './checks.js';
import { getJob } from './jobs.js';
import { notifyRuns } from './notify.js';
import * as B from './queries/backfill.js';
import type { Queryable } from './rows.js';
import type { Store } from './store.js';
import type { BackfillResult } from './types.js';

/** What a backfill needs of the store: its ageing step, misfire threshold and schedule parser. */
interface Settings {
  agingStepMs: number;
  misfireThresholdMs: number;
  parse: (source: string, timezone: string) => Schedule;
}

export async function backfillRuns(
  db: Queryable,
  p: Parameters<Store['backfillRuns']>[0] & Settings,
): Promise<BackfillResult> {
  const now = checkInstant(p.now, 'now');
  checkInstant(p.from, 'from');
  checkInstant(p.to, 'to');
  checkBackfillRange(p.from, p.to);
  const job = await getJob(db, p);
  const slots = backfillSlots(p.parse(job.schedule, job.timezone), p.from, p.to);
  if (slots.length === 0) return { created: 0, existing: 0, firstSlot: null, lastSlot: null };
  // Keyed as a trigger's are: from the slot, at the job's priority.
  const keys = slots.map((s) => new Date(sortKey(s, job.priority, p.agingStepMs)));
  const { rows } = await db.query(B.runInsertBackfill, [
    p.tenantId,
    p.jobId,
    slots.map((s) => new Date(s)),
    keys,
    now,
  ]);
  const answer = rows[0] as { job: number; created: number };
  // Deleted since it was read: nothing was written.
  if (answer.job === 0) throw new NotFoundError(`job "${p.jobId}" does not exist`, { job_id: p.jobId });
  if (answer.created > 0) await notifyRuns(db);
  return {
    created: answer.created,
    existing: slots.length - answer.created,
    firstSlot: new Date(slots[0]!),
    lastSlot: new Date(slots.at(-1)!),
  };
}
