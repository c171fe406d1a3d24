/**
 * The `idempotency_keys` table: the answers of requests sent with an Idempotency-Key. A request
 * takes its key (status 0, in progress), then records its answer; a request that failed
 * unexpectedly frees it for a retry. Entries live `ttlMs`; an expired one is replaced when taken,
 * and the pruner deletes them in bounded batches.
 */
import * as A from './queries/api.js';
import type { Queryable } from './rows.js';
import type { Store } from './store.js';

/** How often a take retries when the entry it found went away in between (released or expired). */
const TAKE_TRIES = 3;

export async function takeIdempotent(
  db: Queryable,
  p: Parameters<Store['takeIdempotent']>[0],
): ReturnType<Store['takeIdempotent']> {
  const notBefore = new Date(p.now - p.ttlMs);
  for (let i = 0; i < TAKE_TRIES; i++) {
    const taken = await db.query(A.idempotencyClaim, [
      p.tenantId,
      p.scope,
      p.key,
      p.requestHash,
      new Date(p.now),
      notBefore,
    ]);
    if (taken.rows.length === 1) return { state: 'taken' };
    const { rows } = await db.query(A.idempotencyGet, [p.tenantId, p.scope, p.key, notBefore]);
    const r = rows[0];
    if (!r) continue; // released or expired in between: try to take it again
    if (r.status === 0) return { state: 'in_progress', requestHash: r.request_hash };
    return { state: 'done', answer: { requestHash: r.request_hash, status: r.status, body: r.body } };
  }
  return { state: 'in_progress', requestHash: p.requestHash };
}

export async function finishIdempotent(
  db: Queryable,
  p: Parameters<Store['finishIdempotent']>[0],
): Promise<void> {
  await db.query(A.idempotencyFinish, [
    p.tenantId,
    p.scope,
    p.key,
    p.answer.requestHash,
    p.answer.status,
    JSON.stringify(p.answer.body),
  ]);
}

export async function releaseIdempotent(
  db: Queryable,
  p: { tenantId: string; scope: string; key: string },
): Promise<void> {
  await db.query(A.idempotencyRelease, [p.tenantId, p.scope, p.key]);
}

/** Deletes up to `batchSize` answers older than `ttlMs`; returns how many. */
export async function pruneIdempotency(
  db: Queryable,
  p: { now: number; ttlMs: number; batchSize: number },
): Promise<number> {
  const r = await db.query(A.idempotencyPrune, [new Date(p.now - p.ttlMs), p.batchSize]);
  return r.rowCount ?? 0;
}
