import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/errors.js';
import {
  checkPayload,
  definitionHash,
  type JobInput,
  type JobSpec,
  jobInputFromApi,
  jobInputToApi,
  MAX_PAYLOAD_BYTES,
  shardOf,
  validateId,
  validateJob,
} from '../../src/core/job.js';

const BASE: JobInput = { jobId: 'nightly-report', schedule: '0 3 * * *', handler: 'report' };

function jobError(input: unknown): ValidationError {
  try {
    validateJob(input as JobInput);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error(`validateJob(${JSON.stringify(input)?.slice(0, 80)}) did not throw`);
}

describe('validateJob', () => {
  it('applies the defaults', () => {
    const { spec, schedule } = validateJob(BASE);
    expect(spec).toEqual({
      jobId: 'nightly-report',
      schedule: '0 3 * * *',
      timezone: 'UTC',
      handler: 'report',
      payload: {},
      priority: 0,
      maxAttempts: 3,
      backoffBaseSeconds: 2,
      backoffCapSeconds: 3600,
      misfire: 'fire_once',
      catchUpLimit: 10,
      misfireThresholdSeconds: null,
      pool: 'default',
      leaseSeconds: null,
      jitterSeconds: 0,
      timeoutSeconds: null,
      overlap: 'allow',
      maxConcurrency: null,
      limits: [],
      payloadSchema: null,
      retention: null,
    } satisfies JobSpec);
    expect(schedule.kind).toBe('cron');
  });

  it('keeps every field that is given', () => {
    const input: JobInput = {
      jobId: 'tenant.a:job_1',
      schedule: '  @every 5m ',
      timezone: 'Europe/Berlin',
      handler: 'sync',
      payload: { list: [1, 'two', null], nested: { ok: true } },
      priority: 100,
      maxAttempts: 1,
      backoffBaseSeconds: 1.5,
      backoffCapSeconds: 604_800,
      misfire: 'catch_up',
      catchUpLimit: 1000,
      misfireThresholdSeconds: 86_400,
      pool: 'gpu',
      leaseSeconds: 86_400,
      jitterSeconds: 86_400,
      timeoutSeconds: 86_400,
      overlap: 'queue',
      maxConcurrency: 1,
      limits: ['payments-api', 'tenant.db'],
      payloadSchema: { type: 'object', properties: { list: { type: 'array' } }, required: ['list'] },
      retention: { succeeded: '1d', dead: 'forever' },
    };
    const { spec, schedule } = validateJob(input);
    expect(spec).toEqual({ ...input, schedule: '@every 5m' });
    expect(schedule).toEqual({ kind: 'every', source: '@every 5m', everyMs: 300_000 });
    expect(validateJob({ ...BASE, leaseSeconds: null }).spec.leaseSeconds).toBeNull();
  });

  it('stores a copy of the payload, not the caller object', () => {
    const payload = { a: 1 };
    const { spec } = validateJob({ ...BASE, payload });
    payload.a = 2;
    expect(spec.payload).toEqual({ a: 1 });
  });

  it.each<[string, Partial<Record<keyof JobInput | 'bogus', unknown>>, string]>([
    ['maxAttempts 0', { maxAttempts: 0 }, 'max_attempts'],
    ['maxAttempts 101', { maxAttempts: 101 }, 'max_attempts'],
    ['priority 101', { priority: 101 }, 'priority'],
    ['priority -1', { priority: -1 }, 'priority'],
    ['priority 1.5', { priority: 1.5 }, 'priority'],
    ['priority "3"', { priority: '3' }, 'priority'],
    ['priority NaN', { priority: Number.NaN }, 'priority'],
    ['job id with a space', { jobId: 'nightly report' }, 'job_id'],
    ['job id of 201 characters', { jobId: 'x'.repeat(201) }, 'job_id'],
    ['job id with unicode', { jobId: 'jöb' }, 'job_id'],
    ['empty job id', { jobId: '' }, 'job_id'],
    ['misfire "sometimes"', { misfire: 'sometimes' }, 'misfire'],
    ['timezone "Nope/Nope"', { timezone: 'Nope/Nope' }, 'timezone'],
    ['timezone 5', { timezone: 5 }, 'timezone'],
    ['catchUpLimit 0', { catchUpLimit: 0 }, 'catch_up_limit'],
    ['catchUpLimit 1001', { catchUpLimit: 1001 }, 'catch_up_limit'],
    ['leaseSeconds 0', { leaseSeconds: 0 }, 'lease_seconds'],
    ['misfireThresholdSeconds -1', { misfireThresholdSeconds: -1 }, 'misfire_threshold_seconds'],
    ['misfireThresholdSeconds 86401', { misfireThresholdSeconds: 86_401 }, 'misfire_threshold_seconds'],
    ['misfireThresholdSeconds 1.5', { misfireThresholdSeconds: 1.5 }, 'misfire_threshold_seconds'],
    ['backoffBaseSeconds 1', { backoffBaseSeconds: 1 }, 'backoff_base_seconds'],
    ['backoffCapSeconds Infinity', { backoffCapSeconds: Number.POSITIVE_INFINITY }, 'backoff_cap_seconds'],
    ['pool with a slash', { pool: 'a/b' }, 'pool'],
    ['empty handler', { handler: '' }, 'handler'],
    ['schedule not a string', { schedule: 5 }, 'schedule'],
    ['bad cron', { schedule: '61 * * * *' }, 'minute'],
    ['payload that is not JSON', { payload: 10n }, 'payload'],
  ])('rejects %s', (_name, override, field) => {
    const err = jobError({ ...BASE, ...override });
    expect(err.code).toBe('validation_error');
    expect(err.message).toContain(field);
  });

  it('rejects an unknown field and names it', () => {
    const err = jobError({ ...BASE, bogus: 1 });
    expect(err.code).toBe('validation_error');
    expect(err.message).toBe('unknown job field "bogus"');
    expect(err.details).toEqual({ field: 'bogus' });
    // snake_case spellings are not the TypeScript API.
    expect(jobError({ ...BASE, max_attempts: 5 }).message).toContain('max_attempts');
  });

  it('puts the snake_case field name in the details of a range error', () => {
    expect(jobError({ ...BASE, maxAttempts: 0 }).details).toEqual({ field: 'max_attempts' });
    expect(jobError({ ...BASE, jobId: 'a b' }).details).toEqual({ field: 'job_id' });
  });

  it('rejects something that is not an object', () => {
    expect(jobError(null).message).toBe('job must be an object');
    expect(jobError('job').message).toBe('job must be an object');
  });

  it('accepts a job id of exactly 200 allowed characters', () => {
    const jobId = `${'A-z0.9_:'.repeat(25)}`;
    expect(jobId).toHaveLength(200);
    expect(validateJob({ ...BASE, jobId }).spec.jobId).toBe(jobId);
  });

  it('refuses what jsonb cannot store and numbers JSON cannot carry, naming the path', () => {
    const cases: [unknown, string, RegExp][] = [
      [{ output: 'binary\u0000output' }, 'payload.output', /U\+0000/],
      [{ list: ['ok', { deep: 'a\uD800' }] }, 'payload.list[1].deep', /surrogate/],
      [{ 'k\u0000': 1 }, 'payload["k\\u0000"]', /a key/],
      [{ big: JSON.parse('1e309') }, 'payload.big', /not a finite number/],
      [[Number.NEGATIVE_INFINITY], 'payload[0]', /not a finite number/],
      ['\u0000', 'payload', /U\+0000/],
    ];
    for (const [payload, field, message] of cases) {
      const err = jobError({ ...BASE, payload });
      expect(err.details).toEqual({ field });
      expect(err.message).toMatch(message);
      expect(err.message.startsWith(field)).toBe(true);
    }
    // A well-formed pair is text like any other; a 30-digit integer is a double (documented).
    expect(validateJob({ ...BASE, payload: { e: '\uD83D\uDE00' } }).spec.payload).toEqual({
      e: '\uD83D\uDE00',
    });
  });

  it('limits the payload to 64 KiB of serialised UTF-8', () => {
    expect(MAX_PAYLOAD_BYTES).toBe(65_536);
    // A JSON string of n characters serialises to n + 2 bytes.
    expect(validateJob({ ...BASE, payload: 'x'.repeat(65_534) }).spec.payload).toHaveLength(65_534);
    const tooBig = jobError({ ...BASE, payload: 'x'.repeat(65_535) });
    expect(tooBig.message).toContain('payload');
    expect(tooBig.details).toEqual({ field: 'payload' });
    // Bytes, not characters: é is two bytes.
    expect(() => validateJob({ ...BASE, payload: 'é'.repeat(32_767) })).not.toThrow();
    expect(jobError({ ...BASE, payload: 'é'.repeat(32_768) }).message).toContain('payload');
    expect(jobError({ ...BASE, payload: { blob: 'x'.repeat(70_000) } }).message).toMatch(
      /payload is larger than 65536 bytes/,
    );
  });
});

describe('checkPayload', () => {
  /** The field of the ValidationError `value` is refused with. */
  const refusedAt = (value: unknown) => {
    try {
      checkPayload(value);
    } catch (err) {
      expect(err).toBeInstanceOf(ValidationError);
      return (err as ValidationError).details.field;
    }
    throw new Error('not refused');
  };

  it("accepts what a job's payload accepts, as a copy", () => {
    const given = { a: [1, 'two', null], b: { c: true } };
    const checked = checkPayload(given);
    expect(checked).toEqual(given);
    expect(checked).not.toBe(given);
    expect(checkPayload(null)).toBeNull();
    expect(checkPayload('x'.repeat(MAX_PAYLOAD_BYTES - 2))).toHaveLength(MAX_PAYLOAD_BYTES - 2);
  });

  it("refuses what a job's payload refuses, naming where", () => {
    expect(refusedAt('x'.repeat(MAX_PAYLOAD_BYTES - 1))).toBe('payload');
    expect(refusedAt({ a: ['ok', 'x\u0000'] })).toBe('payload.a[1]');
    expect(refusedAt({ '\uD800': 1 })).toBe('payload["\\ud800"]');
    expect(refusedAt([Number.NaN])).toBe('payload[0]');
    expect(refusedAt(() => 1)).toBe('payload');
    expect(refusedAt(undefined)).toBe('payload');
  });
});

describe('validateId', () => {
  it('accepts the allowed alphabet and rejects the rest', () => {
    expect(validateId('a.B_c:d-9', 'pool')).toBe('a.B_c:d-9');
    expect(() => validateId('a b', 'pool')).toThrow(/^pool must be 1-200 characters/);
    expect(() => validateId(42, 'tenant')).toThrow(ValidationError);
    expect(() => validateId('a\n', 'tenant')).toThrow(ValidationError);
  });

  it('rejects . and .. (URL path segments that fetch resolves) but not other dotted ids', () => {
    expect(() => validateId('.', 'job_id')).toThrow(/^job_id must be .*not \. or \.\./);
    expect(() => validateId('..', 'job_id')).toThrow(ValidationError);
    for (const id of ['...', '.a', 'a.', 'a..b', '..a']) expect(validateId(id, 'job_id')).toBe(id);
  });
});

describe('definitionHash', () => {
  const spec = (input: Partial<JobInput> = {}) => validateJob({ ...BASE, ...input }).spec;

  it('is equal for equal specs whatever the key order inside the payload', () => {
    const a = spec({ payload: { a: 1, b: { c: 2, d: [1, { x: 1, y: 2 }] }, e: null } });
    const b = spec({ payload: { e: null, b: { d: [1, { y: 2, x: 1 }], c: 2 }, a: 1 } });
    expect(definitionHash(a)).toBe(definitionHash(b));
    expect(definitionHash(a)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('does not depend on the key order of the spec itself', () => {
    const a = spec();
    const reordered = Object.fromEntries(Object.entries(a).reverse()) as unknown as JobSpec;
    expect(definitionHash(reordered)).toBe(definitionHash(a));
  });

  it('is the SHA-256 of the canonical JSON with sorted keys', () => {
    const canonical =
      '{"backoffBaseSeconds":2,"backoffCapSeconds":3600,"catchUpLimit":10,"handler":"report",' +
      '"jitterSeconds":0,"jobId":"nightly-report","leaseSeconds":null,"maxAttempts":3,"misfire":"fire_once",' +
      '"payload":{"a":[1,"x"],"b":true},"pool":"default","priority":0,"schedule":"0 3 * * *","timeoutSeconds":null,"timezone":"UTC"}';
    const expected = createHash('sha256').update(canonical).digest('hex');
    expect(definitionHash(spec({ payload: { b: true, a: [1, 'x'] } }))).toBe(expected);
  });

  it.each<[string, Partial<JobInput>]>([
    ['jobId', { jobId: 'other' }],
    ['schedule', { schedule: '0 4 * * *' }],
    ['timezone', { timezone: 'Europe/Berlin' }],
    ['handler', { handler: 'other' }],
    ['payload value', { payload: { a: 2 } }],
    ['payload key', { payload: { b: 1 } }],
    ['payload array order', { payload: { a: [2, 1] } }],
    ['payload type', { payload: { a: '1' } }],
    ['priority', { priority: 1 }],
    ['maxAttempts', { maxAttempts: 4 }],
    ['backoffBaseSeconds', { backoffBaseSeconds: 3 }],
    ['backoffCapSeconds', { backoffCapSeconds: 60 }],
    ['misfire', { misfire: 'skip' }],
    ['catchUpLimit', { catchUpLimit: 11 }],
    ['pool', { pool: 'other' }],
    ['leaseSeconds', { leaseSeconds: 30 }],
    ['jitterSeconds', { jitterSeconds: 30 }],
    ['timeoutSeconds', { timeoutSeconds: 30 }],
    ['misfireThresholdSeconds', { misfireThresholdSeconds: 60 }],
  ])('changes when %s differs', (_field, change) => {
    const base = spec({ payload: { a: 1 } });
    const changed = spec({ payload: { a: 1 }, ...change });
    expect(changed).not.toEqual(base);
    expect(definitionHash(changed)).not.toBe(definitionHash(base));
  });

  it('treats different payload arrays as different', () => {
    expect(definitionHash(spec({ payload: [1, 2] }))).not.toBe(definitionHash(spec({ payload: [2, 1] })));
  });
});

describe('shardOf', () => {
  /** FNV-1a, 32-bit, over bytes: an independent reference for ASCII keys. */
  function fnv1a(text: string): number {
    let h = 0x811c9dc5n;
    for (const byte of Buffer.from(text, 'utf8')) h = ((h ^ BigInt(byte)) * 0x01000193n) & 0xffff_ffffn;
    return Number(h);
  }

  it('the reference implementation matches the published FNV-1a vectors', () => {
    expect(fnv1a('')).toBe(0x811c9dc5);
    expect(fnv1a('a')).toBe(0xe40c292c);
    expect(fnv1a('foobar')).toBe(0xbf9cf968);
  });

  it('is FNV-1a of "tenant/job_id" modulo the shard count', () => {
    expect(shardOf('acme', 'nightly', 2 ** 32)).toBe(fnv1a('acme/nightly'));
    expect(shardOf('acme', 'nightly', 1024)).toBe(fnv1a('acme/nightly') % 1024);
    expect(shardOf('t', 'j', 16)).toBe(fnv1a('t/j') % 16);
  });

  it('is stable and within [0, shardCount)', () => {
    const id = fc.stringMatching(/^[A-Za-z0-9._:-]{1,200}$/);
    fc.assert(
      fc.property(id, id, fc.integer({ min: 1, max: 100_000 }), (tenant, jobId, shards) => {
        const shard = shardOf(tenant, jobId, shards);
        expect(Number.isInteger(shard)).toBe(true);
        expect(shard).toBeGreaterThanOrEqual(0);
        expect(shard).toBeLessThan(shards);
        expect(shardOf(tenant, jobId, shards)).toBe(shard);
        expect(shard).toBe(fnv1a(`${tenant}/${jobId}`) % shards);
      }),
      { numRuns: 500 },
    );
  });

  it('puts everything in shard 0 when there is one shard, and spreads keys over many', () => {
    expect(shardOf('acme', 'anything', 1)).toBe(0);
    const used = new Set<number>();
    for (let i = 0; i < 1_000; i++) used.add(shardOf('acme', `job-${i}`, 16));
    expect(used.size).toBe(16);
  });
});

describe('jobInputToApi', () => {
  it('is the inverse of jobInputFromApi and leaves unset fields out', () => {
    const api = {
      job_id: 'nightly',
      schedule: '0 3 * * *',
      timezone: 'Europe/Berlin',
      handler: 'report',
      payload: { a: [1, 2] },
      priority: 5,
      max_attempts: 4,
      backoff_base_seconds: 3,
      backoff_cap_seconds: 600,
      misfire: 'catch_up',
      catch_up_limit: 2,
      misfire_threshold_seconds: 300,
      pool: 'reports',
      lease_seconds: null,
      jitter_seconds: 30,
    };
    expect(jobInputToApi(jobInputFromApi(api))).toEqual(api);
    expect(jobInputToApi(BASE)).toEqual({
      job_id: 'nightly-report',
      schedule: '0 3 * * *',
      handler: 'report',
    });
    expect(jobInputToApi(BASE, { withId: false })).toEqual({ schedule: '0 3 * * *', handler: 'report' });
  });
});

describe('jobInputFromApi', () => {
  it('names an unknown field as it was given, even one Object.prototype has', () => {
    for (const key of ['toString', 'constructor', '__proto__', 'bogus']) {
      const body = JSON.parse(`{"schedule":"@daily","handler":"h",${JSON.stringify(key)}:1}`);
      expect(() => jobInputFromApi(body)).toThrow(`unknown job field "${key}"`);
    }
  });
});
