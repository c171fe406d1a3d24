/**
 * The routes a remote worker uses: claim runs under leases (long-poll), renew them one by one or in
 * bulk, complete or fail a run, release it; and report itself for `tock status`, or leave. Every
 * write under a lease carries its token: a lease that is not live any more answers 409
 * `lease_lost` (404 when the run is not the caller's tenant's), never a partial write.
 */
import type { Static } from 'typebox';
import { type HeartbeatLease, NotFoundError, TockError } from '../../core/index.js';
import type { Store } from '../../store/index.js';
import type { LongPolls } from '../long-poll.js';
import { leasedRunJson } from '../present.js';
import { RemoteWorkers } from '../remote-workers.js';
import { MAX_RESULTS } from '../result-schemas.js';
import { reportOf, startOf, writeResults } from '../results.js';
import * as S from '../schemas.js';
import type { RouteApp, RouteOptions, RoutePlugin } from '../types.js';
import { errors } from './shared.js';

export interface LeaseOptions extends RouteOptions {
  /** The waiting long-polls of `POST /v1/leases`, their caps and their wake-ups. */
  longPolls: LongPolls;
}

/** The lease routes, in the order the OpenAPI document lists them. */
export const leaseRoutes: RoutePlugin<LeaseOptions> = async (app, o) => {
  const workers = new RemoteWorkers({ store: o.store, clock: o.clock, logger: app.log });
  claimRoute(app, o, workers);
  runHeartbeatRoute(app, o);
  workerHeartbeatRoute(app, o, workers);
  workerPresenceRoutes(app, o, workers);
  completeManyRoute(app, o);
  completeRoute(app, o);
  releaseRoute(app, o);
};

const serverTime = (o: RouteOptions) => new Date(o.clock.nowMs()).toISOString();

/** A write under a lease did not happen: 404 if the run is not the caller's tenant's, else 409. */
async function leaseLost(store: Pick<Store, 'getRun'>, tenantId: string, runId: string): Promise<TockError> {
  await store.getRun({ tenantId, runId }); // throws not_found for another tenant's (or no) run
  return new TockError('lease_lost', `the lease on run ${runId} is not live`);
}

/**
 * The client of a claim went away before its answer could be sent: give the runs back at once
 * (no attempt spent) rather than strand them under leases nobody renews. With a claim id, only if
 * no retry of the claim (to this or another server) was answered with them; its worker holds them.
 */
async function releaseForGoneClient(
  app: RouteApp,
  { store, clock }: RouteOptions,
  gone: { workerId: string; tenantId: string; claimId: string | undefined },
  runs: readonly { runId: string; leaseToken: string }[],
): Promise<void> {
  const { workerId, tenantId, claimId } = gone;
  const reason = 'client gone';
  try {
    const { released } =
      claimId === undefined
        ? await store.releaseRuns({ leases: runs, reason, now: clock.nowMs(), tenantId })
        : await store.releaseClaim({ claimId, workerId, reason, now: clock.nowMs(), tenantId });
    app.log.info(
      { worker_id: workerId, released: released.length },
      'claim answer undeliverable: runs released',
    );
  } catch (err) {
    app.log.warn(
      { err, worker_id: workerId },
      'could not release the runs of a gone client; their leases will expire',
    );
  }
}

