import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/errors.js';
import { type JobInput, validateJob } from '../../src/core/job.js';
import { checkPayloadAgainst, checkPayloadSchema } from '../../src/core/payload-schema.js';

const BASE: JobInput = { jobId: 'mail', schedule: '@every 1m', handler: 'mail' };
const USER = Type.Object({
  user: Type.Object({ id: Type.Integer({ minimum: 1 }), email: Type.String({ format: 'email' }) }),
  tags: Type.Optional(Type.Array(Type.String())),
});
const schema = JSON.parse(JSON.stringify(USER)) as unknown;

function refusal(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error('did not throw');
}

describe('checkPayloadAgainst', () => {
  it('takes a payload that matches and names the failing path of one that does not', () => {
    checkPayloadAgainst(schema, { user: { id: 7, email: 'a@example.com' }, tags: ['x'] });
    const wrongType = refusal(() => checkPayloadAgainst(schema, { user: { id: 'seven', email: 'a@b.c' } }));
    expect(wrongType.details.field).toBe('payload.user.id');
    expect(wrongType.message).toBe(
      "payload.user.id does not match the job's payload_schema: must be integer",
    );
    const missing = refusal(() => checkPayloadAgainst(schema, { user: { id: 1 } }));
    expect(missing.details.field).toBe('payload.user.email');
    const item = refusal(() => checkPayloadAgainst(schema, { user: { id: 1, email: 'a@b.c' }, tags: [1] }));
    expect(item.details.field).toBe('payload.tags[0]');
    // Formats are checked (ajv-formats), and nothing is coerced.
    expect(refusal(() => checkPayloadAgainst(schema, { user: { id: 1, email: 'nope' } })).details.field).toBe(
      'payload.user.email',
    );
    expect(refusal(() => checkPayloadAgainst({ type: 'integer' }, '5')).details.field).toBe('payload');
    const odd = refusal(() =>
      checkPayloadAgainst({ type: 'object', properties: { 'a b': { type: 'string' } } }, { 'a b': 1 }),
    );
    expect(odd.details.field).toBe('payload["a b"]');
  });
});

describe('checkPayloadSchema', () => {
  it('refuses what is not a JSON Schema object, a remote $ref and $data, and takes local $refs', () => {
    for (const bad of ['x', [], 5, true, { type: 'nonsense' }, { minimum: 'one' }]) {
      const err = refusal(() => checkPayloadSchema(bad));
      expect(err.details.field, JSON.stringify(bad)).toBe('payload_schema');
    }
    const remote = refusal(() => checkPayloadSchema({ $ref: 'https://example.com/schema.json' }));
    expect(remote.message).toMatch(/^payload_schema is not a valid JSON Schema: .*example\.com/);
    // `$data` is off: the keyword's value must then be a number, as the meta-schema says.
    refusal(() => checkPayloadSchema({ properties: { a: { maximum: { $data: '1/b' } } } }));
    const local = {
      definitions: { id: { type: 'integer' } },
      type: 'object',
      properties: { a: { $ref: '#/definitions/id' } },
    };
    checkPayloadSchema(local);
    expect(refusal(() => checkPayloadAgainst(local, { a: 'x' })).details.field).toBe('payload.a');
  });

  it('lets two schemas share an $id: none is kept in the validator by it', () => {
    checkPayloadSchema({ $id: 'https://tock.example/p', type: 'string' });
    checkPayloadSchema({ $id: 'https://tock.example/p', type: 'integer' });
    checkPayloadAgainst({ $id: 'https://tock.example/p', type: 'integer' }, 5);
    refusal(() => checkPayloadAgainst({ $id: 'https://tock.example/p', type: 'string' }, 5));
  });
});

describe('validateJob with a payload schema', () => {
  it("refuses a definition whose own payload fails its schema, and keeps the schema's JSON", () => {
    const err = refusal(() => validateJob({ ...BASE, payloadSchema: schema }));
    // The job's default payload, `{}`, lacks `user`.
    expect(err.details.field).toBe('payload.user');
    const payload = { user: { id: 1, email: 'a@example.com' } };
    const { spec } = validateJob({ ...BASE, payload, payloadSchema: schema });
    expect(spec.payloadSchema).toEqual(schema);
    expect(spec.payloadSchema).not.toBe(schema);
    expect(refusal(() => validateJob({ ...BASE, payloadSchema: 'string' })).details.field).toBe(
      'payload_schema',
    );
    expect(validateJob({ ...BASE, payloadSchema: null }).spec.payloadSchema).toBeNull();
  });
});

describe('regular expressions', () => {
  it('a schema with pattern or patternProperties is refused: a backtracking pattern could stall the server for every tenant', () => {
    // (a+)+$ against 'aaaa…!' backtracks exponentially; compiled, one 64 KiB payload would hang the process.
    const evil = { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } };
    const refused = refusal(() => checkPayloadSchema(evil));
    expect(refused.details.field).toBe('payload_schema');
    expect(refused.message).toMatch(/"pattern" is not allowed/);
    expect(
      refusal(() => checkPayloadSchema(Type.Object({ s: Type.String({ pattern: '^x' }) }))).message,
    ).toMatch(/"pattern" is not allowed/);
    expect(
      refusal(() => checkPayloadSchema({ type: 'object', patternProperties: { '^(a+)+$': {} } })).message,
    ).toMatch(/"patternProperties" is not allowed/);
    // A property named "pattern" is a name, not the keyword.
    checkPayloadSchema({ type: 'object', properties: { pattern: { type: 'string' } } });
    checkPayloadAgainst(
      { type: 'object', properties: { pattern: { type: 'string' } } },
      { pattern: '(a+)+' },
    );
  });
});
