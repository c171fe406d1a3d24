/**
 * The runs routes an operator uses: list by state, read one with its attempts, replay a dead run
 * (or the dead runs a filter picks, counted first), cancel a pending or running one.
 */
import { parseInstant, ValidationError } from '../../core/index.js';
import { runJson, runWithAttemptsJson } from '../present.js';
import * as P from '../replay-schemas.js';
import * as S from '../schemas.js';
import type { RouteApp, RouteOptions, RoutePlugin } from '../types.js';
import { errors, limitOf } from './shared.js';

export const runRoutes: RoutePlugin = async (app, { store, clock }) => {
  listRoute(app, { store, clock });
  app.get(
    '/v1/runs/:run_id',
    {
      config: { permission: 'read' },
      schema: {
        summary: 'A run with its attempts',
        tags: ['runs'],
        params: S.RunParams,
        response: { 200: S.RunWithAttempts, ...errors },
      },
    },
    async (request) => {
      const scope = { tenantId: request.principal.tenantId, runId: request.params.run_id };
      const run = await store.getRun(scope);
      const waiting =
        run.state === 'pending' ? await store.waitingFor({ ...scope, now: clock.nowMs() }) : null;
      return runWithAttemptsJson(run, waiting);
    },
  );

  app.post(
    '/v1/runs/:run_id/replay',
    {
      config: { permission: 'operate' },
      schema: {
        summary: 'Requeue a dead run; 409 for any other state',
        tags: ['runs'],
        params: S.RunParams,
        response: { 200: S.Run, ...errors },
      },
    },
    async (request) =>
      runJson(
        await store.replayRun({
          tenantId: request.principal.tenantId,
          runId: request.params.run_id,
          now: clock.nowMs(),
        }),
      ),
  );

  replayDeadRoute(app, { store, clock });
  cancelRoute(app, { store, clock });
};

/** Replaying the dead runs a filter picks: a count first (`dry_run`), then bounded batches. */
function replayDeadRoute(app: RouteApp, { store, clock }: Pick<RouteOptions, 'store' | 'clock'>): void {
  app.post(
    '/v1/runs/replay',
    {
      config: { permission: 'operate' },
      schema: {
        summary:
          'Replay the dead runs a filter picks (job, error text, slot range), up to 500 a call with a cursor; dry_run counts them',
        tags: ['runs'],
        body: P.ReplayDeadBody,
        response: { 200: P.ReplayDeadAnswer, ...errors },
      },
    },
    async (request) => {
      const b = request.body;
      const instant = (v: string | undefined, field: string) =>
        v === undefined ? undefined : parseInstant(v, field);
      const tenantId = request.principal.tenantId;
      const filter = {
        jobId: b.job_id,
        errorContains: b.error_contains,
        slotFrom: instant(b.slot_from, 'slot_from'),
        slotTo: instant(b.slot_to, 'slot_to'),
      };
      if (b.dry_run) {
        if (b.cursor !== undefined || b.limit !== undefined)
          throw new ValidationError('a dry run counts every match: it takes no cursor or limit', {
            field: b.cursor !== undefined ? 'cursor' : 'limit',
          });
        const { count, atLeast } = await store.countDeadRuns({ tenantId, filter });
        const none = { replayed: 0, skipped: 0, replayed_run_ids: [], next_cursor: null };
        return { dry_run: true, matching: count, more_matching: atLeast, ...none };
      }
      const done = await store.replayDeadRuns({
        tenantId,
        filter,
        limit: b.limit ?? 500,
        cursor: b.cursor ?? null,
        now: clock.nowMs(),
      });
      return {
        dry_run: false,
        matching: done.matched,
        more_matching: false,
        replayed: done.replayed.length,
        skipped: done.skipped,
        replayed_run_ids: done.replayed,
        next_cursor: done.nextCursor,
      };
    },
  );
}

/** Cancelling a run: off the queue, or off its claim (its lease revoked). */
function cancelRoute(app: RouteApp, { store, clock }: Pick<RouteOptions, 'store' | 'clock'>): void {
  app.post(
    '/v1/runs/:run_id/cancel',
    {
      config: { permission: 'operate' },
      schema: {
        summary: "Cancel a pending or running run (revokes a running one's lease); 409 for a finished run",
        tags: ['runs'],
        params: S.RunParams,
        response: { 200: S.RunWithAttempts, ...errors },
      },
    },
    async (request) =>
      runWithAttemptsJson(
        await store.cancelRun({
          tenantId: request.principal.tenantId,
          runId: request.params.run_id,
          now: clock.nowMs(),
        }),
      ),
  );
}

/** `GET /v1/runs`: a page of the tenant's runs; pending ones with what holds each. */
function listRoute(app: RouteApp, { store, clock }: Pick<RouteOptions, 'store' | 'clock'>): void {
  app.get(
    '/v1/runs',
    {
      config: { permission: 'read' },
      schema: {
        summary:
          'Runs by state (state=dead: the dead-letter view; state=pending: each with what holds it), newest first',
        tags: ['runs'],
        querystring: S.RunListQuery,
        response: { 200: S.RunList, ...errors },
      },
    },
    async (request) => {
      const q = request.query;
      const page = await store.listRuns({
        tenantId: request.principal.tenantId,
        jobId: q.job_id,
        state: q.state,
        limit: limitOf(q),
        cursor: q.cursor ?? null,
      });
      const runs = page.items.map(runJson);
      if (q.state !== 'pending') return { runs, next_cursor: page.nextCursor };
      // Why each pending run of the page waits: one bounded read for the page, not one per run.
      const waiting = await store.waitingForMany({
        tenantId: request.principal.tenantId,
        runIds: page.items.map((r) => r.runId),
        now: clock.nowMs(),
      });
      return {
        runs: runs.map((r) => ({ ...r, waiting_for: waiting.get(r.run_id) ?? null })),
        next_cursor: page.nextCursor,
      };
    },
  );
}
