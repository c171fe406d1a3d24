/**
 * Dead letters by filter: how many match (a bounded count), and replaying them a bounded batch at
 * a time. A batch is read (`runDeadMatching`, newest slot first, after the cursor) and written by
 * the single replay's own statement (`runReplay`): each run gets exactly what `tock dlq replay
 * <run>` gives it. A run that stopped being dead between the read and the write (replayed by
 * another operator, pruned) is not written and is counted as skipped. The cursor is the batch's
 * last run, so the next call goes on after it and never replays one run twice in one pass, even
 * if it dies again meanwhile.
 */
import { sortKey, ValidationError, validateId } from '../core/index.js';
import { checkInstant, UUID } from './checks.js';
import { decodeCursor, encodeCursor, notIssued } from './cursor.js';
import { notifyRuns } from './notify.js';
import * as D from './queries/dead-letters.js';
import * as R from './queries/runs.js';
import type { Queryable } from './rows.js';
import type { DeadFilter, DeadReplay } from './types.js';

/** Most dead runs one replay call writes. */
export const MAX_REPLAY_BATCH = 500;
/** Most dead runs a count counts (`atLeast` says there are more). */
export const MAX_DEAD_COUNT = 10_000;
/** Most characters of the error text a filter looks for. */
const MAX_ERROR_TEXT = 200;

/** The filter as the statements take it ($1-$5), or a ValidationError naming the bad field. */
function filterParams(tenantId: string, f: DeadFilter): unknown[] {
  if (f.jobId !== undefined) validateId(f.jobId, 'job_id');
  const text = f.errorContains;
  if (text !== undefined && (text.length === 0 || text.length > MAX_ERROR_TEXT))
    throw new ValidationError(`error_contains must be 1 to ${MAX_ERROR_TEXT} characters`, {
      field: 'error_contains',
    });
  const from = f.slotFrom === undefined ? null : checkInstant(f.slotFrom, 'slot_from');
  const to = f.slotTo === undefined ? null : checkInstant(f.slotTo, 'slot_to');
  if (from !== null && to !== null && from.getTime() >= to.getTime())
    throw new ValidationError('slot_from must be before slot_to', { field: 'slot_to' });
  return [tenantId, f.jobId ?? null, text ?? null, from, to];
}

/** How many of the tenant's dead runs match `filter`, counted up to `MAX_DEAD_COUNT`. */
export async function countDeadRuns(
  db: Queryable,
  p: { tenantId: string; filter: DeadFilter },
): Promise<{ count: number; atLeast: boolean }> {
  const { rows } = await db.query(p.filter.jobId === undefined ? D.runDeadCount : D.runDeadCountOfJob, [
    ...filterParams(p.tenantId, p.filter),
    MAX_DEAD_COUNT + 1,
  ]);
  const n = rows[0]?.n ?? 0;
  return { count: Math.min(n, MAX_DEAD_COUNT), atLeast: n > MAX_DEAD_COUNT };
}

/** The cursor of a replay: the last run of the batch before (its slot and id). */
function afterOf(cursor: string | null | undefined): [Date | null, string | null] {
  if (!cursor) return [null, null];
  const [slot, runId] = decodeCursor(cursor);
  if (typeof slot !== 'number' || typeof runId !== 'string' || !UUID.test(runId)) throw notIssued();
  return [checkInstant(slot, 'cursor'), runId];
}

/**
 * Replays up to `limit` (at most `MAX_REPLAY_BATCH`) of the tenant's dead runs that match
 * `filter`, newest slot first, after `cursor`.
 */
export async function replayDeadRuns(
  db: Queryable,
  p: {
    tenantId: string;
    filter: DeadFilter;
    limit: number;
    cursor?: string | null;
    now: number;
    agingStepMs: number;
  },
): Promise<DeadReplay> {
  if (!Number.isInteger(p.limit) || p.limit < 1 || p.limit > MAX_REPLAY_BATCH)
    throw new ValidationError(`limit must be an integer from 1 to ${MAX_REPLAY_BATCH}`, { field: 'limit' });
  const params = filterParams(p.tenantId, p.filter);
  const now = checkInstant(p.now, 'now');
  const matching = p.filter.jobId === undefined ? D.runDeadMatching : D.runDeadMatchingOfJob;
  const { rows } = await db.query(matching, [...params, ...afterOf(p.cursor), p.limit + 1]);
  const batch = rows.slice(0, p.limit);
  if (batch.length === 0) return { matched: 0, replayed: [], skipped: 0, nextCursor: null };
  const keys = batch.map((r) => new Date(sortKey(p.now, r.priority, p.agingStepMs)));
  const written = await db.query(R.runReplay, [p.tenantId, batch.map((r) => r.run_id), now, keys]);
  if (written.rows.length > 0) await notifyRuns(db);
  const last = batch[batch.length - 1];
  return {
    matched: batch.length,
    replayed: written.rows.map((r) => r.run_id as string),
    skipped: batch.length - written.rows.length,
    nextCursor:
      rows.length > p.limit && last
        ? encodeCursor([(last.scheduled_for as Date).getTime(), last.run_id])
        : null,
  };
}
