/** The routes a remote worker uses: claim (long-poll), heartbeat, complete or fail, release. */
import {
  MAX_REMOTE_WORKERS_PER_TENANT,
  parseInstant,
  REMOTE_WORKER_LIVE_MS,
  remoteNodeId,
  splitErrorText,
  TockError,
} from '../../core/index.js';
import type { App, AppOptions } from '../app.js';
import { leasedRunJson } from '../present.js';
import * as S from '../schemas.js';
import { errors } from './shared.js';

/** A remote worker's row is rewritten at most this often, ms. */
const TOUCH_EVERY_MS = 5000;
/** The most workers `workerSeen` remembers (over every tenant) before it starts over. */
const MAX_WORKERS_SEEN = 10_000;

export function registerWorkerRoutes(app: App, o: AppOptions): void {
  const { store, clock } = o;
  const now = () => clock.nowMs();
  /**
   * Remote workers appear in `nodes` (and `tock status`) through their claims and heartbeats, as
   * rows of their tenant (`<tenant>/<worker_id>`), at most MAX_REMOTE_WORKERS_PER_TENANT each.
   * `workerSeen` spares the database a write per request: one per worker per TOUCH_EVERY_MS,
   * keyed by that tenant-scoped id, and bounded (cleared when full: at worst a write more).
   */
  const workerSeen = new Map<string, number>();
  /** Writes a remote worker's row (what it reported merged into `info`) and notes it as seen at `t`. */
  const recordWorker = (
    workerId: string,
    tenantId: string,
    t: number,
    report: { pool?: string; handlers?: string[]; concurrency?: number; in_flight?: number },
    clockState?: { offsetMs: number; uncertaintyMs: number },
  ): Promise<unknown> => {
    const seenKey = remoteNodeId(tenantId, workerId);
    if (workerSeen.size >= MAX_WORKERS_SEEN) workerSeen.clear();
    workerSeen.set(seenKey, t);
    const info: Record<string, unknown> = { via: 'http', live_ms: REMOTE_WORKER_LIVE_MS };
    for (const field of ['pool', 'handlers', 'concurrency', 'in_flight'] as const)
      if (report[field] !== undefined) info[field] = report[field];
    return store.touchRemoteWorker({
      tenantId,
      workerId,
      now: t,
      info,
      clock: clockState,
      cap: MAX_REMOTE_WORKERS_PER_TENANT,
    });
  };
  /** A claim or heartbeat: the worker's row is written at most once per TOUCH_EVERY_MS, in the background. */
  const touchWorker = (workerId: string, tenantId: string, pool?: string, handlers?: string[]): void => {
    const t = now();
    if (t - (workerSeen.get(remoteNodeId(tenantId, workerId)) ?? Number.NEGATIVE_INFINITY) < TOUCH_EVERY_MS)
      return;
    recordWorker(workerId, tenantId, t, { pool, handlers }).catch((err: unknown) =>
      app.log.warn({ err }, 'could not record a remote worker in the node list'),
    );
  };
  /**
   * The client of a claim went away before its answer could be sent: give the runs back at once
   * (no attempt spent) rather than strand them under leases nobody renews. With a claim id, only if
   * no retry of the claim (to this or another server) was answered with them; its worker holds them.
   */
  const releaseForGoneClient = async (
    workerId: string,
    tenantId: string,
    runs: readonly { runId: string; leaseToken: string }[],
    claimId: string | undefined,
  ): Promise<void> => {
    const reason = 'client gone';
    try {
      const { released } =
        claimId === undefined
          ? await store.releaseRuns({ leases: runs, reason, now: now(), tenantId })
          : await store.releaseClaim({ claimId, workerId, reason, now: now(), tenantId });
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
  };
  /**
   * The handler start a worker reported (its `started_at`), ms, or null. Only a bound on what the
   * store records: it keeps the start within [the later of the claim and the run's available_at,
   * now], so a worker's clock cannot move an attempt outside its lease or before its slot.
   */
  const startOf = (startedAt: string | undefined): number | null =>
    startedAt === undefined ? null : parseInstant(startedAt, 'started_at');
  /** A write under a lease did not happen: 404 if the run is not the caller's tenant's, else 409. */
  const leaseLost = async (tenantId: string, runId: string): Promise<TockError> => {
    await store.getRun({ tenantId, runId }); // throws not_found for another tenant's (or no) run
    return new TockError('lease_lost', `the lease on run ${runId} is not live`);
  };

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
      const b = request.body as {
        worker_id: string;
        pool?: string;
        handlers?: string[];
        max?: number;
        wait_ms?: number;
        ahead_ms?: number;
        claim_id?: string;
      };
      const closed = new AbortController();
      // The response's 'close' (before it is sent) means the client went away. Not the request's:
      // since Node 16 that fires as soon as the body has been read, which ended every long-poll at
      // its first sleep.
      reply.raw.once('close', () => closed.abort());
      touchWorker(b.worker_id, request.principal.tenantId, b.pool ?? 'default', b.handlers);
      const { tenantId, keyId } = request.principal;
      const pool = b.pool ?? 'default';
      // The waiting (wake-ups, caps, quota) is long-poll.ts's; this route says how to claim.
      const runs = await app.longPolls.run({
        tenantId,
        keyId,
        waitMs: b.wait_ms ?? 0,
        aheadMs: b.ahead_ms ?? 0,
        signal: closed.signal,
        claim: () =>
          store.claimRuns({
            workerId: b.worker_id,
            pool,
            max: b.max ?? 1,
            now: now(),
            handlers: b.handlers,
            tenantId,
            aheadMs: b.ahead_ms,
            claimId: b.claim_id,
          }),
        nextAvailableAt: () => store.nextAvailableAt({ pool, now: now(), tenantId }),
      });
      // The client went away while the claim ran: give its runs back at once (no attempt spent)
      // rather than strand them under a lease nobody renews.
      if (runs.length > 0 && closed.signal.aborted) {
        await releaseForGoneClient(b.worker_id, tenantId, runs, b.claim_id);
        return { runs: [], server_time: new Date(now()).toISOString() };
      }
      const start = now();
      for (const r of runs) o.metrics.runStarted(r, start);
      return { runs: runs.map(leasedRunJson), server_time: new Date(now()).toISOString() };
    },
  );

  app.post(
    '/v1/runs/:run_id/heartbeat',
    {
      config: { permission: 'work' },
      schema: {
        summary: "Renew one run's lease; 409 when lost",
        tags: ['workers'],
        params: S.RunParams,
        body: S.LeaseTokenBody,
        response: { 200: S.HeartbeatAnswer, ...errors },
      },
    },
    async (request) => {
      const { run_id } = request.params as { run_id: string };
      const { lease_token } = request.body as { lease_token: string };
      const tenantId = request.principal.tenantId;
      const { renewed } = await store.heartbeatRuns({
        leases: [{ runId: run_id, leaseToken: lease_token }],
        now: now(),
        tenantId,
      });
      if (!renewed[0]) throw await leaseLost(tenantId, run_id);
      return {
        lease_expires_at: renewed[0].leaseExpiresAt.toISOString(),
        server_time: new Date(now()).toISOString(),
      };
    },
  );

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
      touchWorker((request.params as { worker_id: string }).worker_id, request.principal.tenantId);
      const { leases } = request.body as { leases: { run_id: string; lease_token: string }[] };
      const result = await store.heartbeatRuns({
        leases: leases.map((l) => ({ runId: l.run_id, leaseToken: l.lease_token })),
        now: now(),
        tenantId: request.principal.tenantId,
      });
      return {
        renewed: result.renewed.map((r) => ({
          run_id: r.runId,
          lease_expires_at: r.leaseExpiresAt.toISOString(),
        })),
        lost: result.lost,
        server_time: new Date(now()).toISOString(),
      };
    },
  );

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
      const { worker_id } = request.params as { worker_id: string };
      const b = request.body as {
        pool?: string;
        handlers?: string[];
        concurrency?: number;
        in_flight?: number;
        clock_offset_ms?: number;
        clock_uncertainty_ms?: number;
      };
      await recordWorker(
        worker_id,
        request.principal.tenantId,
        now(),
        { ...b, pool: b.pool ?? 'default' },
        b.clock_offset_ms === undefined
          ? undefined
          : { offsetMs: b.clock_offset_ms, uncertaintyMs: b.clock_uncertainty_ms ?? 0 },
      );
      return { server_time: new Date(now()).toISOString() };
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
      const { worker_id } = request.params as { worker_id: string };
      const tenantId = request.principal.tenantId;
      workerSeen.delete(remoteNodeId(tenantId, worker_id));
      await store.leaveRemoteWorker({ tenantId, workerId: worker_id });
      return reply.code(204).send();
    },
  );

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
      const { run_id } = request.params as { run_id: string };
      const b = request.body as {
        lease_token: string;
        status: 'succeeded' | 'failed';
        error?: string;
        error_stack?: string;
        started_at?: string;
        retryable?: boolean;
        retry_after_ms?: number;
        output?: string;
      };
      const tenantId = request.principal.tenantId;
      const startedAt = startOf(b.started_at);
      if (b.status === 'succeeded') {
        const at = now();
        const { completed, jobs } = await store.completeRuns({
          leases: [{ runId: run_id, leaseToken: b.lease_token, output: b.output, startedAt }],
          now: at,
          tenantId,
          withJobs: true,
        });
        if (completed.length === 0) throw await leaseLost(tenantId, run_id);
        for (const j of jobs ?? []) o.metrics.jobSucceeded(j.tenantId, j.jobId, at);
        return { state: 'succeeded' };
      }
      // A worker from before `error_stack` sends the whole stack as the error: split it here.
      const error =
        b.error_stack === undefined
          ? splitErrorText(b.error ?? 'failed')
          : { message: b.error ?? 'failed', stack: b.error_stack };
      try {
        const result = await store.failRun({
          runId: run_id,
          leaseToken: b.lease_token,
          error: error.message,
          errorStack: error.stack,
          startedAt,
          permanent: b.retryable === false,
          retryAfterMs: b.retry_after_ms,
          output: b.output,
          now: now(),
          tenantId,
        });
        (result.state === 'dead' ? o.metrics.deadLetters : o.metrics.retries).inc();
        return {
          state: result.state,
          attempt: result.attempt,
          available_at: result.availableAt ? result.availableAt.toISOString() : null,
        };
      } catch (err) {
        if (err instanceof TockError && err.code === 'lease_lost') throw await leaseLost(tenantId, run_id);
        throw err;
      }
    },
  );

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
      const { run_id } = request.params as { run_id: string };
      const b = request.body as { lease_token: string; reason?: string; started_at?: string };
      const tenantId = request.principal.tenantId;
      const { released } = await store.releaseRuns({
        leases: [{ runId: run_id, leaseToken: b.lease_token, startedAt: startOf(b.started_at) }],
        reason: b.reason ?? 'worker shutdown',
        now: now(),
        tenantId,
      });
      if (released.length === 0) throw await leaseLost(tenantId, run_id);
      return { state: 'pending' };
    },
  );
}
