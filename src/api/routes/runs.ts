/**
 * The runs routes an operator uses: list by state, read one with its attempts, replay a dead run,
 * cancel a pending or running one.
 */
import { runJson, runWithAttemptsJson } from '../present.js';
import * as S from '../schemas.js';
import type { RouteApp, RouteOptions, RoutePlugin } from '../types.js';
import { errors, limitOf } from './shared.js';

export const runRoutes: RoutePlugin = async (app, { store, clock }) => {
  app.get(
    '/v1/runs',
    {
      config: { permission: 'read' },
      schema: {
        summary: 'Runs by state (state=dead: the dead-letter view), newest first',
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
      return { runs: page.items.map(runJson), next_cursor: page.nextCursor };
    },
  );

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

  cancelRoute(app, { store, clock });
};

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
