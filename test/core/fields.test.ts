/**
 * The job's field table (`JOB_FIELDS`) and what is derived from it agree: the API's TypeBox
 * schemas (request body and answer), validation and defaults (`validateJob`), the API-name mapping,
 * the client's types, the store's column list (`JOB_COLUMNS`) and the migrated schema
 * (`migrations/schema.txt`). No database.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Static } from 'typebox';
import { Value } from 'typebox/value';
import { describe, expect, expectTypeOf, it } from 'vitest';
import * as S from '../../src/api/schemas.js';
import type * as Api from '../../src/client/types.js';
import {
  definitionHash,
  type Field,
  ID_PATTERN,
  JOB_COLUMNS,
  JOB_FIELDS,
  type JobField,
  type JobInput,
  type JobSpec,
  jobInputFromApi,
  jobInputToApi,
  jobSpecToApi,
  ValidationError,
  validateJob,
} from '../../src/core/index.js';

// biome-ignore lint/suspicious/noExplicitAny: TypeBox schemas are read here as the JSON they are
type Json = any;

const ENTRIES = Object.entries(JOB_FIELDS) as [JobField, Field][];
const BASE: JobInput = { jobId: 'nightly', schedule: '0 3 * * *', handler: 'report' };
const BULK_ITEM: Json = (S.BulkJobsBody as Json).properties.jobs.items;

/** The schema of a property without its `null` alternative. */
function nonNull(schema: Json): Json {
  if (!schema.anyOf) return schema;
  const rest = schema.anyOf.filter((s: Json) => s.type !== 'null');
  return rest.length === 1 ? rest[0] : { anyOf: rest };
}
const allowsNull = (schema: Json) => Boolean(schema.anyOf?.some((s: Json) => s.type === 'null'));

function refusal(property: JobField, value: unknown): ValidationError {
  try {
    validateJob({ ...BASE, [property]: value });
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error(`${property} = ${JSON.stringify(value)} was accepted`);
}

/** Values just outside a field's bounds (or of the wrong kind), and values just inside. */
function outsideAndInside(f: Field): { outside: unknown[]; inside: unknown[] } {
  switch (f.type) {
    case 'integer':
      return {
        outside: [(f.min as number) - 1, (f.max as number) + 1, (f.min as number) + 0.5, String(f.min)],
        inside: [f.min, f.max],
      };
    case 'number':
      return {
        outside: [(f.min as number) - 0.01, (f.max as number) + 0.01, String(f.min)],
        inside: [f.min, f.max],
      };
    case 'id':
      return { outside: ['a b', 'x'.repeat(201), '..', 5], inside: ['a', 'x'.repeat(200)] };
    case 'enum':
      return { outside: ['bogus', 5], inside: [...(f.values ?? [])] };
    case 'string':
      return { outside: [5], inside: [] };
    case 'json':
      // A payload schema is a JSON Schema object: the largest one allowed, 34 bytes of frame.
      if (f.api === 'retention')
        return {
          outside: ['x'.repeat(f.maxBytes as number), 10n, { bogus: '1d' }, { succeeded: '1 day' }, ['7d']],
          inside: [
            { succeeded: '7d' },
            { succeeded: 'forever', dead: '366d', cancelled: '1s', skipped: '1h' },
          ],
        };
      return f.api === 'payload_schema'
        ? {
            outside: ['x'.repeat(f.maxBytes as number), 10n, 'not a schema', { type: 'nonsense' }],
            inside: [{ type: 'object', description: 'x'.repeat((f.maxBytes as number) - 34) }],
          }
        : {
            outside: ['x'.repeat(f.maxBytes as number), 10n],
            inside: ['x'.repeat((f.maxBytes as number) - 2)],
          };
    case 'ids': {
      const full = Array.from({ length: f.maxItems as number }, (_, i) => `k${i}`);
      return { outside: ['a', [...full, 'one-more'], ['a', 'a'], ['a b'], [5]], inside: [[], full] };
    }
  }
}

describe('JOB_FIELDS', () => {
  it('names every field once, in snake_case, with a column of the same name', () => {
    const apis = ENTRIES.map(([, f]) => f.api);
    expect(new Set(apis).size).toBe(apis.length);
    for (const [property, f] of ENTRIES) {
      expect(f.api).toMatch(/^[a-z]+(_[a-z]+)*$/);
      expect(f.api.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase())).toBe(property);
      expect(f.column).toBe(f.api);
      if (f.type === 'integer' || f.type === 'number') expect(f.min).toBeLessThanOrEqual(f.max as number);
    }
  });
});

