/**
 * Results reported over HTTP, one run's (`POST /v1/runs/{run_id}/complete`) or a batch's
 * (`POST /v1/runs/complete`, or `results` on a claim), written with the statements the in-process
 * worker uses: the successes of a batch in one statement (`completeRuns`), each failure by
 * `failRun` (it decides retry or dead from the run's attempts).
 *
 * Invariants: every write is under the entry's lease token and the caller's tenant, so an entry
 * fails alone: a stale token is `lost` (409), another tenant's run or no run `not_found` (404), a
 * run id twice in one batch `conflict` (409) for each of its entries; nothing is written for an
 * entry that is not `done`, and the other entries are written all the same. A value the database
 * refuses as data fails the request (400) before anything is written only as far as the statement
 * that refused it: the worker splits such a batch and tries again (`Completer`).
 */
import type { Static } from 'typebox';
import { parseInstant, type RunReport, splitErrorText, TockError } from '../core/index.js';
import type * as R from './result-schemas.js';
import type { RouteOptions } from './types.js';

type Entry = Static<typeof R.ResultEntry>;
type Outcome = Static<typeof R.ResultOutcome>;
/** A result as the routes take it: a batch entry, or the single-run body with its path's id. */
export type ResultInput = Omit<Entry, 'run_id'> & { run_id: string };

/** Failures written at once, each its own two statements: a batch of failures uses this many connections. */
const FAIL_CONCURRENCY = 4;

/**
 * The handler start a worker reported (its `started_at`), ms, or null. Only a bound on what the
 * store records: it keeps the start within [the later of the claim and the run's available_at,
 * now], so a worker's clock cannot move an attempt outside its lease or before its slot.
 */
export const startOf = (startedAt: string | undefined): number | null =>
  startedAt === undefined ? null : parseInstant(startedAt, 'started_at');

const lostOutcome = (runId: string): Outcome => ({
  run_id: runId,
  outcome: 'lost',
  status: 409,
  error: { code: 'lease_lost', message: `the lease on run ${runId} is not live` },
});

const notFoundOutcome = (runId: string): Outcome => ({
  run_id: runId,
  outcome: 'not_found',
  status: 404,
  error: { code: 'not_found', message: `run ${runId} does not exist` },
});

/** A report as the API bodies carry it (`REPORT_PROPERTIES`): on a heartbeat's lease or a result. */
export interface ReportBody {
  progress?: { value: number; message?: string | null };
  logs?: string[];
  logs_dropped?: number;
}

/** What the handler reported since the last heartbeat, as the store takes it. */
export function reportOf(e: ReportBody): RunReport {
  return {
    progress: e.progress && { value: e.progress.value, message: e.progress.message ?? null },
    logs: e.logs,
    logsDropped: e.logs_dropped,
  };
}

/** Run ids compare as uuids do: case does not matter. */
const key = (runId: string) => runId.toLowerCase();

/**
 * Writes `entries` for `tenantId`; one outcome per entry, in their order. Throws only what is not
 * about one entry: the database unreachable, or a value it refuses as data.
 */
