/** The `/v1` routes, plus health, readiness, metrics and the OpenAPI document. */
import { createHash } from 'node:crypto';
import { ConflictError, jobInputFromApi, parseInstant, TockError, ValidationError } from '../core/index.js';
import type { App, AppOptions } from './app.js';
import { jobJson, keyJson, leasedRunJson, runJson, runWithAttemptsJson } from './present.js';
import * as S from './schemas.js';

const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;
const errors = { '4xx': S.ErrorBody };

function limitOf(query: { limit?: string }): number {
  if (query.limit === undefined) return 50;
  const n = Number(query.limit);
  if (!Number.isInteger(n) || n < 1 || n > 500)
    throw new ValidationError('limit must be an integer from 1 to 500', { field: 'limit' });
  return n;
}

function hashBody(body: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(body ?? null))
    .digest('hex');
}

export function registerRoutes(app: App, o: AppOptions): void {
  const { store, clock } = o;
  const now = () => clock.nowMs();
  /** Remote workers appear in `nodes` (and `tock status`) through their claims and heartbeats. */
  const workerSeen = new Map<string, number>();
  const touchWorker = (workerId: string, tenantId: string, pool?: string): void => {
    const t = now();
    if (t - (workerSeen.get(workerId) ?? Number.NEGATIVE_INFINITY) < 5000) return;
    workerSeen.set(workerId, t);
    if (workerSeen.size > 10_000) workerSeen.clear();
    const info: Record<string, unknown> = { via: 'http', tenant_id: tenantId, live_ms: 60_000 };
    if (pool !== undefined) info.pool = pool;
    store
      .touchNode({ nodeId: workerId, role: 'worker', now: t, info })
      .catch((err: unknown) => app.log.warn({ err }, 'could not record a remote worker in the node list'));
  };
  /** A write under a lease did not happen: 404 if the run is not the caller's tenant's, else 409. */
  const leaseLost = async (tenantId: string, runId: string): Promise<TockError> => {
    await store.getRun({ tenantId, runId }); // throws not_found for another tenant's (or no) run
    return new TockError('lease_lost', `the lease on run ${runId} is not live`);
  };

  // -- jobs ---------------------------------------------------------------------------------------
  app.put(
    '/v1/jobs',
    {
      config: { permission: 'operate' },
      schema: {
        summary: 'Create or update up to 1000 jobs in one statement (all or nothing)',
        tags: ['jobs'],
        body: S.BulkJobsBody,
        response: { 200: S.BulkJobsAnswer, ...errors },
      },
    },
    async (request) => {
      const { jobs } = request.body as { jobs: unknown[] };
      const inputs = jobs.map((j, i) => {
        try {
          return jobInputFromApi(j);
        } catch (err) {
          if (err instanceof ValidationError)
            throw new ValidationError(`jobs[${i}]: ${err.message}`, { ...err.details, index: i });
          throw err;
        }
      });
      const { changes } = await store.upsertJobs({
        tenantId: request.principal.tenantId,
        jobs: inputs,
        now: now(),
      });
      const count = (c: string) => changes.filter((x) => x.change === c).length;
      return {
        jobs: changes.map((c) => ({ job_id: c.jobId, change: c.change })),
        created: count('created'),
        updated: count('updated'),
        unchanged: count('unchanged'),
      };
    },
  );

  app.put(
    '/v1/jobs/:job_id',
    {
      config: { permission: 'operate' },
      schema: {
        summary: 'Create or update a job (idempotent)',
        tags: ['jobs'],
        params: S.JobParams,
        body: S.JobBody,
        response: { 200: S.UpsertedJob, ...errors },
      },
    },
    async (request) => {
      const { job_id } = request.params as { job_id: string };
      const input = jobInputFromApi({ ...(request.body as object), job_id });
      const { job, change } = await store.upsertJob({
        tenantId: request.principal.tenantId,
        job: input,
        now: now(),
      });
      return { ...jobJson(job), change };
    },
  );

  app.get(
    '/v1/jobs',
    {
      config: { permission: 'read' },
      schema: {
        summary: 'List jobs',
        tags: ['jobs'],
        querystring: S.ListQuery,
        response: { 200: S.JobList, ...errors },
      },
    },
    async (request) => {
      const q = request.query as { limit?: string; cursor?: string };
      const page = await store.listJobs({
        tenantId: request.principal.tenantId,
        limit: limitOf(q),
        cursor: q.cursor ?? null,
      });
      return { jobs: page.items.map(jobJson), next_cursor: page.nextCursor };
    },
  );

  app.get(
    '/v1/jobs/:job_id',
    {
      config: { permission: 'read' },
      schema: {
        summary: 'One job',
        tags: ['jobs'],
        params: S.JobParams,
        response: { 200: S.Job, ...errors },
      },
    },
    async (request) => {
      const { job_id } = request.params as { job_id: string };
      return jobJson(await store.getJob({ tenantId: request.principal.tenantId, jobId: job_id }));
    },
  );

  app.delete(
    '/v1/jobs/:job_id',
    {
      config: { permission: 'operate' },
      schema: {
        summary: 'Delete a job; its pending runs are cancelled',
        tags: ['jobs'],
        params: S.JobParams,
        response: { 204: S.NoContent, ...errors },
      },
    },
    async (request, reply) => {
      const { job_id } = request.params as { job_id: string };
      await store.deleteJob({ tenantId: request.principal.tenantId, jobId: job_id, now: now() });
      return reply.code(204).send();
    },
  );

  for (const action of ['pause', 'resume'] as const) {
    app.post(
      `/v1/jobs/:job_id/${action}`,
      {
        config: { permission: 'operate' },
        schema: {
          summary: `${action === 'pause' ? 'Pause' : 'Resume'} a job`,
          tags: ['jobs'],
          params: S.JobParams,
          response: { 200: S.Job, ...errors },
        },
      },
      async (request) => {
        const { job_id } = request.params as { job_id: string };
        const p = { tenantId: request.principal.tenantId, jobId: job_id, now: now() };
        return jobJson(action === 'pause' ? await store.pauseJob(p) : await store.resumeJob(p));
      },
    );
  }

  app.post(
    '/v1/jobs/:job_id/runs',
    {
      config: { permission: 'operate' },
      // Every field is optional: a bare POST (no body, no content type) triggers a run for now.
      preValidation: async (request) => {
        if (request.body === undefined && request.headers['content-type'] === undefined) request.body = {};
      },
      schema: {
        summary: 'Trigger a run for a slot (default now); Idempotency-Key replays the same answer',
        tags: ['runs'],
        params: S.JobParams,
        body: S.TriggerBody,
        response: { 201: S.Run, ...errors },
      },
    },
    async (request, reply) => {
      const { job_id } = request.params as { job_id: string };
      const body = (request.body ?? {}) as { scheduled_for?: string };
      const tenantId = request.principal.tenantId;
      const trigger = async () => {
        const scheduledFor =
          body.scheduled_for === undefined ? undefined : parseInstant(body.scheduled_for, 'scheduled_for');
        const run = await store.triggerRun({ tenantId, jobId: job_id, scheduledFor, now: now() });
        return { status: 201, body: runJson(run) };
      };
      const rawKey = request.headers['idempotency-key'];
      if (rawKey === undefined) {
        const answer = await trigger();
        return reply.code(answer.status).send(answer.body);
      }
      if (typeof rawKey !== 'string' || !IDEMPOTENCY_KEY.test(rawKey)) {
        throw new ValidationError('Idempotency-Key must be 1-200 visible ASCII characters', {
          field: 'Idempotency-Key',
        });
      }
      const scope = `trigger:${job_id}`;
      // No body and `{}` are the same request.
      const requestHash = hashBody(request.body ?? {});
      const idem = { tenantId, scope, key: rawKey };
      const taken = await store.takeIdempotent({
        ...idem,
        requestHash,
        now: now(),
        ttlMs: IDEMPOTENCY_TTL_MS,
      });
      if (taken.state !== 'taken') {
        const storedHash = taken.state === 'done' ? taken.answer.requestHash : taken.requestHash;
        if (storedHash !== requestHash) {
          throw new TockError(
            'idempotency_mismatch',
            'this Idempotency-Key was used with a different request body',
          );
        }
        if (taken.state === 'in_progress')
          throw new ConflictError('a request with this Idempotency-Key is in progress; retry');
        return reply.code(taken.answer.status).send(taken.answer.body);
      }
      let answer: { status: number; body: unknown };
      try {
        answer = await trigger();
      } catch (err) {
        // A slot that already has a run is a lasting answer, worth replaying; anything else (an
        // unknown job that may be created next, a bad slot, a fault) frees the key for a retry.
        if (err instanceof ConflictError) {
          const extra = typeof err.details.run_id === 'string' ? { run_id: err.details.run_id } : {};
          answer = { status: 409, body: { error: { code: err.code, message: err.message, ...extra } } };
        } else {
          await store.releaseIdempotent(idem);
          throw err;
        }
      }
      await store.finishIdempotent({ ...idem, answer: { requestHash, ...answer } });
      return reply.code(answer.status).send(answer.body);
    },
  );

  app.get(
    '/v1/jobs/:job_id/runs',
    {
      config: { permission: 'read' },
      schema: {
        summary: "A job's runs, newest first",
        tags: ['runs'],
        params: S.JobParams,
        querystring: S.ListQuery,
        response: { 200: S.RunList, ...errors },
      },
    },
    async (request) => {
      const { job_id } = request.params as { job_id: string };
      const q = request.query as { limit?: string; cursor?: string };
      const tenantId = request.principal.tenantId;
      await store.getJob({ tenantId, jobId: job_id });
      const page = await store.listRuns({
        tenantId,
        jobId: job_id,
        limit: limitOf(q),
        cursor: q.cursor ?? null,
      });
      return { runs: page.items.map(runJson), next_cursor: page.nextCursor };
    },
  );

  // -- runs ---------------------------------------------------------------------------------------
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
      const q = request.query as { limit?: string; cursor?: string; state?: 'dead'; job_id?: string };
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
      const { run_id } = request.params as { run_id: string };
      return runWithAttemptsJson(await store.getRun({ tenantId: request.principal.tenantId, runId: run_id }));
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
    async (request) => {
      const { run_id } = request.params as { run_id: string };
      return runJson(
        await store.replayRun({ tenantId: request.principal.tenantId, runId: run_id, now: now() }),
      );
    },
  );

  // -- workers ------------------------------------------------------------------------------------
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
      };
      const deadline = now() + (b.wait_ms ?? 0);
      const closed = new AbortController();
      // The response's 'close' (before it is sent) means the client went away. Not the request's:
      // since Node 16 that fires as soon as the body has been read, which ended every long-poll at
      // its first sleep.
      reply.raw.once('close', () => closed.abort());
      touchWorker(b.worker_id, request.principal.tenantId, b.pool ?? 'default');
      for (;;) {
        // A client that went away while we slept gets no runs: a claim now would only strand them
        // under a lease nobody renews until the reaper takes them back.
        if (closed.signal.aborted) return { runs: [], server_time: new Date(now()).toISOString() };
        const runs = await store.claimRuns({
          workerId: b.worker_id,
          pool: b.pool ?? 'default',
          max: b.max ?? 1,
          now: now(),
          handlers: b.handlers,
          tenantId: request.principal.tenantId,
          aheadMs: b.ahead_ms,
        });
        const remaining = deadline - now();
        if (runs.length > 0 || remaining <= 0 || closed.signal.aborted) {
          const start = now();
          for (const r of runs) o.metrics.runStarted(r.pool, r.availableAt.getTime(), start);
          return { runs: runs.map(leasedRunJson), server_time: new Date(now()).toISOString() };
        }
        // Until the next poll, or sooner when a materialised run becomes claimable before it.
        const next = await store.nextAvailableAt({
          pool: b.pool ?? 'default',
          now: now(),
          tenantId: request.principal.tenantId,
        });
        const until =
          next === null ? Number.POSITIVE_INFINITY : Math.max(0, next.getTime() - (b.ahead_ms ?? 0) - now());
        await clock.sleep(Math.min(o.leasePollMs ?? 200, remaining, until), closed.signal);
      }
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
        retryable?: boolean;
        retry_after_ms?: number;
        output?: string;
      };
      const tenantId = request.principal.tenantId;
      if (b.status === 'succeeded') {
        const { completed } = await store.completeRuns({
          leases: [{ runId: run_id, leaseToken: b.lease_token, output: b.output }],
          now: now(),
          tenantId,
        });
        if (completed.length === 0) throw await leaseLost(tenantId, run_id);
        return { state: 'succeeded' };
      }
      try {
        const result = await store.failRun({
          runId: run_id,
          leaseToken: b.lease_token,
          error: b.error ?? 'failed',
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
      const b = request.body as { lease_token: string; reason?: string };
      const tenantId = request.principal.tenantId;
      const { released } = await store.releaseRuns({
        leases: [{ runId: run_id, leaseToken: b.lease_token }],
        reason: b.reason ?? 'worker shutdown',
        now: now(),
        tenantId,
      });
      if (released.length === 0) throw await leaseLost(tenantId, run_id);
      return { state: 'pending' };
    },
  );

  // -- keys ---------------------------------------------------------------------------------------
  app.post(
    '/v1/keys',
    {
      config: { permission: 'admin' },
      schema: {
        summary: "Create a key for the caller's tenant; the secret is shown once",
        tags: ['keys'],
        body: S.KeyBody,
        response: { 201: S.CreatedKey, ...errors },
      },
    },
    async (request, reply) => {
      const b = request.body as { role: 'admin' | 'operator' | 'worker' | 'reader'; name?: string };
      const { key, secret } = await store.createApiKey({
        tenantId: request.principal.tenantId,
        role: b.role,
        name: b.name,
        now: now(),
      });
      return reply.code(201).send({ ...keyJson(key), key: secret });
    },
  );

  app.get(
    '/v1/keys',
    {
      config: { permission: 'admin' },
      schema: {
        summary: "The tenant's keys (never their secrets)",
        tags: ['keys'],
        response: { 200: S.KeyList, ...errors },
      },
    },
    async (request) => ({
      keys: (await store.listApiKeys({ tenantId: request.principal.tenantId })).map(keyJson),
    }),
  );

  app.delete(
    '/v1/keys/:key_id',
    {
      config: { permission: 'admin' },
      schema: {
        summary: 'Revoke a key',
        tags: ['keys'],
        params: S.KeyParams,
        response: { 200: S.ApiKey, ...errors },
      },
    },
    async (request) => {
      const { key_id } = request.params as { key_id: string };
      return keyJson(
        await store.revokeApiKey({ tenantId: request.principal.tenantId, keyId: key_id, now: now() }),
      );
    },
  );

  // -- operations ---------------------------------------------------------------------------------
  app.get(
    '/v1/status',
    {
      config: { permission: 'operate' },
      schema: {
        summary: 'The cluster: nodes and their last heartbeat and clock offset, shard ownership, backlog',
        tags: ['operations'],
        response: { 200: S.StatusAnswer, ...errors },
      },
    },
    async () => {
      const t = now();
      const [nodes, shards, due, ready] = await Promise.all([
        store.listNodes(),
        store.listShards(),
        store.dueBacklog({ now: t }),
        store.readyDepth({ now: t }),
      ]);
      const byOwner: Record<string, number[]> = {};
      let owned = 0;
      for (const s of shards) {
        if (s.owner === null || s.leaseExpiresAt === null || s.leaseExpiresAt.getTime() <= t) continue;
        owned += 1;
        const list = byOwner[s.owner] ?? [];
        list.push(s.shardId);
        byOwner[s.owner] = list;
      }
      const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);
      return {
        server_time: new Date(t).toISOString(),
        nodes: nodes.map((n) => {
          const liveMs = typeof n.info.live_ms === 'number' ? n.info.live_ms : 30_000;
          return {
            node_id: n.nodeId,
            role: n.role,
            started_at: n.startedAt.toISOString(),
            last_seen_at: n.lastSeenAt.toISOString(),
            live: t - n.lastSeenAt.getTime() < liveMs,
            clock_offset_ms: n.clockOffsetMs,
            clock_uncertainty_ms: n.clockUncertaintyMs,
            shards: byOwner[n.nodeId]?.length ?? 0,
            info: n.info,
          };
        }),
        shards: { count: shards.length, owned, unowned: shards.length - owned, by_owner: byOwner },
        backlog: { due_jobs: sum(due), ready_runs: sum(ready) },
      };
    },
  );

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    const r = await o.readiness().catch(() => ({ database: false, migrations: false }));
    const ready = r.database && r.migrations;
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', ...r });
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    try {
      const counts = await store.countRuns({});
      for (const [state, n] of Object.entries(counts)) o.metrics.runsByState.set({ state }, n);
      o.metrics.readyDepth.reset();
      for (const [priority, n] of await store.readyDepth({ now: now() })) {
        o.metrics.readyDepth.set({ priority_class: String(priority) }, n);
      }
    } catch (err) {
      _request.log.warn({ err }, 'metrics: could not sample run counts');
    }
    return reply.type(o.metrics.registry.contentType).send(await o.metrics.registry.metrics());
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
