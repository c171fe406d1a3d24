/**
 * The `runs` table's writes after a run exists: an ad-hoc trigger, the end of an attempt
 * (complete, fail, release, reap) and the replay of a dead run. Every end of an attempt is fenced
 * by its lease token and a live lease, except the reaper's, which is guarded by the token it read.
 * Whether a failed attempt retries or dead-letters is `decideRetry`'s (core), for the failure and
 * the reap alike; the store only reads what it needs and writes what it decided.
 */
import {
  ConflictError,
  checkPayload,
  checkPayloadAgainst,
  decideRetry,
  LeaseLostError,
  NotFoundError,
  type Random,
  resultText,
  sortKey,
  ValidationError,
} from '../core/index.js';
import {
  checkInstant,
  checkLeases,
  numberArray,
  startedMsOf,
  storedText,
  UUID,
  uuidArray,
} from './checks.js';
import { getJob } from './jobs.js';
import { notifyRuns } from './notify.js';
import { reportsParam } from './progress.js';
import * as R from './queries/runs.js';
import { type Queryable, type Row, toRef, toRun } from './rows.js';
import type { Store } from './store.js';
import type { ReapResult, Run } from './types.js';

/** What deciding a retry needs of the store: its ageing step and its source of jitter. */
interface Retrying {
  agingStepMs: number;
  random: Random;
}

/**
 * An ad-hoc run of a job for `scheduledFor` (default now), with its own `payload` when given (which
 * must match the job's payload schema, if it has one: a `ValidationError` naming the failing path
 * otherwise, nothing written); a slot that has a run is a conflict naming it.
 */
export async function triggerRun(
  db: Queryable,
  p: Parameters<Store['triggerRun']>[0] & { agingStepMs: number; misfireThresholdMs: number },
): Promise<Run> {
  const now = checkInstant(p.now, 'now');
  const slot = checkInstant(p.scheduledFor ?? p.now, 'scheduled_for');
  const given = p.payload === undefined ? undefined : checkPayload(p.payload);
  const job = await getJob(db, p);
  // A job with a payload schema takes only payloads that match it (its own was checked at upsert).
  if (given !== undefined && job.payloadSchema !== null) checkPayloadAgainst(job.payloadSchema, given);
  // The run's own payload as JSON text; null: the job's.
  const payload = given === undefined ? null : JSON.stringify(given);
  const key = new Date(sortKey(slot.getTime(), job.priority, p.agingStepMs));
  const { rows } = await db.query(R.runInsertOne, [p.tenantId, p.jobId, slot, key, now, payload]);
  if (rows[0]) {
    await notifyRuns(db);
    return toRun(rows[0]);
  }
  const existing = await db.query(R.runBySlot, [p.tenantId, p.jobId, slot]);
  const runId = existing.rows[0]?.run_id;
  if (!runId) throw new NotFoundError(`job "${p.jobId}" does not exist`, { job_id: p.jobId });
  throw new ConflictError(`job "${p.jobId}" already has run ${runId} for ${slot.toISOString()}`, {
    run_id: runId,
  });
}

export async function completeRuns(
  db: Queryable,
  p: Parameters<Store['completeRuns']>[0],
): ReturnType<Store['completeRuns']> {
  const { ids, tokens, invalid, valid } = checkLeases(p.leases);
  const now = checkInstant(p.now, 'now');
  // In the order of `ids`: checkLeases keeps the well-formed leases in order.
  const outputs = valid.map((l) => storedText(l.output));
  const starts = valid.map((l) => startedMsOf(l.startedAt));
  const reports = reportsParam(valid);
  // No output at all (most batches): an empty array, which the statement's unnest pads with nulls.
  const anyOutput = outputs.some((o) => o !== null);
  if (ids.length === 0) return { completed: [], lost: invalid };
  // Named (prepared per connection), as the claim: the hot path's statements are planned once.
  const { rows } = await db.query({
    name: 'tock_complete',
    text: R.runCompleteMany,
    values: [
      uuidArray(ids),
      uuidArray(tokens),
      now,
      p.tenantId ?? null,
      anyOutput ? outputs : '{}',
      numberArray(starts),
      reports,
    ],
  });
  // It answers the runs it did not complete (lower case; a caller's ids may be in either): the
  // other given runs it did.
  if (rows.length === 0) return { completed: ids, lost: invalid };
  const missed = new Set(rows.map((r: Row) => r.run_id as string));
  const isMissed = (id: string) => missed.has(id.toLowerCase());
  return { completed: ids.filter((id) => !isMissed(id)), lost: [...invalid, ...ids.filter(isMissed)] };
}

