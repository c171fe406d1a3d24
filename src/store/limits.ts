/**
 * The `limits` table as an operator defines it: create or replace, read, list and delete a named
 * limit or the tenant's own (`tenant:<id>`), and the sample of every limit the gauges show. Keys
 * are checked by core's `validateLimitKey` (never `job:…`: a job's own gate is written with its
 * job), definitions by `validateLimit`, before anything is written. Every statement is the
 * tenant's; tokens are answered as the room at `now` (`roomAt`: refilled, within the window), as the
 * next claim would see them.
 */
import {
  ConflictError,
  type Limit,
  type LimitInput,
  NotFoundError,
  type Pacing,
  roomAt,
  ValidationError,
  validateId,
  validateLimit,
  validateLimitKey,
} from '../core/index.js';
import { checkInstant, checkLimit } from './checks.js';
import { decodeCursor, encodeCursor, notIssued } from './cursor.js';
import { notifyRuns } from './notify.js';
import * as L from './queries/limits.js';
import type { Queryable, Row } from './rows.js';
import type { LimitGauge, Page } from './types.js';

/** A `limits` row's pacing (bucket and recent starts, as stored), for core's `roomAt`; null without a rate. */
export function pacingOf(r: Row): Pacing | null {
  if (r.rate === null || r.burst === null) return null;
  const at: (string | number)[] = r.recent_at ?? [];
  return {
    rate: r.rate,
    burst: r.burst,
    tokens: r.tokens,
    refilledAtMs: (r.refilled_at as Date).getTime(),
    at: at.map(Number),
    n: r.recent_n ?? [],
    credited: Number(r.credited_tokens ?? 0),
  };
}

/**
 * A `limits` row as answered at `now`: for a limit with a rate, `tokens` is its room (`roomAt`):
 * the bucket refilled to now, no more than its one-second window has left, as the next claim sees it.
 */
function limitOf(r: Row, now: number): Limit {
  const pacing = pacingOf(r);
  return {
    tenantId: r.tenant_id,
    key: r.key,
    rate: r.rate,
    burst: r.burst,
    maxConcurrency: r.max_concurrency,
    tokens: pacing === null ? null : roomAt(pacing, now),
    inUse: r.in_use,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

export async function putLimit(
  db: Queryable,
  p: { tenantId: string; key: string; limit: LimitInput; now: number },
): Promise<{ limit: Limit; created: boolean }> {
  const tenantId = validateId(p.tenantId, 'tenant_id');
  const key = validateLimitKey(p.key, tenantId);
  const spec = validateLimit(p.limit);
  const at = checkInstant(p.now, 'now');
  const { rows } = await db.query(L.limitPut, [
    tenantId,
    key,
    spec.rate,
    spec.burst,
    spec.maxConcurrency,
    at,
  ]);
  // validateLimitKey refuses a job's own key; the statement refuses it again (no row).
  if (!rows[0]) throw new ValidationError(`key "${key}" is a job's own`, { field: 'key' });
  // A limit raised (or a new one full of tokens) may let held runs go: wake idle claimers.
  await notifyRuns(db);
  return { limit: limitOf(rows[0], p.now), created: rows[0].created === true };
}

/** A row of `withHeldRuns` (queries/limits.ts): the limit at `now` and the runs it holds back. */
const heldOf = (r: Row, now: number): LimitGauge => ({
  ...limitOf(r, now),
  heldRuns: r.held_runs,
  heldCapped: r.held_capped,
});

/** One limit of the tenant at `now`, with the runs it holds back. */
export async function getLimit(
  db: Queryable,
  p: { tenantId: string; key: string; now: number },
): Promise<LimitGauge> {
  const key = validateLimitKey(p.key, p.tenantId);
  const at = checkInstant(p.now, 'now');
  const { rows } = await db.query(L.limitGet, [p.tenantId, key, at]);
  if (!rows[0]) throw new NotFoundError(`limit "${key}" does not exist`, { key });
  return heldOf(rows[0], p.now);
}

/**
 * The tenant's limits by key, one page, each with the runs it holds back; jobs' own gates are not
 * listed (they show on the job).
 */
export async function listLimits(
  db: Queryable,
  p: { tenantId: string; limit: number; cursor?: string | null; now: number },
): Promise<Page<LimitGauge>> {
  const limit = checkLimit(p.limit);
  const at = checkInstant(p.now, 'now');
  let after: string | null = null;
  if (p.cursor) {
    const [key] = decodeCursor(p.cursor);
    if (typeof key !== 'string') throw notIssued();
    after = key;
  }
  const { rows } = await db.query(L.limitList, [p.tenantId, after, limit + 1, at]);
  const items = rows.slice(0, limit).map((r) => heldOf(r, p.now));
  const last = items[items.length - 1];
  return { items, nextCursor: rows.length > limit && last ? encodeCursor([last.key]) : null };
}

/**
 * Deletes a limit: `NotFoundError` when the tenant has none by that key, `ConflictError` naming a
 * job of the tenant that lists it (nothing is deleted). The tenant's own key can always go.
 */
export async function deleteLimit(db: Queryable, p: { tenantId: string; key: string }): Promise<void> {
  const key = validateLimitKey(p.key, p.tenantId);
  const { rows } = await db.query(L.limitDelete, [p.tenantId, key]);
  const r = rows[0];
  if (!r?.existed) throw new NotFoundError(`limit "${key}" does not exist`, { key });
  if (!r.deleted) {
    throw new ConflictError(`limit "${key}" is listed by job "${r.job_id}": remove it from the job first`, {
      key,
      job_id: r.job_id,
    });
  }
}

/**
 * Every limit (all tenants, jobs' own gates too) at `now`, by gate, at most `limit`, and how many
 * there are in all: the gauges' sample.
 */
export async function limitGauges(
  db: Queryable,
  p: { now: number; limit: number },
): Promise<{ limits: LimitGauge[]; total: number }> {
  checkLimit(p.limit, 100_000);
  const { rows } = await db.query(L.limitGauges, [checkInstant(p.now, 'now'), p.limit]);
  return {
    limits: rows.map((r) => heldOf(r, p.now)),
    total: rows[0]?.total ?? 0,
  };
}
