/**
 * The jobs routes: create or update (one or many), list, read, delete, pause, resume, trigger a run
 * and backfill a range of slots (both with `Idempotency-Key`), a job's runs. Every write is the
 * tenant's of the caller's key.
 */
import type { Static } from 'typebox';
import {
  ConflictError,
  jobInputFromApi,
  MAX_BACKFILL_SLOTS,
  parseInstant,
  ValidationError,
  validateJob,
  validateJobs,
} from '../../core/index.js';
import { tockErrorAnswer } from '../plugins/errors.js';
import { type Answer, idempotent } from '../plugins/idempotency.js';
import { backfillJson, jobJson, runJson } from '../present.js';
import * as S from '../schemas.js';
import type { RouteApp, RouteOptions, RoutePlugin } from '../types.js';
import { errors, limitOf } from './shared.js';

/** The jobs routes, in the order the OpenAPI document lists them. */
export const jobRoutes: RoutePlugin = async (app, o) => {
  upsertMany(app, o);
  upsertOne(app, o);
  readJobs(app, o);
  deleteJob(app, o);
  pauseOrResume(app, o, 'pause');
  pauseOrResume(app, o, 'resume');
  triggerRun(app, o);
  backfill(app, o);
  jobRuns(app, o);
};

function upsertMany(app: RouteApp, { store, clock }: RouteOptions): void {
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
      const inputs = request.body.jobs.map((j, i) => {
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
        now: clock.nowMs(),
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
}

function upsertOne(app: RouteApp, { store, clock }: RouteOptions): void {
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
      const input = jobInputFromApi({ ...request.body, job_id: request.params.job_id });
      const { changes } = await store.upsertJobs({
        tenantId: request.principal.tenantId,
        jobs: [validateJob(input)],
        now: clock.nowMs(),
        withJobs: true,
      });
      const { job, change } = changes[0]!;
      return { ...jobJson(job), change };
    },
  );
}

/** `GET /v1/jobs` and `GET /v1/jobs/:job_id`. */
function readJobs(app: RouteApp, { store }: RouteOptions): void {
  app.get(
    '/v1/jobs',
    {
      config: { permission: 'read' },
      schema: {
        summary:
          'List jobs, by job id; optionally only those whose id starts with q, in a state, pool or handler',
        tags: ['jobs'],
        querystring: S.JobListQuery,
        response: { 200: S.JobList, ...errors },
      },
    },
    async (request) => {
      const { q, state, pool, handler } = request.query;
      const page = await store.listJobs({
        tenantId: request.principal.tenantId,
        limit: limitOf(request.query),
        cursor: request.query.cursor ?? null,
        filter: { idPrefix: q, state, pool, handler },
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
    async (request) =>
      jobJson(await store.getJob({ tenantId: request.principal.tenantId, jobId: request.params.job_id })),
  );
}

function deleteJob(app: RouteApp, { store, clock }: RouteOptions): void {
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
      await store.deleteJob({
        tenantId: request.principal.tenantId,
        jobId: request.params.job_id,
        now: clock.nowMs(),
      });
      return reply.code(204).send(null);
    },
  );
}

function pauseOrResume(app: RouteApp, { store, clock }: RouteOptions, action: 'pause' | 'resume'): void {
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
      const p = { tenantId: request.principal.tenantId, jobId: request.params.job_id, now: clock.nowMs() };
      return jobJson(action === 'pause' ? await store.pauseJob(p) : await store.resumeJob(p));
    },
  );
}

/**
 * `POST /v1/jobs/:job_id/runs`. With an Idempotency-Key, a slot that already has a run (409 with
 * its `run_id`) is a lasting answer, replayed like a 201; anything else (an unknown job that may be
 * created next, a bad slot, a fault) frees the key for a retry.
 */
/** What a trigger answers: the run (201), or the run its slot already has (409), first or replayed. */
type TriggerAnswerBody = Static<typeof S.Run> | Static<typeof S.ErrorBody>;

function triggerRun(app: RouteApp, o: RouteOptions): void {
  const { store, clock } = o;
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
      const { job_id } = request.params;
      const { scheduled_for, payload } = request.body;
      const tenantId = request.principal.tenantId;
      const trigger = async (): Promise<Answer<TriggerAnswerBody>> => {
        const scheduledFor =
          scheduled_for === undefined ? undefined : parseInstant(scheduled_for, 'scheduled_for');
        const now = clock.nowMs();
        const run = await store.triggerRun({ tenantId, jobId: job_id, scheduledFor, payload, now });
        return { status: 201, body: runJson(run) };
      };
      const answer = await idempotent(
        o,
        // No body and `{}` are the same request (a bare POST's body is `{}` by now).
        {
          tenantId,
          scope: `trigger:${job_id}`,
          header: request.headers['idempotency-key'],
          body: request.body,
        },
        trigger,
        (err) => (err instanceof ConflictError ? tockErrorAnswer(err) : null),
      );
      return reply.code(answer.status).send(answer.body);
    },
  );
}

/** An instant of a body field, or a `ValidationError` naming the field. */
function instantOf(text: string, field: string): number {
  try {
    return parseInstant(text, field);
  } catch (err) {
    if (err instanceof ValidationError) throw new ValidationError(err.message, { ...err.details, field });
    throw err;
  }
}

/**
 * `POST /v1/jobs/:job_id/backfill`: the run of every slot in `[from, to)` that has none, in one
 * statement. Repeating it is safe by itself (the repeat creates nothing and counts every slot as
 * existing); with an Idempotency-Key the first answer is replayed as it was. Any error frees the key.
 */
function backfill(app: RouteApp, o: RouteOptions): void {
  const { store, clock } = o;
  app.post(
    '/v1/jobs/:job_id/backfill',
    {
      config: { permission: 'operate' },
      schema: {
        summary: `Backfill: create the run of every slot in [from, to) that has none (at most ${MAX_BACKFILL_SLOTS}); Idempotency-Key replays the same answer`,
        tags: ['runs'],
        params: S.JobParams,
        body: S.BackfillBody,
        response: { 200: S.BackfillAnswer, ...errors },
      },
    },
    async (request, reply) => {
      const { job_id } = request.params;
      const tenantId = request.principal.tenantId;
      const from = instantOf(request.body.from, 'from');
      const to = instantOf(request.body.to, 'to');
      const answer = await idempotent(
        o,
        {
          tenantId,
          scope: `backfill:${job_id}`,
          header: request.headers['idempotency-key'],
          body: request.body,
        },
        async () => {
          const done = await store.backfillRuns({ tenantId, jobId: job_id, from, to, now: clock.nowMs() });
          return { status: 200, body: backfillJson(done) };
        },
        () => null,
      );
      return reply.code(answer.status).send(answer.body);
    },
  );
}

function jobRuns(app: RouteApp, { store }: RouteOptions): void {
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
      const { job_id } = request.params;
      const tenantId = request.principal.tenantId;
      await store.getJob({ tenantId, jobId: job_id });
      const page = await store.listRuns({
        tenantId,
        jobId: job_id,
        limit: limitOf(request.query),
        cursor: request.query.cursor ?? null,
      });
      return { runs: page.items.map(runJson), next_cursor: page.nextCursor };
    },
  );
}