export async function failRun(
  db: Queryable,
  p: Parameters<Store['failRun']>[0] & Retrying,
): ReturnType<Store['failRun']> {
  const now = checkInstant(p.now, 'now');
  const startedAt = startedMsOf(p.startedAt);
  const lost = () => new LeaseLostError(`the lease on run ${p.runId} is not live`, { run_id: p.runId });
  if (!UUID.test(p.runId) || !UUID.test(p.leaseToken)) throw lost();
  const report = reportsParam([p]);
  if (p.retryAfterMs !== undefined && !(p.retryAfterMs >= 0 && Number.isFinite(p.retryAfterMs))) {
    throw new ValidationError('retry_after must be a non-negative number of ms', { field: 'retry_after' });
  }
  const read = await db.query(R.runFailRead, [p.runId, p.leaseToken, now, p.tenantId ?? null]);
  const run = read.rows[0];
  if (!run) throw lost();
  const next = decideRetry({
    attempt: run.attempt,
    maxAttempts: run.max_attempts,
    permanent: p.permanent,
    retryAfterMs: p.retryAfterMs,
    backoff: { baseSeconds: run.backoff_base_seconds, capSeconds: run.backoff_cap_seconds },
    priority: run.priority,
    now: p.now,
    agingStepMs: p.agingStepMs,
    random: p.random,
  });
  const availableAt = next.state === 'pending' ? new Date(next.availableAt) : null;
  const { rows } = await db.query(R.runFail, [
    p.runId,
    p.leaseToken,
    now,
    next.state,
    availableAt,
    next.state === 'pending' ? new Date(next.sortKey) : null,
    resultText(String(p.error)),
    storedText(p.output),
    startedAt,
    storedText(p.errorStack),
    report,
  ]);
  if (!rows[0]) throw lost();
  return { state: next.state, attempt: rows[0].attempt, availableAt };
}

/** Gives runs back without spending an attempt: claimable again at once. */
export async function releaseRuns(
  db: Queryable,
  p: Parameters<Store['releaseRuns']>[0],
): ReturnType<Store['releaseRuns']> {
  const { ids, tokens, valid } = checkLeases(p.leases);
  if (ids.length === 0) return { released: [] };
  const { rows } = await db.query(R.runReleaseMany, [
    ids,
    tokens,
    checkInstant(p.now, 'now'),
    resultText(p.reason),
    p.tenantId ?? null,
    valid.map((l) => startedMsOf(l.startedAt)),
  ]);
  if (rows.length > 0) await notifyRuns(db);
  return { released: rows.map((r: Row) => r.run_id as string) };
}

/** Requeues (or dead-letters) the runs of up to `batchSize` claims whose lease expired before `now`. */
export async function reapExpired(
  db: Queryable,
  p: { now: number; batchSize: number } & Retrying,
): Promise<ReapResult> {
  const now = checkInstant(p.now, 'now');
  const candidates = await db.query(R.runReapCandidates, [now, p.batchSize]);
  if (candidates.rows.length === 0) return { requeued: [], dead: [] };
  const ids: string[] = [];
  const tokens: string[] = [];
  const states: string[] = [];
  const available: (Date | null)[] = [];
  const keys: (Date | null)[] = [];
  for (const c of candidates.rows) {
    const next = decideRetry({
      attempt: c.attempt,
      maxAttempts: c.max_attempts,
      backoff: { baseSeconds: c.backoff_base_seconds, capSeconds: c.backoff_cap_seconds },
      priority: c.priority,
      now: p.now,
      agingStepMs: p.agingStepMs,
      random: p.random,
    });
    ids.push(c.run_id);
    tokens.push(c.lease_token);
    states.push(next.state);
    available.push(next.state === 'pending' ? new Date(next.availableAt) : null);
    keys.push(next.state === 'pending' ? new Date(next.sortKey) : null);
  }
  const { rows } = await db.query(R.runReap, [ids, tokens, states, available, keys, now]);
  const result: ReapResult = { requeued: [], dead: [] };
  for (const r of rows) {
    if (r.state === 'dead') result.dead.push(toRef(r));
    else result.requeued.push({ ...toRef(r), attempt: r.attempt });
  }
  return result;
}

/**
 * Requeues dead run `runId` (`run`: it as read just before) with a fresh budget of attempts. Not
 * dead, or no longer dead when written: a conflict.
 */
export async function replayRun(
  db: Queryable,
  p: { tenantId: string; runId: string; run: Run; now: number; agingStepMs: number },
): Promise<Run> {
  const { run } = p;
  if (run.state !== 'dead') {
    throw new ConflictError(`run ${p.runId} is ${run.state}; only a dead run can be replayed`, {
      state: run.state,
    });
  }
  const key = new Date(sortKey(p.now, run.priority, p.agingStepMs));
  const { rows } = await db.query(R.runReplay, [p.tenantId, [p.runId], checkInstant(p.now, 'now'), [key]]);
  if (!rows[0]) throw new ConflictError(`run ${p.runId} changed state while being replayed`);
  await notifyRuns(db);
  return toRun(rows[0]);
}