export async function writeResults(
  o: RouteOptions,
  tenantId: string,
  entries: readonly ResultInput[],
): Promise<Outcome[]> {
  const outcomes: (Outcome | undefined)[] = new Array(entries.length);
  const seen = new Map<string, number>();
  for (const e of entries) seen.set(key(e.run_id), (seen.get(key(e.run_id)) ?? 0) + 1);
  const successes: number[] = [];
  const failures: number[] = [];
  entries.forEach((e, i) => {
    if ((seen.get(key(e.run_id)) ?? 0) > 1) {
      outcomes[i] = {
        run_id: e.run_id,
        outcome: 'conflict',
        status: 409,
        error: { code: 'duplicate_run', message: `run ${e.run_id} is in the batch more than once` },
      };
    } else (e.status === 'failed' ? failures : successes).push(i);
  });
  await completeAll(o, tenantId, entries, successes, outcomes);
  // Failures are written one by one: only those whose lease one read finds live (a batch of stale
  // or forged entries costs that read, not a write each).
  const live = failures.length
    ? await o.store.liveRunIds({
        tenantId,
        leases: failures.map((i) => ({ runId: entries[i]!.run_id, leaseToken: entries[i]!.lease_token })),
        now: o.clock.nowMs(),
      })
    : new Set<string>();
  const writable: number[] = [];
  for (const i of failures) {
    if (live.has(key(entries[i]!.run_id))) writable.push(i);
    else outcomes[i] = lostOutcome(entries[i]!.run_id);
  }
  for (let at = 0; at < writable.length; at += FAIL_CONCURRENCY) {
    // Settled, not raced: no write is still in flight when an error answers the request.
    const settled = await Promise.allSettled(
      writable.slice(at, at + FAIL_CONCURRENCY).map(async (i) => {
        outcomes[i] = await failOne(o, tenantId, entries[i]!);
      }),
    );
    const refused = settled.find((s) => s.status === 'rejected');
    if (refused) throw refused.reason;
  }
  // Lost or not the tenant's: one read tells which, for all of them.
  const missing = outcomes.flatMap((x, i) => (x?.outcome === 'lost' ? [i] : []));
  if (missing.length > 0) {
    const own = await o.store.tenantRunIds({ tenantId, runIds: missing.map((i) => entries[i]!.run_id) });
    for (const i of missing)
      if (!own.has(key(entries[i]!.run_id))) outcomes[i] = notFoundOutcome(entries[i]!.run_id);
  }
  return outcomes as Outcome[];
}

/** The successes at `indexes`, in one statement. */
async function completeAll(
  { store, clock }: RouteOptions,
  tenantId: string,
  entries: readonly ResultInput[],
  indexes: readonly number[],
  outcomes: (Outcome | undefined)[],
): Promise<void> {
  if (indexes.length === 0) return;
  const at = clock.nowMs();
  const { completed } = await store.completeRuns({
    leases: indexes.map((i) => {
      const e = entries[i]!;
      return {
        runId: e.run_id,
        leaseToken: e.lease_token,
        output: e.output,
        startedAt: startOf(e.started_at),
        ...reportOf(e),
      };
    }),
    now: at,
    tenantId,
  });
  const done = new Set(completed.map(key));
  for (const i of indexes) {
    const runId = entries[i]!.run_id;
    outcomes[i] = done.has(key(runId))
      ? { run_id: runId, outcome: 'done', status: 200, state: 'succeeded' }
      : lostOutcome(runId);
  }
}

/** One failed attempt: retried or dead-lettered by the store, counted in the metrics. */
async function failOne(
  { store, clock, metrics }: RouteOptions,
  tenantId: string,
  e: ResultInput,
): Promise<Outcome> {
  // A worker from before `error_stack` sends the whole stack as the error: split it here.
  const error =
    e.error_stack === undefined
      ? splitErrorText(e.error ?? 'failed')
      : { message: e.error ?? 'failed', stack: e.error_stack };
  try {
    const result = await store.failRun({
      runId: e.run_id,
      leaseToken: e.lease_token,
      error: error.message,
      errorStack: error.stack,
      startedAt: startOf(e.started_at),
      permanent: e.retryable === false,
      retryAfterMs: e.retry_after_ms,
      output: e.output,
      now: clock.nowMs(),
      tenantId,
      ...reportOf(e),
    });
    (result.state === 'dead' ? metrics.deadLetters : metrics.retries).inc();
    return {
      run_id: e.run_id,
      outcome: 'done',
      status: 200,
      state: result.state,
      attempt: result.attempt,
      available_at: result.availableAt ? result.availableAt.toISOString() : null,
    };
  } catch (err) {
    if (err instanceof TockError && err.code === 'lease_lost') return lostOutcome(e.run_id);
    throw err;
  }
}