function claimRoute(app: RouteApp, o: LeaseOptions, workers: RemoteWorkers): void {
  const { store, clock } = o;
  app.post(
    '/v1/leases',
    {
      config: { permission: 'work' },
      schema: {
        summary: 'Claim runs under leases; long-polls up to wait_ms',
        tags: ['workers'],
        body: S.LeaseRequest,
        response: { 200: S.LeaseAnswer, ...errors },
      },
    },
    async (request, reply) => {
      const b = request.body;
      const closed = new AbortController();
      // The response's 'close' (before it is sent) means the client went away. Not the request's:
      // since Node 16 that fires as soon as the body has been read, which ended every long-poll at
      // its first sleep.
      reply.raw.once('close', () => closed.abort());
      workers.touch(b.worker_id, request.principal.tenantId, b.pool ?? 'default', b.handlers);
      const { tenantId, keyId } = request.principal;
      const pool = b.pool ?? 'default';
      // Results handed in with the claim are written first (their runs' slots are then free); such
      // a claim answers at once, so their outcomes do not wait out a long-poll.
      const results = b.results ? await writeResults(o, tenantId, b.results) : undefined;
      // The waiting (wake-ups, caps, quota) is long-poll.ts's; this route says how to claim.
      // The next instant is asked as of the last claim (see `NextAvailableParams.now`).
      let claimedAt = clock.nowMs();
      const runs = await o.longPolls.run({
        tenantId,
        keyId,
        waitMs: results ? 0 : (b.wait_ms ?? 0),
        aheadMs: b.ahead_ms ?? 0,
        signal: closed.signal,
        claim: () => {
          claimedAt = clock.nowMs();
          return store.claimRuns({
            workerId: b.worker_id,
            pool,
            max: b.max ?? 1,
            now: claimedAt,
            handlers: b.handlers,
            tenantId,
            aheadMs: b.ahead_ms,
            claimId: b.claim_id,
          });
        },
        nextAvailableAt: () =>
          store.nextAvailableAt({ pool, now: claimedAt, tenantId, aheadMs: b.ahead_ms ?? 0 }),
      });
      // The client went away while the claim ran: give its runs back at once (no attempt spent)
      // rather than strand them under a lease nobody renews.
      if (runs.length > 0 && closed.signal.aborted) {
        await releaseForGoneClient(app, o, { workerId: b.worker_id, tenantId, claimId: b.claim_id }, runs);
        return { runs: [], results, server_time: serverTime(o) };
      }
      const start = clock.nowMs();
      for (const r of runs) o.metrics.runStarted(r, start);
      return { runs: runs.map(leasedRunJson), results, server_time: serverTime(o) };
    },
  );
}

function runHeartbeatRoute(app: RouteApp, o: RouteOptions): void {
  const { store, clock } = o;
  app.post(
    '/v1/runs/:run_id/heartbeat',
    {
      config: { permission: 'work' },
      schema: {
        summary: "Renew one run's lease; 409 when lost",
        tags: ['workers'],
        params: S.RunParams,
        body: S.RunHeartbeatBody,
        response: { 200: S.HeartbeatAnswer, ...errors },
      },
    },
    async (request) => {
      const { run_id } = request.params;
      const tenantId = request.principal.tenantId;
      const { renewed } = await store.heartbeatRuns({
        leases: [heartbeatLease(run_id, request.body)],
        now: clock.nowMs(),
        tenantId,
      });
      if (!renewed[0]) throw await leaseLost(store, tenantId, run_id);
      return { lease_expires_at: renewed[0].leaseExpiresAt.toISOString(), server_time: serverTime(o) };
    },
  );
}

/** A lease of a heartbeat's body, with what its handler reported. */
function heartbeatLease(runId: string, l: Static<typeof S.RunHeartbeatBody>): HeartbeatLease {
  return { runId, leaseToken: l.lease_token, ...reportOf(l) };
}

/** A worker's bulk heartbeat: every lease it holds renewed in one statement, the lost ones named. */
function workerHeartbeatRoute(app: RouteApp, o: RouteOptions, workers: RemoteWorkers): void {
  const { store, clock } = o;
  app.post(
    '/v1/workers/:worker_id/heartbeat',
    {
      config: { permission: 'work' },
      schema: {
        summary: 'Renew many leases in one statement',
        tags: ['workers'],
        params: S.WorkerParams,
        body: S.WorkerHeartbeatBody,
        response: { 200: S.WorkerHeartbeatAnswer, ...errors },
      },
    },
    async (request) => {
      workers.touch(request.params.worker_id, request.principal.tenantId);
      const result = await store.heartbeatRuns({
        leases: request.body.leases.map((l) => heartbeatLease(l.run_id, l)),
        now: clock.nowMs(),
        tenantId: request.principal.tenantId,
      });
      return {
        renewed: result.renewed.map((r) => ({
          run_id: r.runId,
          lease_expires_at: r.leaseExpiresAt.toISOString(),
        })),
        lost: result.lost,
        server_time: serverTime(o),
      };
    },
  );
}