describe('the API schemas derived from JOB_FIELDS', () => {
  it('the request body has every field but job_id (in the path), with its type, bounds and description', () => {
    const body: Json = S.JobBody;
    expect(Object.keys(body.properties)).toEqual(ENTRIES.map(([, f]) => f.api).filter((a) => a !== 'job_id'));
    expect(Object.keys(BULK_ITEM.properties)).toEqual(ENTRIES.map(([, f]) => f.api));
    expect(body.additionalProperties).toBe(false);
    expect(BULK_ITEM.additionalProperties).toBe(false);
    for (const [, f] of ENTRIES) {
      const schema = BULK_ITEM.properties[f.api];
      if (f.api !== 'job_id') expect(body.properties[f.api]).toEqual(schema);
      // Required exactly when the table gives no default.
      expect(BULK_ITEM.required.includes(f.api), f.api).toBe(!('default' in f));
      expect(allowsNull(schema), f.api).toBe(Boolean(f.nullable));
      const s = nonNull(schema);
      expect(s.description, f.api).toBe(f.description);
      if (f.type === 'integer' || f.type === 'number') {
        expect(s.type, f.api).toBe(f.type);
        expect([s.minimum, s.maximum], f.api).toEqual([f.min, f.max]);
      }
      if (f.type === 'id') expect([s.type, s.pattern, s.maxLength]).toEqual(['string', ID_PATTERN, 200]);
      if (f.type === 'string')
        expect([s.type, s.minLength, s.maxLength]).toEqual(['string', f.minLength, f.maxLength]);
      if (f.type === 'enum') expect(s.anyOf.map((l: Json) => l.const)).toEqual(f.values);
    }
  });

  it('the body schema refuses a value just outside each bound and takes one just inside', () => {
    for (const [property, f] of ENTRIES) {
      const { outside, inside } = outsideAndInside(f);
      const body = (value: unknown) => ({ ...jobInputToApi(BASE), [f.api]: value });
      for (const value of outside) {
        if (f.type === 'json') continue; // any JSON value: the size and text are checked by validateJob
        expect(Value.Check(BULK_ITEM, body(value)), `${property} = ${value}`).toBe(false);
      }
      for (const value of inside)
        expect(Value.Check(BULK_ITEM, body(value)), `${property} = ${value}`).toBe(true);
      expect(Value.Check(BULK_ITEM, body(null)), `${property} = null`).toBe(
        Boolean(f.nullable) || f.type === 'json',
      );
      if (f.type === 'string') {
        // Lengths are the API's bounds only: validateJob reads the text (a schedule, a zone).
        expect(Value.Check(BULK_ITEM, body('x'.repeat((f.maxLength as number) + 1)))).toBe(false);
        expect(Value.Check(BULK_ITEM, body('x'.repeat((f.minLength as number) - 1)))).toBe(false);
      }
    }
    expect(Value.Check(BULK_ITEM, { ...jobInputToApi(BASE), bogus: 1 })).toBe(false);
  });

  it('the answer has every field, typed without bounds, then what the job is doing', () => {
    const job: Json = S.Job;
    const names = Object.keys(job.properties);
    const definition = names.filter((n) => n !== 'misfire_after_seconds').slice(0, ENTRIES.length);
    expect(definition).toEqual(ENTRIES.map(([, f]) => f.api));
    for (const [, f] of ENTRIES) {
      const schema = job.properties[f.api];
      expect(job.required).toContain(f.api);
      expect(allowsNull(schema), f.api).toBe(Boolean(f.nullable));
      const s = nonNull(schema);
      expect(s.description, f.api).toBe(f.answerDescription);
      expect([s.minimum, s.maximum, s.pattern, s.anyOf], f.api).toEqual([
        undefined,
        undefined,
        undefined,
        undefined,
      ]);
      const types: Record<string, string | undefined> = {
        integer: 'integer',
        number: 'number',
        json: undefined,
        ids: 'array',
      };
      const type = f.type in types ? types[f.type] : 'string';
      expect(s.type, f.api).toBe(type);
    }
    expect(names.indexOf('misfire_after_seconds')).toBe(names.indexOf('misfire_threshold_seconds') + 1);
    expect(names.slice(ENTRIES.length + 1)).toEqual([
      'enabled',
      'state',
      'next_run_at',
      'version',
      'created_at',
      'updated_at',
    ]);
    expect(Object.keys((S.UpsertedJob as Json).properties)).toEqual([...names, 'change']);
  });

  it('gives routes and the client the same types, derived from the table', () => {
    expectTypeOf<Static<typeof S.JobBody>>().toEqualTypeOf<Omit<Api.JobBody, never>>();
    expectTypeOf<Api.JobBody['misfire']>().toEqualTypeOf<'skip' | 'fire_once' | 'catch_up' | undefined>();
    expectTypeOf<Api.JobBody['timeout_seconds']>().toEqualTypeOf<number | null | undefined>();
    expectTypeOf<Api.JobBody['handler']>().toEqualTypeOf<string>();
    expectTypeOf<Api.Job['misfire']>().toEqualTypeOf<string>();
    expectTypeOf<Api.Job['lease_seconds']>().toEqualTypeOf<number | null>();
    expectTypeOf<Static<typeof S.Job>['payload']>().toEqualTypeOf<unknown>();
    expectTypeOf<JobInput['priority']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<JobSpec['misfireThresholdSeconds']>().toEqualTypeOf<number | null>();
    expectTypeOf<keyof JobSpec>().toEqualTypeOf<JobField>();
  });
});

