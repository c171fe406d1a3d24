/**
 * The retention routes: the tenant's retention by state (`GET/PUT /v1/retention`; writing needs
 * `admin`), and pruning now (`POST /v1/runs/prune`, `admin`), what the pruner does in the
 * background, for the caller's tenant only, with a dry run that counts instead.
 */
import { checkRetention, DEFAULT_RETENTION, effectiveRetention, type Retention } from '../../core/index.js';
import * as R from '../retention-schemas.js';
import type { RouteApp, RouteOptions, RoutePlugin } from '../types.js';
import { errors } from './shared.js';

/** Batches one `POST /v1/runs/prune` runs (each looks at up to `PRUNE_BATCH` runs) before it answers. */
export const PRUNE_BATCHES = 10;
export const PRUNE_BATCH = 2000;

export const retentionRoutes: RoutePlugin = async (app, o) => {
  readRetention(app, o);
  putRetention(app, o);
  prune(app, o);
};

const answer = (set: Retention | null) => ({
  retention: effectiveRetention(set),
  set: set ?? {},
  defaults: { ...DEFAULT_RETENTION },
});

function readRetention(app: RouteApp, { store }: RouteOptions): void {
  app.get(
    '/v1/retention',
    {
      config: { permission: 'read' },
      schema: {
        summary: "The tenant's retention: how long finished runs are kept, by state",
        tags: ['retention'],
        response: { 200: R.Retention, ...errors },
      },
    },
    async (request) => answer(await store.getTenantRetention({ tenantId: request.principal.tenantId })),
  );
}

function putRetention(app: RouteApp, { store, clock }: RouteOptions): void {
  app.put(
    '/v1/retention',
    {
      config: { permission: 'admin' },
      schema: {
        summary: "Replace the tenant's retention (a state left out takes the default); needs an admin key",
        tags: ['retention'],
        body: R.RetentionBody,
        response: { 200: R.Retention, ...errors },
      },
    },
    async (request) => {
      const retention = checkRetention(request.body);
      const tenantId = request.principal.tenantId;
      return answer(await store.putTenantRetention({ tenantId, retention, now: clock.nowMs() }));
    },
  );
}

function prune(app: RouteApp, { store, clock }: RouteOptions): void {
  app.post(
    '/v1/runs/prune',
    {
      config: { permission: 'admin' },
      schema: {
        summary: `Delete the tenant's finished runs past their retention now (up to ${PRUNE_BATCHES * PRUNE_BATCH} looked at per call: repeat with the cursor); dry_run counts instead; needs an admin key`,
        tags: ['retention'],
        body: R.PruneBody,
        response: { 200: R.PruneAnswer, ...errors },
      },
    },
    async (request) => {
      const dryRun = request.body?.dry_run ?? false;
      const r = await store.pruneTenant({
        tenantId: request.principal.tenantId,
        now: clock.nowMs(),
        cursor: request.body?.cursor ?? null,
        dryRun,
        batches: PRUNE_BATCHES,
        limit: PRUNE_BATCH,
      });
      return {
        dry_run: dryRun,
        runs: r.byState,
        scanned: r.scanned,
        horizon: r.horizon?.toISOString() ?? null,
        cursor: r.cursor,
      };
    },
  );
}
