/**
 * Notification definitions and the retry decision, pure: what `validateNotification` accepts and
 * refuses (naming the field), `decideDelivery`'s backoff, attempt cap and age cap, and where the
 * next claim of deliveries starts its turn (`nextDeliveryTurn`).
 */
import { expect, test } from 'vitest';
import {
  DEFAULT_DELIVERY_POLICY,
  decideDelivery,
  nextDeliveryTurn,
  type TockError,
  validateNotification,
} from '../../src/core/index.js';

const ALLOW = ['https://hooks.example.com/'];
const URL_OK = 'https://hooks.example.com/tock';

function refusal(f: () => unknown): { field: unknown; message: string } {
  try {
    f();
  } catch (err) {
    const e = err as TockError;
    expect(e.code).toBe('validation_error');
    return { field: e.details?.field, message: e.message };
  }
  throw new Error('not refused');
}

test('a definition is checked and made canonical', () => {
  expect(
    validateNotification(
      { url: URL_OK, events: ['run.late', 'run.dead', 'run.dead'], lateAfter: '10m', secret: 's'.repeat(16) },
      ALLOW,
    ),
  ).toEqual({ url: URL_OK, events: ['run.dead', 'run.late'], lateAfterSeconds: 600, secret: 's'.repeat(16) });
  expect(validateNotification({ url: URL_OK, events: ['worker.lost'] }, ALLOW)).toEqual({
    url: URL_OK,
    events: ['worker.lost'],
    lateAfterSeconds: null,
    secret: null,
  });
});

test('each bad field is refused by name', () => {
  const ok = { url: URL_OK, events: ['run.dead'] };
  expect(
    refusal(() => validateNotification({ ...ok, url: 'https://evil.example.net/' }, ALLOW)),
  ).toMatchObject({
    field: 'url',
    message: expect.stringContaining("outside the server's notification allow-list"),
  });
  expect(refusal(() => validateNotification({ ...ok, url: 'https://hooks.example.com/x' }, [])).field).toBe(
    'url',
  );
  expect(
    refusal(() => validateNotification({ ...ok, url: 'https://u:p@hooks.example.com/' }, ALLOW)).field,
  ).toBe('url');
  expect(refusal(() => validateNotification({ ...ok, events: [] }, ALLOW)).field).toBe('events');
  expect(refusal(() => validateNotification({ ...ok, events: ['run.succeeded'] }, ALLOW)).field).toBe(
    'events',
  );
  expect(refusal(() => validateNotification({ ...ok, events: ['run.late'] }, ALLOW)).field).toBe(
    'late_after',
  );
  expect(refusal(() => validateNotification({ ...ok, lateAfter: '5m' }, ALLOW)).field).toBe('late_after');
  expect(
    refusal(() => validateNotification({ ...ok, events: ['run.late'], lateAfter: '500ms' }, ALLOW)).field,
  ).toBe('late_after');
  expect(refusal(() => validateNotification({ ...ok, secret: 'short' }, ALLOW)).field).toBe('secret');
  expect(refusal(() => validateNotification({ ...ok, secret: `${'s'.repeat(16)}\u0000` }, ALLOW)).field).toBe(
    'secret',
  );
  expect(refusal(() => validateNotification({ ...ok, secret: `${'s'.repeat(16)}\ud800` }, ALLOW)).field).toBe(
    'secret',
  );
});

test('a failed delivery backs off exponentially, then fails on its last attempt or past its age', () => {
  const policy = { ...DEFAULT_DELIVERY_POLICY, baseMs: 1000, capMs: 5000, maxAttempts: 5, maxAgeMs: 60_000 };
  const at = (attempt: number, status: number | null, now = 0) =>
    decideDelivery({ attempt, status, now, createdAt: 0, policy });
  expect(at(1, 204)).toEqual({ state: 'delivered', nextAttemptAt: null });
  expect(at(1, 500)).toEqual({ state: 'pending', nextAttemptAt: 1000 });
  expect(at(2, null)).toEqual({ state: 'pending', nextAttemptAt: 2000 });
  expect(at(3, 301)).toEqual({ state: 'pending', nextAttemptAt: 4000 });
  expect(at(4, 500)).toEqual({ state: 'pending', nextAttemptAt: 5000 });
  expect(at(5, 500)).toEqual({ state: 'failed', nextAttemptAt: null });
  expect(at(2, 500, 59_000)).toEqual({ state: 'failed', nextAttemptAt: null });
});

test('the next claim of deliveries goes on after the last notification served, after the walk cut off, or from the first', () => {
  const d = (name: string, step: number) => ({ tenantId: 't', name, step });
  const base = { walk: 10, lastWalked: { tenantId: 't', name: 'z' } };
  // Full: after the last notification served (by its place in the walk, not the order picked).
  expect(
    nextDeliveryTurn({ ...base, picked: [d('a', 1), d('c', 3), d('a', 1)], limit: 3, walked: 5 }),
  ).toEqual({
    tenantId: 't',
    name: 'c',
  });
  // Not full, the walk cut off at its bound: after the last notification looked at.
  expect(nextDeliveryTurn({ ...base, picked: [d('a', 1)], limit: 3, walked: 10 })).toEqual(base.lastWalked);
  // Not full, the walk reached the end: from the first.
  expect(nextDeliveryTurn({ ...base, picked: [d('a', 1)], limit: 3, walked: 4 })).toBeNull();
  expect(nextDeliveryTurn({ ...base, picked: [], limit: 3, walked: 0, lastWalked: null })).toBeNull();
});
