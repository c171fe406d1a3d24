/**
 * `defineJob`: what it upserts, what it serves, and the payload's type flowing into the handler.
 * The type assertions are checked by `tsc` (`npm run lint` compiles test/): a wrong field access
 * under `@ts-expect-error` that stopped being an error would fail the lint.
 */
import pino from 'pino';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { defineJob, type RunContext, Type } from '../../src/index.js';
import { isJobDefinition, servingDefinitions } from '../../src/worker/index.js';

const Mail = Type.Object({
  to: Type.String(),
  cc: Type.Optional(Type.Array(Type.String())),
  urgent: Type.Boolean(),
});

/** A run's context for a direct call of a served handler. */
function context(payload: unknown): RunContext {
  return {
    runId: '00000000-0000-4000-8000-000000000001',
    tenantId: 'default',
    jobId: 'mail',
    scheduledFor: new Date(0),
    attempt: 1,
    payload,
    signal: new AbortController().signal,
    logger: pino({ level: 'silent' }),
    extendLease: async () => new Date(0),
  } as RunContext;
}

describe('defineJob', () => {
  it("types the handler's payload from the schema", () => {
    defineJob({
      id: 'mail',
      schedule: '@every 1h',
      payload: Mail,
      defaultPayload: { to: 'ops@example.com', urgent: false },
      handler: async (ctx) => {
        expectTypeOf(ctx.payload).toEqualTypeOf<{ to: string; cc?: string[]; urgent: boolean }>();
        expectTypeOf(ctx.payload.to).toBeString();
        // @ts-expect-error: the schema has no `subject`
        ctx.payload.subject;
        // @ts-expect-error: `urgent` is a boolean
        ctx.payload.urgent.toUpperCase();
        expectTypeOf(ctx.attempt).toBeNumber();
      },
    });
    // Without a schema the payload is anything JSON: `unknown`.
    defineJob({
      id: 'any',
      schedule: '@every 1h',
      handler: (ctx) => expectTypeOf(ctx.payload).toBeUnknown(),
    });
    expect(() =>
      defineJob({
        id: 'typed-default',
        schedule: '@every 1h',
        payload: Mail,
        // @ts-expect-error: the default payload must be of the schema's type
        defaultPayload: { to: 5, urgent: false },
        handler: () => {},
      }),
    ).toThrow('payload.to');
  });

  it('makes the job to upsert: the handler named after the job, the schema as plain JSON', () => {
    const d = defineJob({
      id: 'mail',
      schedule: '@every 1h',
      timezone: 'Europe/Berlin',
      priority: 7,
      overlap: 'skip',
      payload: Mail,
      defaultPayload: { to: 'ops@example.com', urgent: false },
      handler: () => 'sent',
    });
    expect(isJobDefinition(d)).toBe(true);
    expect(d.handlerName).toBe('mail');
    expect(d.job).toEqual({
      jobId: 'mail',
      handler: 'mail',
      schedule: '@every 1h',
      timezone: 'Europe/Berlin',
      priority: 7,
      overlap: 'skip',
      payload: { to: 'ops@example.com', urgent: false },
      payloadSchema: JSON.parse(JSON.stringify(Mail)),
    });
    expect(Object.keys(d.job.payloadSchema as object)).toEqual(['type', 'required', 'properties']);
    const named = defineJob({ id: 'b', schedule: '@every 1h', handlerName: 'shared', handler: () => {} });
    expect(named.job.handler).toBe('shared');
    expect('payload' in named.job).toBe(false);
    expect(named.job.payloadSchema).toBeNull();
  });

  it('refuses a definition PUT /v1/jobs would refuse, naming the job', () => {
    expect(() => defineJob({ id: 'mail', schedule: '@every 1h', payload: Mail, handler: () => {} })).toThrow(
      'job "mail": payload.to does not match',
    );
    expect(() => defineJob({ id: 'bad', schedule: 'every day', handler: () => {} })).toThrow('job "bad": ');
    expect(() => defineJob({ id: 'a b', schedule: '@every 1h', handler: () => {} })).toThrow('handler');
    expect(() =>
      defineJob({ id: 'x', schedule: '@every 1h', handler: 'x' as unknown as () => void }),
    ).toThrow('handler must be a function');
  });

  it('serves a handler that checks each payload against its schema before calling yours', async () => {
    const seen: unknown[] = [];
    const d = defineJob({
      id: 'mail',
      schedule: '@every 1h',
      payload: Mail,
      defaultPayload: { to: 'a', urgent: true },
      handler: (ctx) => {
        seen.push(ctx.payload);
        return ctx.payload.to;
      },
    });
    expect(await d.handler(context({ to: 'b', urgent: false }))).toBe('b');
    expect(seen).toEqual([{ to: 'b', urgent: false }]);
    await expect(async () => d.handler(context({ to: 1, urgent: true }))).rejects.toMatchObject({
      code: 'permanent_failure',
      message: expect.stringContaining('job "mail" was defined with another payload schema: payload.to'),
    });
    expect(seen).toHaveLength(1);
  });
});

describe('servingDefinitions', () => {
  const a = defineJob({ id: 'a', schedule: '@every 1h', handler: () => 'a' });
  const b = defineJob({ id: 'b', schedule: '@every 1h', handler: () => 'b' });

  it('merges the definitions with handlers by name, each name once', () => {
    const plain = () => 'plain';
    const { jobs, handlers } = servingDefinitions([a, b], { plain });
    expect(jobs.map((j) => j.jobId)).toEqual(['a', 'b']);
    expect(Object.keys(handlers)).toEqual(['plain', 'a', 'b']);
    expect(handlers.plain).toBe(plain);
    expect(() => servingDefinitions([a], { a: plain })).toThrow(
      'handler "a" of job "a" is defined twice: also in handlers',
    );
    const shared = defineJob({ id: 'c', schedule: '@every 1h', handlerName: 'a', handler: () => {} });
    expect(() => servingDefinitions([a, shared])).toThrow('by another job');
    expect(() => servingDefinitions([a, a])).toThrow('job "a" is defined twice');
    expect(() => servingDefinitions([{ job: {} } as never])).toThrow('jobs[0] is not a job definition');
  });
});
