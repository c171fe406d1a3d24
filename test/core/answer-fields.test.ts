/**
 * The answer tables (`RUN_FIELDS`, `ATTEMPT_FIELDS`, `LEASED_RUN_FIELDS`, `API_KEY_FIELDS`) and what is derived from
 * them agree: the API's answer schemas, the mapping from the store's objects (`answerOf`) and the
 * client's types, which are also pinned to what they were before they were derived. No database.
 */
import type { Static } from 'typebox';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { jobJson, keyJson, leasedRunJson, runWithAttemptsJson } from '../../src/api/present.js';
import * as S from '../../src/api/schemas.js';
import type * as Api from '../../src/client/types.js';
import {
  type AnswerField,
  type AnswerFields,
  API_KEY_FIELDS,
  ATTEMPT_FIELDS,
  answerOf,
  JOB_FIELDS,
  LEASED_RUN_FIELDS,
  type Role,
  RUN_FIELDS,
  type RunState,
} from '../../src/core/index.js';
import type { ApiKey, Job, RunWithAttempts } from '../../src/store/index.js';

// biome-ignore lint/suspicious/noExplicitAny: TypeBox schemas are read here as the JSON they are
type Json = any;

const TABLES: [string, AnswerFields, Json][] = [
  ['RUN_FIELDS', RUN_FIELDS, S.Run],
  ['ATTEMPT_FIELDS', ATTEMPT_FIELDS, S.Attempt],
  ['API_KEY_FIELDS', API_KEY_FIELDS, S.ApiKey],
  ['LEASED_RUN_FIELDS', LEASED_RUN_FIELDS, S.LeasedRun],
];

const T1 = new Date('2026-01-01T00:00:00.000Z');
const T2 = new Date('2026-01-01T00:00:05.250Z');

const RUN: RunWithAttempts = {
  runId: 'r1',
  tenantId: 'acme',
  jobId: 'nightly',
  scheduledFor: T1,
  state: 'dead',
  attempt: 2,
  maxAttempts: 2,
  handler: 'report',
  payload: { a: [1] },
  pool: 'default',
  priority: 5,
  availableAt: T1,
  leaseOwner: null,
  leaseExpiresAt: null,
  lastError: 'boom',
  createdAt: T1,
  startedAt: T2,
  claimedAt: T1,
  finishedAt: T2,
  attempts: [
    {
      attempt: 1,
      workerId: 'w1',
      startedAt: T1,
      claimedAt: null,
      finishedAt: T2,
      outcome: 'failed',
      error: 'boom',
      errorStack: 'Error: boom',
      output: null,
      progress: 40,
      progressMessage: 'two of five',
      logs: ['a', 'b'],
      logsDropped: 3,
      reportedAt: T2,
    },
  ],
};

describe('the answer schemas derived from the tables', () => {
  it.each(TABLES)(
    '%s: every field in order, its type, nullability and description',
    (_name, fields, schema) => {
      const entries = Object.values(fields) as AnswerField[];
      expect(Object.keys(schema.properties)).toEqual(entries.map((f) => f.api));
      expect(schema.required).toEqual(entries.map((f) => f.api));
      for (const f of entries) {
        const s = schema.properties[f.api];
        const alternatives: Json[] = s.anyOf ?? [s];
        expect(
          alternatives.some((a) => a.type === 'null'),
          f.api,
        ).toBe(Boolean(f.nullable));
        const value = alternatives.find((a) => a.type !== 'null');
        expect(value.description, f.api).toBe(f.answerDescription);
        const type = {
          integer: 'integer',
          number: 'number',
          boolean: 'boolean',
          json: undefined,
          strings: 'array',
        } as Record<string, string | undefined>;
        expect(value.type, f.api).toBe(f.type in type ? type[f.type] : 'string');
        expect(value.format, f.api).toBe(f.type === 'instant' ? 'date-time' : undefined);
      }
    },
  );
});