describe('validateJob, derived from JOB_FIELDS', () => {
  it('gives every omitted field its default and refuses a missing required one, naming it', () => {
    const { spec } = validateJob(BASE);
    expect(Object.keys(spec)).toEqual(ENTRIES.map(([p]) => p));
    for (const [property, f] of ENTRIES) {
      if ('default' in f) {
        expect(spec[property], property).toEqual(f.default);
      } else {
        const { [property]: _, ...rest } = BASE;
        expect(() => validateJob(rest as JobInput), property).toThrow(f.api);
      }
    }
    // A JSON default is each spec's own copy.
    expect(validateJob(BASE).spec.payload).not.toBe(validateJob(BASE).spec.payload);
  });

  it('refuses a value just outside each bound with the field named, and takes one just inside', () => {
    for (const [property, f] of ENTRIES) {
      const { outside, inside } = outsideAndInside(f);
      for (const value of outside) {
        const err = refusal(property, value);
        expect(err.message, `${property} = ${value}`).toContain(f.api);
        // A list names the item when one item is bad (`limits[0]`), a retention the state (`retention.dead`).
        expect(String(err.details.field).replace(/(\[\d+\]|\.[a-z]+)$/, ''), `${property} = ${value}`).toBe(
          f.api,
        );
      }
      for (const value of inside) {
        expect(validateJob({ ...BASE, [property]: value }).spec[property], property).toEqual(value);
      }
      if (f.nullable) expect(validateJob({ ...BASE, [property]: null }).spec[property]).toBeNull();
      else if (f.type !== 'json') expect(refusal(property, null).details.field).toBe(f.api);
    }
  });

  it('says what the bounds are, as it always did', () => {
    expect(refusal('maxAttempts', 0).message).toBe('max_attempts must be an integer from 1 to 100');
    expect(refusal('backoffBaseSeconds', 1).message).toBe(
      'backoff_base_seconds must be a number from 1.1 to 60',
    );
    expect(refusal('misfire', 'never').message).toBe(
      'misfire "never" is not one of skip, fire_once, catch_up',
    );
    expect(refusal('misfire', 1).message).toBe('misfire must be a string');
    expect(refusal('timezone', null).message).toBe('timezone must be a string');
    expect(refusal('schedule', undefined).message).toBe('schedule must be a string');
    expect(refusal('payload', 'x'.repeat(70_000)).message).toBe('payload is larger than 65536 bytes');
  });

  it('checks fields in the order it always has: the first bad one is named', () => {
    const bad: Partial<Record<JobField, unknown>> = {
      jobId: 'a b',
      handler: 'a b',
      pool: 'a b',
      timezone: 5,
      schedule: 5,
      payload: 10n,
      misfire: 'never',
      leaseSeconds: 0,
      payloadSchema: 10n,
      priority: -1,
      maxAttempts: 0,
      backoffBaseSeconds: 0,
      backoffCapSeconds: 0,
      catchUpLimit: 0,
      misfireThresholdSeconds: -1,
      jitterSeconds: -1,
      timeoutSeconds: 0,
      overlap: 'never',
      maxConcurrency: 0,
      limits: 'x',
      retention: { running: '1d' },
    };
    const order = Object.keys(bad) as JobField[];
    expect(new Set(order)).toEqual(new Set(ENTRIES.map(([p]) => p)));
    const named: string[] = [];
    for (let i = 0; i < order.length; i++) {
      const input = { ...BASE, ...Object.fromEntries(order.slice(i).map((p) => [p, bad[p]])) };
      try {
        validateJob(input as JobInput);
        named.push('(none)');
      } catch (err) {
        named.push(String((err as ValidationError).details.field).replace(/\.[a-z]+$/, ''));
      }
    }
    expect(named).toEqual(order.map((p) => JOB_FIELDS[p].api));
  });

  it('maps every field between the API and TypeScript names', () => {
    const { spec } = validateJob({ ...BASE, payload: { a: 1 }, leaseSeconds: 30 });
    const api = jobSpecToApi(spec);
    expect(Object.keys(api)).toEqual(ENTRIES.map(([, f]) => f.api));
    expect(validateJob(jobInputFromApi(api)).spec).toEqual(spec);
    expect(jobInputToApi(spec)).toEqual(api);
  });

  it('leaves a field added later out of the digest while it has its default', () => {
    for (const [property, f] of ENTRIES) {
      const { spec } = validateJob(BASE);
      const without = Object.fromEntries(Object.entries(spec).filter(([p]) => p !== property)) as JobSpec;
      const same = definitionHash(without) === definitionHash(spec);
      expect(same, property).toBe(Boolean(f.hashedOnlyWhenSet));
    }
  });
});

