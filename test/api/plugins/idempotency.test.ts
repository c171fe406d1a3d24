import { describe, expect, it } from 'vitest';
import {
  type Answer,
  hashBody,
  IDEMPOTENCY_TTL_MS,
  type IdempotencyOptions,
  idempotent,
} from '../../../src/api/plugins/idempotency.js';
import { ConflictError, FakeClock, TockError, ValidationError } from '../../../src/core/index.js';
import type { IdempotentAnswer } from '../../../src/store/index.js';

/** The store's three idempotency calls over a map, with a record of each call. */
function fakeStore() {
  const rows = new Map<string, { requestHash: string; answer?: IdempotentAnswer }>();
  const calls: string[] = [];
  const id = (p: { tenantId: string; scope: string; key: string }) => `${p.tenantId}|${p.scope}|${p.key}`;
  const store: IdempotencyOptions['store'] = {
    async takeIdempotent(p) {
      calls.push(`take ${id(p)} ttl=${p.ttlMs}`);
      const row = rows.get(id(p));
      if (!row) {
        rows.set(id(p), { requestHash: p.requestHash });
        return { state: 'taken' };
      }
      return row.answer
        ? { state: 'done', answer: row.answer }
        : { state: 'in_progress', requestHash: row.requestHash };
    },
    async finishIdempotent(p) {
      calls.push(`finish ${id(p)} ${p.answer.status}`);
      rows.set(id(p), { requestHash: p.answer.requestHash, answer: p.answer });
    },
    async releaseIdempotent(p) {
      calls.push(`release ${id(p)}`);
      rows.delete(id(p));
    },
  };
  return { store, rows, calls };
}

const conflictAnswer = (err: unknown): Answer | null =>
  err instanceof ConflictError ? { status: 409, body: { error: { code: err.code } } } : null;

describe('idempotent', () => {
  it('without a key does the work every time and touches no store', async () => {
    const { store, calls } = fakeStore();
    let n = 0;
    const work = async () => ({ status: 201, body: { n: ++n } });
    const request = { tenantId: 't', scope: 's', header: undefined, body: {} };
    const o = { store, clock: new FakeClock(0) };
    expect(await idempotent(o, request, work, conflictAnswer)).toEqual({ status: 201, body: { n: 1 } });
    expect(await idempotent(o, request, work, conflictAnswer)).toEqual({ status: 201, body: { n: 2 } });
    expect(calls).toEqual([]);
  });

  it('with a key does the work once and replays its answer; the same key in another scope is another key', async () => {
    const { store, calls } = fakeStore();
    let n = 0;
    const work = async () => ({ status: 201, body: { n: ++n } });
    const o = { store, clock: new FakeClock(0) };
    const request = { tenantId: 't', scope: 'trigger:a', header: 'k', body: { x: 1 } };
    expect(await idempotent(o, request, work, conflictAnswer)).toEqual({ status: 201, body: { n: 1 } });
    expect(await idempotent(o, request, work, conflictAnswer)).toEqual({ status: 201, body: { n: 1 } });
    const elsewhere = { ...request, scope: 'trigger:b' };
    expect(await idempotent(o, elsewhere, work, conflictAnswer)).toEqual({ status: 201, body: { n: 2 } });
    expect(calls).toEqual([
      `take t|trigger:a|k ttl=${IDEMPOTENCY_TTL_MS}`,
      'finish t|trigger:a|k 201',
      `take t|trigger:a|k ttl=${IDEMPOTENCY_TTL_MS}`,
      `take t|trigger:b|k ttl=${IDEMPOTENCY_TTL_MS}`,
      'finish t|trigger:b|k 201',
    ]);
  });

  it('refuses the same key with another body (422) and while its first request is served (409)', async () => {
    const { store, rows } = fakeStore();
    const o = { store, clock: new FakeClock(0) };
    const request = { tenantId: 't', scope: 's', header: 'k', body: { x: 1 } };
    await idempotent(o, request, async () => ({ status: 201, body: {} }), conflictAnswer);
    const mismatch = idempotent(
      o,
      { ...request, body: { x: 2 } },
      async () => ({ status: 201, body: {} }),
      conflictAnswer,
    );
    await expect(mismatch).rejects.toMatchObject({ code: 'idempotency_mismatch' });
    await expect(mismatch).rejects.toBeInstanceOf(TockError);
    rows.set('t|s|busy', { requestHash: hashBody({ x: 1 }) });
    const busy = idempotent(
      o,
      { ...request, header: 'busy' },
      async () => ({ status: 201, body: {} }),
      conflictAnswer,
    );
    await expect(busy).rejects.toBeInstanceOf(ConflictError);
  });

  it('remembers a lasting failure as the answer; frees the key after any other', async () => {
    const { store, calls } = fakeStore();
    const o = { store, clock: new FakeClock(0) };
    const request = { tenantId: 't', scope: 's', header: 'k1', body: {} };
    const conflict = async (): Promise<Answer> => {
      throw new ConflictError('taken');
    };
    expect(await idempotent(o, request, conflict, conflictAnswer)).toEqual({
      status: 409,
      body: { error: { code: 'conflict' } },
    });
    const fault = new Error('boom');
    const failing = async (): Promise<Answer> => {
      throw fault;
    };
    await expect(idempotent(o, { ...request, header: 'k2' }, failing, conflictAnswer)).rejects.toBe(fault);
    // The freed key does the work on a retry.
    const retried = await idempotent(
      o,
      { ...request, header: 'k2' },
      async () => ({ status: 201, body: 1 }),
      conflictAnswer,
    );
    expect(retried).toEqual({ status: 201, body: 1 });
    expect(calls.filter((c) => !c.startsWith('take'))).toEqual([
      'finish t|s|k1 409',
      'release t|s|k2',
      'finish t|s|k2 201',
    ]);
  });

  it('refuses a key that is not 1-200 visible ASCII characters before touching the store', async () => {
    const { store, calls } = fakeStore();
    const o = { store, clock: new FakeClock(0) };
    for (const header of ['', 'a b', 'é', 'x'.repeat(201), ['a', 'b']]) {
      const r = idempotent(
        o,
        { tenantId: 't', scope: 's', header, body: {} },
        async () => ({ status: 201, body: {} }),
        conflictAnswer,
      );
      await expect(r).rejects.toBeInstanceOf(ValidationError);
    }
    expect(calls).toEqual([]);
  });
});
