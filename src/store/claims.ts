/**
 * Claims, and retry-safe claims (migration 0009). A claim takes claimable runs off the queue under
 * one lease token per lease length and part of up to 100 runs (`CLAIM_PART_RUNS`). A worker may send a claim id with it, a uuid it makes per claim
 * and sends again when it retries that claim, to this server or another: a claim id that already
 * names a live claim of the same worker and tenant answers that claim (same runs, same tokens)
 * instead of claiming more, so a claim whose answer was lost is not stranded under a lease nobody
 * renews. Invariant: one claim id holds at most one claim row per tenant, worker, lease length and part
 * (a unique index, migration 0010: the scope `claimAgain` looks in), so two servers racing on one
 * id cannot both take runs, the loser answers the winner's claim, and an id another tenant or worker
 * used is no obstacle.
 * A claim's lease is kept alive by heartbeats (`heartbeatRuns`), each renewing every live lease it
 * names in one statement. `PostgresStore` delegates its claims and heartbeats here.
 */
import { grainOf, MAX_CLAIM_RUNS, ValidationError, validateId } from '../core/index.js';
import { checkInstant, checkLeases, UUID, uuidArray } from './checks.js';
import { notifyRuns } from './notify.js';
import { reportsParam } from './progress.js';
import * as C from './queries/claims.js';
import { CREDIT_GRAINS } from './queries/gates.js';
import * as R from './queries/runs.js';
import type { Queryable, Row } from './rows.js';
import type { Store } from './store.js';
import type { ClaimedRun } from './types.js';

/** The furthest ahead of its `available_at` a run can be claimed (`claimRuns`' `aheadMs`), ms. */
export const MAX_CLAIM_AHEAD_MS = 10_000;

/** The most tenants one claim may be restricted to (`claimRuns`' `tenants`). */
export const MAX_CLAIM_TENANTS = 1000;

/** A claim's tenant filter as a statement parameter: null (every tenant) or the checked ids. */
export function tenantFilter(tenants: readonly string[] | undefined): string[] | null {
  if (tenants === undefined) return null;
  if (!Array.isArray(tenants) || tenants.length < 1 || tenants.length > MAX_CLAIM_TENANTS) {
    throw new ValidationError(`tenants must be a list of 1 to ${MAX_CLAIM_TENANTS} tenant ids`, {
      field: 'tenants',
    });
  }
  return tenants.map((t) => validateId(t, 'tenant_id'));
}

/** The unique index that makes a claim id name one claim (per tenant, worker and lease length). */
const CLAIM_ID_INDEX = 'run_claims_claim_id';

/** What a claim is given: the `Store` interface's parameters of `claimRuns`. */
export type ClaimParams = Parameters<Store['claimRuns']>[0];

/**
 * A claimed run from a claim statement's row, read as an array (`rowMode: 'array'`): the columns
 * of `CLAIMED_COLUMNS`, in its order. A claim answers up to 1,000 rows, read while the worker waits
 * for them; an array per row spares the driver an object with 14 keys for each.
 */
function toClaimed(r: unknown[]): ClaimedRun {
  const timeout = r[12] as number | null;
  return {
    runId: r[0] as string,
    tenantId: r[1] as string,
    jobId: r[2] as string,
    handler: r[3] as string,
    payload: r[4],
    pool: r[5] as string,
    scheduledFor: new Date(r[6] as number),
    attempt: r[7] as number,
    maxAttempts: r[8] as number,
    leaseToken: r[9] as string,
    leaseExpiresAt: new Date(r[10] as number),
    availableAt: new Date(r[11] as number),
    timeoutMs: timeout === null ? null : timeout * 1000,
    createdAt: new Date(r[13] as number),
  };
}

/** The gated claim's column after `CLAIMED_COLUMNS`: whether it set credits aside. */
const CREDITED = 14;

function checkClaim(p: ClaimParams): number {
  validateId(p.workerId, 'worker_id');
  tenantFilter(p.tenants);
  validateId(p.pool, 'pool');
  if (!Number.isInteger(p.max) || p.max < 1 || p.max > MAX_CLAIM_RUNS) {
    throw new ValidationError(`claim max must be an integer from 1 to ${MAX_CLAIM_RUNS}`, { field: 'max' });
  }
  const aheadMs = p.aheadMs ?? 0;
  if (!Number.isInteger(aheadMs) || aheadMs < 0 || aheadMs > MAX_CLAIM_AHEAD_MS) {
    throw new ValidationError(`claim ahead must be an integer from 0 to ${MAX_CLAIM_AHEAD_MS} ms`, {
      field: 'ahead_ms',
    });
  }
  if (p.claimId !== undefined && !UUID.test(p.claimId)) {
    throw new ValidationError('claim_id must be a uuid', { field: 'claim_id' });
  }
  return aheadMs;
}

/** The live claim a claim id names (marked retried), as a retry's answer; empty when there is none. */
async function claimAgain(db: Queryable, p: ClaimParams & { claimId: string }): Promise<ClaimedRun[]> {
  const { rows } = await db.query({
    text: C.claimAgain,
    values: [p.claimId, checkInstant(p.now, 'now'), p.workerId, p.tenantId ?? null],
    rowMode: 'array',
  });
  return rows.map(toClaimed);
}

/**
 * Which claim statement a store makes first: the gated one (`gated`) once a claim found that
 * limits exist, the plain one once a gated claim found none. Either statement is right whatever
 * the limits; this only saves the round trip of a plain claim that would answer "limits exist".
 */
