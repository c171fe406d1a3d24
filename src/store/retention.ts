/**
 * Retention in the database: a tenant's settings (`tenant_retention`), the maintenance lease one
 * node's pruner holds (`maintenance_leases`), and the pruning batches (the statements are in
 * `queries/retention.ts`).
 */
import type pg from 'pg';
import {
  checkRetention,
  DEFAULT_RETENTION,
  type Retention,
  type RetentionState,
  shortestRetentionMs,
} from '../core/index.js';
import type { RunArchive } from './archive.js';
import { decodeCursor, encodeCursor, notIssued } from './cursor.js';
import { inTransaction } from './db.js';
import * as Q from './queries/retention.js';
import type { Queryable, Row } from './rows.js';
import type { PruneBatchResult, PruneCursor, PruneTenantResult } from './types.js';

/** A tenant's own settings (null: none) and the shortest retention in force for any of its runs. */
export async function retentionOfTenant(
  db: Queryable,
  tenantId: string,
): Promise<{ retention: Retention | null; shortestMs: number | null }> {
  const r = await db.query(Q.retentionOfTenant, [tenantId]);
  const row = r.rows[0] as { retention: Retention | null; jobs_shortest_ms: number | null };
  return { retention: row.retention, shortestMs: shortestRetentionMs(row.retention, row.jobs_shortest_ms) };
}

/** Replaces the tenant's settings with `retention` (checked here too: PostgreSQL reads its values). */
export async function putTenantRetention(
  db: Queryable,
  p: { tenantId: string; retention: Retention; now: number },
): Promise<Retention> {
  const retention = checkRetention(p.retention);
  await db.query(Q.putTenantRetention, [p.tenantId, JSON.stringify(retention), new Date(p.now)]);
  return retention;
}

/** The tenants that have runs, in order, after `after` (null: from the first), at most `limit`. */
export async function tenantsWithRuns(
  db: Queryable,
  p: { after: string | null; limit: number },
): Promise<string[]> {
  const r = await db.query(Q.tenantsWithRuns, [p.after, p.limit]);
  return r.rows.map((row: { tenant_id: string }) => row.tenant_id);
}

/** Takes or renews the named lease for `owner`; whether it holds it now. */
export async function takeMaintenanceLease(
  db: Queryable,
  p: { name: string; owner: string; now: number; leaseMs: number },
): Promise<boolean> {
  const r = await db.query(Q.takeMaintenanceLease, [p.name, p.owner, new Date(p.now), p.leaseMs]);
  return (r.rowCount ?? 0) > 0;
}

export async function releaseMaintenanceLease(
  db: Queryable,
  p: { name: string; owner: string },
): Promise<void> {
  await db.query(Q.releaseMaintenanceLease, [p.name, p.owner]);
}

/**
 * The most runs a batch that writes to an archive looks at: its runs travel as one value, and a
 * run may carry 64 KiB of output and, per failed attempt, 64 KiB each of error and stack, so
 * this bounds what one batch holds in memory (and keeps it far under PostgreSQL's 1 GB per value).
 */
export const MAX_ARCHIVED_BATCH_RUNS = 250;

/**
 * One batch of the tenant's pruning: looks at up to `limit` runs scheduled before `horizon`, from
 * `after` on, and deletes those past their retention at `now` (with `dryRun`, counts them). With an
 * `archive`, at most MAX_ARCHIVED_BATCH_RUNS runs, and the delete and the archive's write are one
 * transaction: the runs are written to the archive, and deleted only once it has them (a write
 * that fails deletes nothing).
 */