describe('answerOf and the present functions', () => {
  it('map a run and its attempts field by field, instants as ISO strings', () => {
    expect(runWithAttemptsJson(RUN)).toEqual({
      run_id: 'r1',
      job_id: 'nightly',
      scheduled_for: '2026-01-01T00:00:00.000Z',
      state: 'dead',
      attempt: 2,
      max_attempts: 2,
      handler: 'report',
      payload: { a: [1] },
      pool: 'default',
      priority: 5,
      available_at: '2026-01-01T00:00:00.000Z',
      lease_owner: null,
      lease_expires_at: null,
      last_error: 'boom',
      created_at: '2026-01-01T00:00:00.000Z',
      started_at: '2026-01-01T00:00:05.250Z',
      claimed_at: '2026-01-01T00:00:00.000Z',
      finished_at: '2026-01-01T00:00:05.250Z',
      waiting_for: null,
      // The latest attempt's.
      progress: 40,
      progress_message: 'two of five',
      attempts: [
        {
          attempt: 1,
          worker_id: 'w1',
          started_at: '2026-01-01T00:00:00.000Z',
          claimed_at: null,
          finished_at: '2026-01-01T00:00:05.250Z',
          outcome: 'failed',
          error: 'boom',
          error_stack: 'Error: boom',
          output: null,
          progress: 40,
          progress_message: 'two of five',
          logs: ['a', 'b'],
          logs_dropped: 3,
          reported_at: '2026-01-01T00:00:05.250Z',
        },
      ],
    });
  });

  it('map a leased run, its timeout in seconds', () => {
    const claimed = {
      runId: 'r1',
      tenantId: 'acme',
      jobId: 'nightly',
      handler: 'report',
      payload: [1],
      pool: 'gpu',
      scheduledFor: T1,
      attempt: 1,
      maxAttempts: 3,
      leaseToken: 'tok',
      leaseExpiresAt: T2,
      availableAt: T1,
      timeoutMs: 1500,
      createdAt: T1,
    };
    expect(leasedRunJson(claimed)).toEqual({
      run_id: 'r1',
      tenant_id: 'acme',
      job_id: 'nightly',
      handler: 'report',
      payload: [1],
      scheduled_for: '2026-01-01T00:00:00.000Z',
      attempt: 1,
      lease_token: 'tok',
      lease_expires_at: '2026-01-01T00:00:05.250Z',
      pool: 'gpu',
      max_attempts: 3,
      available_at: '2026-01-01T00:00:00.000Z',
      timeout_seconds: 1.5,
    });
    expect(leasedRunJson({ ...claimed, timeoutMs: null }).timeout_seconds).toBeNull();
  });

  it('map a key without anything the table does not name', () => {
    const key: ApiKey & { hash: string } = {
      keyId: 'k1',
      tenantId: 'acme',
      role: 'reader',
      name: 'ci',
      createdAt: T1,
      revokedAt: null,
      hash: 'secret',
    };
    expect(keyJson(key)).toEqual({
      key_id: 'k1',
      tenant_id: 'acme',
      role: 'reader',
      name: 'ci',
      created_at: '2026-01-01T00:00:00.000Z',
      revoked_at: null,
    });
    expect(answerOf(API_KEY_FIELDS, { ...key, revokedAt: T2 }).revoked_at).toBe('2026-01-01T00:00:05.250Z');
  });

  it('map a job: its definition from JOB_FIELDS, then what it is doing', () => {
    const job: Job = {
      tenantId: 'acme',
      jobId: 'nightly',
      handler: 'report',
      payload: {},
      payloadSchema: null,
      retention: null,
      schedule: '0 3 * * *',
      timezone: 'UTC',
      priority: 0,
      maxAttempts: 3,
      backoffBaseSeconds: 2,
      backoffCapSeconds: 3600,
      misfire: 'fire_once',
      catchUpLimit: 10,
      pool: 'default',
      leaseSeconds: null,
      jitterSeconds: 0,
      timeoutSeconds: 30,
      misfireThresholdSeconds: null,
      misfireAfterSeconds: 60,
      overlap: 'allow',
      maxConcurrency: null,
      limits: [],
      enabled: false,
      shardId: 3,
      nextRunAt: T2,
      version: 2,
      createdAt: T1,
      updatedAt: T2,
    };
    const answer = jobJson(job);
    expect(Object.keys(answer)).toEqual([
      ...Object.values(JOB_FIELDS).map((f) => f.api),
      'misfire_after_seconds',
      'enabled',
      'state',
      'next_run_at',
      'version',
      'created_at',
      'updated_at',
    ]);
    expect(answer).toMatchObject({
      timeout_seconds: 30,
      misfire_after_seconds: 60,
      state: 'paused',
      next_run_at: null,
    });
  });
});

