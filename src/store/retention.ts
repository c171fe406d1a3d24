/**
 * Retention in the database: a tenant's settings (`tenant_retention`), the maintenance lease one
 * node's pruner holds (`maintenance_leases`), and the pruning batches (the statements are in
 * `queries/retention.ts`).
 */
import {
  checkRetention,
  DEFAULT_RETENTION,
  type Retention,
  type RetentionState,
  shortestRetentionMs,
} from '../core/index.js';
import * as Q from './queries/retention.js';
import type { Queryable } from './rows.js';
import type { PruneBatchResult, PruneCursor } from './types.js';

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
 * One batch of the tenant's pruning: looks at up to `limit` runs scheduled before `horizon`, from
 * `after` on, and deletes those past their retention at `now` (with `dryRun`, counts them).
 */
export async function pruneBatch(
  db: Queryable,
  p: {
    tenantId: string;
    now: number;
    horizon: number;
    after: PruneCursor | null;
    limit: number;
    dryRun: boolean;
  },
): Promise<PruneBatchResult> {
  const r = await db.query(Q.pruneBatch, [
    p.tenantId,
    new Date(p.now),
    new Date(p.horizon),
    p.after?.slot ?? null,
    p.after?.runId ?? null,
    p.limit,
    JSON.stringify(DEFAULT_RETENTION),
    p.dryRun,
  ]);
  const row = r.rows[0] as {
    scanned: number;
    last_slot: Date | null;
    last_run: string | null;
    by_state: Record<string, string | number>;
  };
  const byState: Partial<Record<RetentionState, number>> = {};
  for (const [state, n] of Object.entries(row.by_state)) byState[state as RetentionState] = Number(n);
  const next =
    row.scanned >= p.limit && row.last_slot !== null && row.last_run !== null
      ? { slot: row.last_slot, runId: row.last_run }
      : null;
  return { scanned: row.scanned, next, byState };
}
