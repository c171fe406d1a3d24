/**
 * The HTTP API over real loopback HTTP: an app on the test database's store and FakeClock,
 * listening on a free port, API keys for every role of a tenant, a raw `fetch` wrapper, and a
 * digest of every table a request could change (for "bad input changes nothing" checks).
 */
import type pg from 'pg';
import { expect } from 'vitest';
import { ROLES, type Role } from '../../src/core/index.js';
import type { TestDatabase } from '../setup/database.js';

export { type Api, startApi } from '../setup/api.js';

export type RoleKeys = Record<Role, string> & { ids: Record<Role, string> };

/**
 * One key per role for `tenantId` (cluster-admin included), made directly in the store (as `tock
 * keys create` does; the API never makes a cluster-admin key).
 */
export async function keysFor(db: TestDatabase, tenantId: string): Promise<RoleKeys> {
  const secrets = {} as Record<Role, string>;
  const ids = {} as Record<Role, string>;
  for (const role of ROLES) {
    const { key, secret } = await db.store.createApiKey({
      tenantId,
      role,
      name: role,
      now: db.clock.nowMs(),
    });
    secrets[role] = secret;
    ids[role] = key.keyId;
  }
  return { ...secrets, ids };
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: a JSON answer of any shape; tests assert on it field by field
  json: any;
}

export interface CallOptions {
  /** Sent as `Authorization: Bearer <key>`. */
  key?: string;
  /** An object is sent as JSON; a string is sent raw, byte for byte. */
  body?: unknown;
  headers?: Record<string, string>;
}

/** One HTTP request; JSON bodies get `Content-Type: application/json` unless `headers` say otherwise. */
export async function call(base: string, method: string, path: string, o: CallOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (o.key !== undefined) headers.authorization = `Bearer ${o.key}`;
  let body: string | undefined;
  if (o.body !== undefined) {
    body = typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
    headers['content-type'] = 'application/json';
  }
  Object.assign(headers, o.headers ?? {});
  const res = await fetch(`${base}${path}`, { method, headers, body });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text === '' ? null : JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** A client bound to one server. */
export function client(base: string) {
  return (method: string, path: string, o: CallOptions = {}) => call(base, method, path, o);
}

/** Asserts an error answer: the status, and exactly the envelope `{error: {code, message[, run_id]}}`. */
export function expectError(a: Answer, status: number, code: string): void {
  expect(a.status, a.text).toBe(status);
  expect(a.headers.get('content-type') ?? '').toMatch(/^application\/json/);
  expect(Object.keys(a.json ?? {})).toEqual(['error']);
  expect(a.json.error.code).toBe(code);
  expect(typeof a.json.error.message).toBe('string');
  expect(a.json.error.message.length).toBeGreaterThan(0);
  for (const k of Object.keys(a.json.error)) expect(['code', 'message', 'run_id']).toContain(k);
}

/** The report fields of an attempt in an answer, when its handler reported nothing (`ctx.progress`, `ctx.log`). */
export const NO_REPORT_JSON = {
  progress: null,
  progress_message: null,
  logs: [],
  logs_dropped: 0,
  reported_at: null,
} as const;

/** The tables every API write touches. */
export const TABLES = [
  'jobs',
  'runs',
  'run_queue',
  'run_claims',
  'attempts',
  'attempt_progress',
  'api_keys',
  'idempotency_keys',
  'limits',
  'tenant_retention',
  'notifications',
  'notification_deliveries',
] as const;

/** One digest per table of every row's text: equal digests mean nothing was written. */
export async function snapshot(pool: pg.Pool): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const t of TABLES) {
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n, coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') AS h FROM ${t} t`,
    );
    out[t] = `${rows[0].n}:${rows[0].h}`;
  }
  return out;
}

/** Waits (real time, bounded) until `check` holds: for a request in flight to reach a state. */
export async function until(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/**
 * A job in its own pool, put by `key` through the API at `base`, and `n` triggered runs of it
 * (distinct slots a second apart, the last one second before `nowMs`), oldest first.
 */
export async function jobWithRuns(
  base: string,
  key: string,
  nowMs: number,
  p: { jobId: string; pool: string; n: number; extra?: Record<string, unknown> },
): Promise<string[]> {
  const http = client(base);
  const put = await http('PUT', `/v1/jobs/${p.jobId}`, {
    key,
    body: { schedule: '@every 1h', handler: `${p.jobId}-handler`, pool: p.pool, ...p.extra },
  });
  expect(put.status, put.text).toBe(200);
  const runIds: string[] = [];
  for (let i = 0; i < p.n; i++) {
    const a = await http('POST', `/v1/jobs/${p.jobId}/runs`, {
      key,
      body: { scheduled_for: new Date(nowMs - (p.n - i) * 1000).toISOString() },
    });
    expect(a.status, a.text).toBe(201);
    runIds.push(a.json.run_id);
  }
  return runIds;
}