/** The client's types as they were written by hand before they were derived (documentation left out). */
declare namespace Before {
  interface JobBody {
    schedule: string;
    timezone?: string;
    handler: string;
    payload?: unknown;
    payload_schema?: unknown;
    priority?: number;
    max_attempts?: number;
    backoff_base_seconds?: number;
    backoff_cap_seconds?: number;
    misfire?: 'skip' | 'fire_once' | 'catch_up';
    catch_up_limit?: number;
    pool?: string;
    lease_seconds?: number | null;
    jitter_seconds?: number;
    timeout_seconds?: number | null;
    misfire_threshold_seconds?: number | null;
    overlap?: 'allow' | 'skip' | 'queue';
    max_concurrency?: number | null;
    limits?: string[];
    retention?: unknown;
  }
  interface Job {
    job_id: string;
    schedule: string;
    timezone: string;
    handler: string;
    payload: unknown;
    payload_schema: unknown;
    priority: number;
    max_attempts: number;
    backoff_base_seconds: number;
    backoff_cap_seconds: number;
    misfire: string;
    catch_up_limit: number;
    misfire_threshold_seconds: number | null;
    overlap: string;
    max_concurrency: number | null;
    limits: string[];
    retention: unknown;
    misfire_after_seconds: number;
    pool: string;
    lease_seconds: number | null;
    jitter_seconds: number;
    timeout_seconds: number | null;
    enabled: boolean;
    state: Api.JobState;
    next_run_at: string | null;
    version: number;
    created_at: string;
    updated_at: string;
  }
  interface Attempt {
    attempt: number;
    worker_id: string;
    started_at: string;
    claimed_at: string | null;
    finished_at: string | null;
    outcome: string | null;
    error: string | null;
    error_stack: string | null;
    output: string | null;
    progress: number | null;
    progress_message: string | null;
    logs: string[];
    logs_dropped: number;
    reported_at: string | null;
  }
  interface Run {
    run_id: string;
    job_id: string;
    scheduled_for: string;
    state: RunState;
    attempt: number;
    max_attempts: number;
    handler: string;
    payload: unknown;
    pool: string;
    priority: number;
    available_at: string;
    lease_owner: string | null;
    lease_expires_at: string | null;
    last_error: string | null;
    created_at: string;
    started_at: string | null;
    claimed_at: string | null;
    finished_at: string | null;
  }
  interface LeasedRun {
    run_id: string;
    tenant_id: string;
    job_id: string;
    handler: string;
    payload: unknown;
    scheduled_for: string;
    attempt: number;
    lease_token: string;
    lease_expires_at: string;
    pool: string;
    max_attempts: number;
    available_at: string;
    timeout_seconds: number | null;
  }
  interface ApiKey {
    key_id: string;
    tenant_id: string;
    role: Role;
    name: string;
    created_at: string;
    revoked_at: string | null;
  }
}

/** A type's own members, as a plain object type (an interface that extends a mapped type, flattened). */
type Flat<T> = { [K in keyof T]: T[K] };

describe("the client's types, derived", () => {
  it('are what they were when written by hand', () => {
    expectTypeOf<Flat<Api.JobBody>>().toEqualTypeOf<Flat<Before.JobBody>>();
    expectTypeOf<Flat<Api.Job>>().toEqualTypeOf<Flat<Before.Job>>();
    expectTypeOf<Flat<Api.Attempt>>().toEqualTypeOf<Flat<Before.Attempt>>();
    expectTypeOf<Flat<Api.Run>>().toEqualTypeOf<Flat<Before.Run>>();
    expectTypeOf<Flat<Api.ApiKey>>().toEqualTypeOf<Flat<Before.ApiKey>>();
    expectTypeOf<Flat<Api.LeasedRun>>().toEqualTypeOf<Flat<Before.LeasedRun>>();
    expectTypeOf<Flat<Api.RunWithAttempts['attempts'][number]>>().toEqualTypeOf<Flat<Before.Attempt>>();
  });

  it("agree with the answer schemas' static types (the schema is looser where the client names values)", () => {
    expectTypeOf<Static<typeof S.Attempt>>().toEqualTypeOf<Flat<Api.Attempt>>();
    expectTypeOf<Static<typeof S.LeasedRun>>().toEqualTypeOf<Flat<Api.LeasedRun>>();
    expectTypeOf<Static<typeof S.Run>>().toEqualTypeOf<Flat<Omit<Api.Run, 'state'> & { state: string }>>();
    expectTypeOf<Static<typeof S.ApiKey>>().toEqualTypeOf<
      Flat<Omit<Api.ApiKey, 'role'> & { role: string }>
    >();
  });
});