export async function pruneBatch(
  pool: pg.Pool,
  p: {
    tenantId: string;
    now: number;
    horizon: number;
    after: PruneCursor | null;
    limit: number;
    dryRun: boolean;
    /** A kept run that expires within this many ms is reported (\`soon\`). Default 0: none. */
    soonMs?: number;
  },
  archive?: RunArchive,
): Promise<PruneBatchResult> {
  const archiving = archive !== undefined && !p.dryRun;
  const limit = archiving ? Math.min(p.limit, MAX_ARCHIVED_BATCH_RUNS) : p.limit;
  const params = [
    p.tenantId,
    new Date(p.now),
    new Date(p.horizon),
    p.after?.slot ?? null,
    p.after?.runId ?? null,
    limit,
    JSON.stringify(DEFAULT_RETENTION),
    p.dryRun,
    p.soonMs ?? 0,
  ];
  const r = !archiving
    ? await pool.query(Q.pruneBatch, params)
    : await inTransaction(pool, async (client) => {
        const batch = await client.query(Q.pruneBatchArchived, params);
        const days = (batch.rows[0] as Row).archive as Record<string, string> | null;
        if (days !== null) await archive.write(days);
        return batch;
      });
  const row = r.rows[0] as {
    scanned: number;
    last_slot: Date | null;
    last_run: string | null;
    soon: boolean;
    settled_slot: Date | null;
    settled_run: string | null;
    by_state: Record<string, string | number>;
  };
  const byState: Partial<Record<RetentionState, number>> = {};
  for (const [state, n] of Object.entries(row.by_state)) byState[state as RetentionState] = Number(n);
  const last =
    row.last_slot !== null && row.last_run !== null ? { slot: row.last_slot, runId: row.last_run } : null;
  const settled =
    row.settled_slot !== null && row.settled_run !== null
      ? { slot: row.settled_slot, runId: row.settled_run }
      : null;
  return {
    scanned: row.scanned,
    next: row.scanned >= limit ? last : null,
    last,
    soon: row.soon,
    settled,
    byState,
  };
}

/**
 * Up to `batches` batches of the tenant's pruning, as the pruner runs them, from `cursor` (null:
 * from the oldest run, with the horizon of `now`). The cursor carries the horizon, so one pruning
 * that takes several calls looks at the same runs; a forged one is a `ValidationError`.
 */
export async function pruneTenant(
  pool: pg.Pool,
  p: {
    tenantId: string;
    now: number;
    cursor: string | null;
    dryRun: boolean;
    batches: number;
    limit: number;
  },
  archive?: RunArchive,
): Promise<PruneTenantResult> {
  const byState: Record<RetentionState, number> = { succeeded: 0, dead: 0, cancelled: 0, skipped: 0 };
  let horizon: number;
  let after: PruneCursor | null = null;
  if (p.cursor !== null) ({ horizon, after } = readPruneCursor(p.cursor));
  else {
    const shortest = (await retentionOfTenant(pool, p.tenantId)).shortestMs;
    if (shortest === null) return { byState, scanned: 0, horizon: null, cursor: null };
    horizon = p.now - shortest;
  }
  let scanned = 0;
  for (let i = 0; i < p.batches; i++) {
    const r = await pruneBatch(
      pool,
      { tenantId: p.tenantId, now: p.now, horizon, after, limit: p.limit, dryRun: p.dryRun },
      archive,
    );
    scanned += r.scanned;
    for (const [state, n] of Object.entries(r.byState)) byState[state as RetentionState] += n ?? 0;
    after = r.next;
    if (after === null) break;
  }
  const cursor = after === null ? null : encodeCursor([horizon, after.slot.getTime(), after.runId]);
  return { byState, scanned, horizon: new Date(horizon), cursor };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function readPruneCursor(cursor: string): { horizon: number; after: PruneCursor } {
  const parts = decodeCursor(cursor);
  const [horizon, slot, runId] = parts;
  const instant = (v: unknown): v is number => Number.isSafeInteger(v) && Math.abs(v as number) < 8.64e15;
  if (
    parts.length !== 3 ||
    !instant(horizon) ||
    !instant(slot) ||
    typeof runId !== 'string' ||
    !UUID.test(runId)
  )
    throw notIssued();
  return { horizon, after: { slot: new Date(slot), runId } };
}