describe('JOB_COLUMNS, derived from JOB_FIELDS', () => {
  /** `table jobs` of the committed schema description: column → its type and nullability. */
  function migratedColumns(): Map<string, string> {
    const text = readFileSync(path.join(import.meta.dirname, '../../migrations/schema.txt'), 'utf8');
    const lines = text.split('\n');
    const start = lines.indexOf('table jobs');
    const out = new Map<string, string>();
    for (const line of lines.slice(start + 1)) {
      if (!line.startsWith('  ')) break;
      const [, name, rest] = /^ {2}(\S+) (.*)$/.exec(line) ?? [];
      out.set(name as string, rest as string);
    }
    return out;
  }

  it('lists every field once, in the table order, with its value from a spec', () => {
    expect(JOB_COLUMNS.map((c) => c.column)).toEqual(ENTRIES.map(([, f]) => f.column));
    const { spec } = validateJob({ ...BASE, payload: { a: [1, 'x'] }, timeoutSeconds: 30 });
    for (const [i, [property, f]] of ENTRIES.entries()) {
      const column = JOB_COLUMNS[i];
      expect(column?.pgType).toBe(f.pgType);
      expect(column?.value(spec)).toEqual(
        f.type === 'json' ? JSON.stringify(spec[property]) : spec[property],
      );
    }
  });

  it('agrees with the migrated table: each column exists with its type, null only where nullable', () => {
    const migrated = migratedColumns();
    expect(migrated.size).toBeGreaterThan(ENTRIES.length);
    for (const [, f] of ENTRIES) {
      const declared = migrated.get(f.column);
      expect(declared, f.column).toBeDefined();
      // information_schema names every array type ARRAY.
      const pgType = f.pgType.endsWith('[]') ? 'ARRAY' : f.pgType;
      expect(declared?.startsWith(`${pgType} `) || declared === pgType, `${f.column}: ${declared}`).toBe(
        true,
      );
      expect(declared?.includes('not null'), f.column).toBe(!f.nullable);
    }
  });
});
