/** The jobs routes: create or update (one or many), list, read, delete, pause, resume, trigger, a job's runs. */
import {
  ConflictError,
  jobInputFromApi,
  parseInstant,
  TockError,
  ValidationError,
  validateJob,
  validateJobs,
} from '../../core/index.js';
import type { App, AppOptions } from '../app.js';
import { jobJson, runJson } from '../present.js';
import * as S from '../schemas.js';
import { errors, hashBody, limitOf } from './shared.js';

const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

export function registerJobRoutes(app: App, o: AppOptions): void {
  const { store, clock } = o;
  const now = () => clock.nowMs();
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
        jobs: validateJobs(inputs),
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
      const { changes } = await store.upsertJobs({
        tenantId: request.principal.tenantId,
        jobs: [validateJob(input)],
        now: now(),
        withJobs: true,
      });
      const { job, change } = changes[0]!;
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
}