/** A remote worker's report of itself for `tock status` (`PUT`), and its leaving (`DELETE`). */
function workerPresenceRoutes(app: RouteApp, o: RouteOptions, workers: RemoteWorkers): void {
  app.put(
    '/v1/workers/:worker_id',
    {
      config: { permission: 'work' },
      schema: {
        summary:
          'A remote worker reports itself for tock status: pool, handlers, runs held, clock offset (every few seconds)',
        tags: ['workers'],
        params: S.WorkerParams,
        body: S.WorkerPresenceBody,
        response: { 200: S.WorkerPresenceAnswer, ...errors },
      },
    },
    async (request) => {
      const b = request.body;
      await workers.record(
        request.params.worker_id,
        request.principal.tenantId,
        o.clock.nowMs(),
        { ...b, pool: b.pool ?? 'default' },
        b.clock_offset_ms === undefined
          ? undefined
          : { offsetMs: b.clock_offset_ms, uncertaintyMs: b.clock_uncertainty_ms ?? 0 },
      );
      return { server_time: serverTime(o) };
    },
  );

  app.delete(
    '/v1/workers/:worker_id',
    {
      config: { permission: 'work' },
      schema: {
        summary: 'A remote worker leaving on purpose (a clean stop): it is no longer listed by tock status',
        tags: ['workers'],
        params: S.WorkerParams,
        response: { 204: S.NoContent, ...errors },
      },
    },
    async (request, reply) => {
      await workers.leave(request.params.worker_id, request.principal.tenantId);
      return reply.code(204).send(null);
    },
  );
}

/** One run's result (the single-run route): its batch of one, answered as the route answers. */
function completeRoute(app: RouteApp, o: RouteOptions): void {
  app.post(
    '/v1/runs/:run_id/complete',
    {
      config: { permission: 'work' },
      schema: {
        summary: 'Report the result under the lease; 409 when lost',
        tags: ['workers'],
        params: S.RunParams,
        body: S.CompleteBody,
        response: { 200: S.StateAnswer, ...errors },
      },
    },
    async (request) => {
      const { run_id } = request.params;
      const [outcome] = await writeResults(o, request.principal.tenantId, [{ ...request.body, run_id }]);
      if (outcome?.outcome === 'not_found')
        throw new NotFoundError(`run ${run_id} does not exist`, { run_id });
      if (outcome?.outcome !== 'done')
        throw new TockError('lease_lost', `the lease on run ${run_id} is not live`);
      const { state, attempt, available_at } = outcome;
      return attempt === undefined
        ? { state: state ?? 'succeeded' }
        : { state: state ?? 'pending', attempt, available_at };
    },
  );
}

/** Many results in one request: each written under its own lease, each with its own outcome. */
function completeManyRoute(app: RouteApp, o: RouteOptions): void {
  app.post(
    '/v1/runs/complete',
    {
      config: { permission: 'work' },
      schema: {
        summary: `Report up to ${MAX_RESULTS} results, each under its lease; an outcome per result (a lost lease fails only its own)`,
        tags: ['workers'],
        body: S.CompleteManyBody,
        response: { 200: S.CompleteManyAnswer, ...errors },
      },
    },
    async (request) => ({
      results: await writeResults(o, request.principal.tenantId, request.body.results),
      server_time: serverTime(o),
    }),
  );
}

function releaseRoute(app: RouteApp, { store, clock }: RouteOptions): void {
  app.post(
    '/v1/runs/:run_id/release',
    {
      config: { permission: 'work' },
      schema: {
        summary: 'Give a run back without spending an attempt (worker shutdown); 409 when the lease is lost',
        tags: ['workers'],
        params: S.RunParams,
        body: S.ReleaseBody,
        response: { 200: S.StateAnswer, ...errors },
      },
    },
    async (request) => {
      const { run_id } = request.params;
      const b = request.body;
      const tenantId = request.principal.tenantId;
      const { released } = await store.releaseRuns({
        leases: [{ runId: run_id, leaseToken: b.lease_token, startedAt: startOf(b.started_at) }],
        reason: b.reason ?? 'worker shutdown',
        now: clock.nowMs(),
        tenantId,
      });
      if (released.length === 0) throw await leaseLost(store, tenantId, run_id);
      return { state: 'pending' };
    },
  );
}