export interface ClaimMode {
  gated: boolean;
  /**
   * The 50 ms sub-windows the last gated claim set credits aside for (migration 0017; first and
   * last, as `grainOf` numbers), or null: a claim in them tries the claim paid by credits first.
   */
  credits: { from: number; until: number } | null;
}

/** The row a claim statement adds to say "use the other statement" (its run_id is null). */
const isMarker = (r: unknown[]) => r[0] === null;

/**
 * Leases up to `max` claimable runs; with a claim id that names a live claim of this worker and
 * tenant, answers that claim instead. The lookup runs only when a claim id is given and may have
 * been sent before (not `firstTry`). `leaseMs`: the
 * lease of runs whose job sets none; `mode`: the store's, which statement to try first.
 */
export async function claimRuns(
  db: Queryable,
  p: ClaimParams & { leaseMs: number; mode: ClaimMode },
): Promise<ClaimedRun[]> {
  const aheadMs = checkClaim(p);
  const claimId = p.claimId;
  if (claimId !== undefined && p.firstTry !== true) {
    const again = await claimAgain(db, { ...p, claimId });
    if (again.length > 0) return again;
  }
  const params = [
    p.pool,
    checkInstant(p.now, 'now'),
    p.max,
    p.workerId,
    p.leaseMs,
    p.handlers ? [...p.handlers] : null,
    p.tenantId ?? null,
    aheadMs,
    claimId ?? null,
    tenantFilter(p.tenants),
  ];
  // Named, so each connection plans them once (prepared statements): planning these long
  // statements costs more than running them for a small batch.
  const plain = () => db.query({ name: 'tock_claim', text: C.runClaim, values: params, rowMode: 'array' });
  const credited = () =>
    db.query({ name: 'tock_claim_credited', text: C.runClaimCredited, values: params, rowMode: 'array' });
  // Takes the runs whether or not limits exist; says when none does (a row without a run), and
  // whether it set credits aside (`credited`, on every row).
  const gated = async () => {
    const { rows } = await db.query({
      name: 'tock_claim_gated',
      text: C.runClaimGated,
      values: params,
      rowMode: 'array',
    });
    if (rows.some(isMarker)) p.mode.gated = false;
    else if (rows.length > 0) {
      const from = grainOf(p.now);
      p.mode.credits = rows[0]![CREDITED] === true ? { from, until: from + CREDIT_GRAINS - 1 } : null;
    }
    return rows.filter((r) => !isMarker(r)).map(toClaimed);
  };
  try {
    if (p.mode.gated) {
      const grain = grainOf(p.now);
      if (p.mode.credits !== null && p.mode.credits.from <= grain && grain <= p.mode.credits.until) {
        // Where a limit its candidates pass has no credit left, this takes nothing and says so.
        const { rows } = await credited();
        if (!rows.some(isMarker)) return rows.map(toClaimed);
        p.mode.credits = null;
      }
      return await gated();
    }
    // Where a limit exists this takes nothing and says so (one row without a run).
    const { rows } = await plain();
    if (rows.length !== 1 || !isMarker(rows[0]!)) return rows.map(toClaimed);
    p.mode.gated = true;
    return await gated();
  } catch (err) {
    // Another server made this claim (same id, tenant and worker: the index's key is the lookup's
    // scope) since the lookup, the same claim sent twice at once: answer it. It may have expired
    // in between, then the answer is nothing.
    const e = err as { code?: string; constraint?: string };
    if (claimId === undefined || e.code !== '23505' || e.constraint !== CLAIM_ID_INDEX) throw err;
    return claimAgain(db, { ...p, claimId });
  }
}

/**
 * Gives back the runs a claim id's live claims hold (no attempt spent), unless a retry was
 * answered with them: for a server whose client went away before it could answer the claim.
 */
export async function releaseClaim(
  db: Queryable,
  p: Parameters<Store['releaseClaim']>[0],
): Promise<{ released: string[] }> {
  if (!UUID.test(p.claimId)) return { released: [] };
  const { rows } = await db.query(C.claimRelease, [
    p.claimId,
    p.workerId,
    checkInstant(p.now, 'now'),
    p.reason.slice(0, 1000),
    p.tenantId ?? null,
  ]);
  if (rows.length > 0) await notifyRuns(db);
  return { released: rows.map((r: { run_id: string }) => r.run_id) };
}

/**
 * Renews every live lease of `leases` in one statement, writing what their handlers reported; the
 * rest (malformed ones too) are lost, and their reports are not written.
 */
export async function heartbeatRuns(
  db: Queryable,
  p: Parameters<Store['heartbeatRuns']>[0],
): ReturnType<Store['heartbeatRuns']> {
  const { ids, tokens, invalid, valid } = checkLeases(p.leases);
  const now = checkInstant(p.now, 'now');
  // What the handlers reported (null: nothing), written in the same statement for the live leases.
  const reports = reportsParam(valid);
  const { rows } = ids.length
    ? await db.query({
        name: 'tock_heartbeat',
        text: R.runHeartbeatMany,
        values: [uuidArray(ids), uuidArray(tokens), now, p.tenantId ?? null, reports],
      })
    : { rows: [] };
  const renewed = rows.map((r: Row) => ({
    runId: r.run_id as string,
    leaseExpiresAt: new Date(r.lease_expires_at as number),
  }));
  const ok = new Set(renewed.map((r) => r.runId));
  return { renewed, lost: [...invalid, ...ids.filter((id) => !ok.has(id))] };
}
