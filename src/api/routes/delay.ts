/**
 * `GET /v1/delay`: the tenant's scheduling delay over time, from run history (so every server
 * answers the same), for charts: buckets of slots with the count, median, 99th percentile and
 * largest delay of the ended runs in each, of one pool or job when asked. Bounded by `delayWindow`
 * (at most MAX_DELAY_BUCKETS buckets over at most MAX_DELAY_RANGE_MS); the key's tenant only.
 */
import { delayWindow, fillDelayBuckets } from '../../core/index.js';
import * as D from '../delay-schemas.js';
import type { RoutePlugin } from '../types.js';
import { errors } from './shared.js';

const seconds = (ms: number | null) => (ms === null ? null : ms / 1000);

export const delayRoutes: RoutePlugin = async (app, { store, clock }) => {
  app.get(
    '/v1/delay',
    {
      config: { permission: 'read' },
      schema: {
        summary: "The tenant's scheduling delay over time from run history, in buckets of slots",
        tags: ['runs'],
        querystring: D.DelayQuery,
        response: { 200: D.DelayAnswer, ...errors },
      },
    },
    async (request) => {
      const q = request.query;
      const window = delayWindow({ from: q.from, to: q.to, step: q.step, now: clock.nowMs() });
      const found = await store.delaySeries({
        tenantId: request.principal.tenantId,
        window,
        pool: q.pool,
        jobId: q.job_id,
      });
      return {
        from: new Date(window.fromMs).toISOString(),
        to: new Date(window.toMs).toISOString(),
        step_seconds: window.stepMs / 1000,
        pool: q.pool ?? null,
        job_id: q.job_id ?? null,
        buckets: fillDelayBuckets(window, found).map((b) => ({
          start: new Date(b.startMs).toISOString(),
          runs: b.runs,
          p50: seconds(b.p50Ms),
          p99: seconds(b.p99Ms),
          max: seconds(b.maxMs),
        })),
      };
    },
  );
};
