/**
 * The operational endpoints over real HTTP: the OpenAPI document (OpenAPI 3, every /v1 route with
 * its request and success schemas, valid by the OpenAPI schema), /healthz, /readyz (200, and 503
 * when readiness fails) and the Prometheus metrics.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, call, client, keysFor, type RoleKeys, startApi } from './helpers.js';

/** Every /v1 route of routes.ts: method, path (OpenAPI style), success status, whether it takes a body. */
const ROUTES: [string, string, number, boolean][] = [
  ['put', '/v1/jobs', 200, true],
  ['put', '/v1/jobs/{job_id}', 200, true],
  ['get', '/v1/jobs', 200, false],
  ['get', '/v1/jobs/{job_id}', 200, false],
  ['delete', '/v1/jobs/{job_id}', 204, false],
  ['post', '/v1/jobs/{job_id}/pause', 200, false],
  ['post', '/v1/jobs/{job_id}/resume', 200, false],
  ['post', '/v1/jobs/{job_id}/runs', 201, true],
  ['post', '/v1/jobs/{job_id}/backfill', 200, true],
  ['get', '/v1/jobs/{job_id}/runs', 200, false],
  ['get', '/v1/runs', 200, false],
  ['get', '/v1/schedule', 200, false],
  ['get', '/v1/delay', 200, false],
  ['get', '/v1/runs/{run_id}', 200, false],
  ['post', '/v1/runs/{run_id}/replay', 200, false],
  ['post', '/v1/runs/replay', 200, true],
  ['post', '/v1/runs/{run_id}/cancel', 200, false],
  ['get', '/v1/retention', 200, false],
  ['put', '/v1/retention', 200, true],
  ['post', '/v1/runs/prune', 200, true],
  ['post', '/v1/leases', 200, true],
  ['post', '/v1/runs/{run_id}/heartbeat', 200, true],
  ['post', '/v1/runs/{run_id}/release', 200, true],
  ['post', '/v1/workers/{worker_id}/heartbeat', 200, true],
  ['put', '/v1/workers/{worker_id}', 200, true],
  ['delete', '/v1/workers/{worker_id}', 204, false],
  ['post', '/v1/runs/complete', 200, true],
  ['post', '/v1/runs/{run_id}/complete', 200, true],
  ['put', '/v1/limits/{key}', 201, true],
  ['get', '/v1/limits', 200, false],
  ['get', '/v1/limits/{key}', 200, false],
  ['delete', '/v1/limits/{key}', 204, false],
  ['put', '/v1/notifications/{name}', 201, true],
  ['get', '/v1/notifications', 200, false],
  ['get', '/v1/notifications/{name}', 200, false],
  ['delete', '/v1/notifications/{name}', 204, false],
  ['get', '/v1/notifications/{name}/deliveries', 200, false],
  ['post', '/v1/keys', 201, true],
  ['get', '/v1/keys', 200, false],
  ['delete', '/v1/keys/{key_id}', 200, false],
  ['get', '/v1/whoami', 200, false],
  ['get', '/v1/status', 200, false],
];

/** Method and path of every route the server registered, from `printRoutes` (HEAD left out). */
function registeredRoutes(tree: string): string[] {
  const out: string[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^([│ ]*)[├└]── (\S+)(?: \(([^)]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    const path = (stack[depth - 1] ?? '') + m[2]!;
    stack.push(path);
    for (const method of (m[3] ?? '').split(', ').filter((x) => x !== '' && x !== 'HEAD')) {
      out.push(`${method.toLowerCase()} ${path}`);
    }
  }
  return out.sort();
}

// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is walked as plain JSON
type Doc = any;

let db: TestDatabase;
let api: Api;
let doc: Doc;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  const a = await call(api.base, 'GET', '/openapi.json');
  expect(a.status).toBe(200);
  expect(a.headers.get('content-type')).toMatch(/^application\/json/);
  doc = a.json;
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

describe('GET /openapi.json', () => {
  test('is an OpenAPI 3 document of Tock with bearer auth', () => {
    expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/);
    expect(doc.info.title).toBe('Tock');
    expect(doc.components.securitySchemes.bearer).toEqual({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ bearer: [] }]);
  });

  test('lists exactly the /v1 routes the server registered, and no operational route', () => {
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
      .flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method} ${path}`))
      .sort();
    const expected = ROUTES.map(([m, p]) => `${m} ${p}`).sort();
    expect(documented).toEqual(expected);
    const registered = registeredRoutes(api.app.printRoutes({ commonPrefix: false }));
    expect(registered.filter((r) => r.includes(' /v1/'))).toEqual(
      ROUTES.map(([m, p]) => `${m} ${p.replace(/\{(\w+)\}/g, ':$1')}`).sort(),
    );
    expect(registered.filter((r) => !r.includes(' /v1/'))).toEqual([
      'get /',
      'get /console/:file',
      'get /healthz',
      'get /metrics',
      'get /openapi.json',
      'get /readyz',
    ]);
  });

  test.each(ROUTES)('%s %s: request and %i response schemas', (method, path, success, hasBody) => {
    const op = doc.paths[path][method];
    expect(typeof op.summary).toBe('string');
    // Path parameters, each a required string with a length bound.
    const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    const declared = (op.parameters ?? []).filter((p: Doc) => p.in === 'path');
    expect(declared.map((p: Doc) => p.name)).toEqual(params);
    for (const p of declared) {
      expect(p.required).toBe(true);
      expect(p.schema.type).toBe('string');
      expect(p.schema.maxLength).toBeGreaterThan(0);
    }
    // A strict JSON body where the route takes one.
    if (hasBody) {
      const schema = op.requestBody.content['application/json'].schema;
      expect(schema.type).toBe('object');
      expect(schema.additionalProperties).toBe(false);
      expect(Object.keys(schema.properties).length).toBeGreaterThan(0);
    } else {
      expect(op.requestBody).toBeUndefined();
    }
    // The success answer: a JSON object schema, or no content for 204.
    const ok = op.responses[String(success)];
    expect(ok).toBeDefined();
    if (success === 204) {
      expect(ok.content).toBeUndefined();
    } else {
      const schema = ok.content['application/json'].schema;
      expect(schema.type).toBe('object');
      expect(Object.keys(schema.properties).length).toBeGreaterThan(0);
    }
    // Errors: the envelope.
    const err = op.responses['4XX'].content['application/json'].schema;
    expect(err.required).toEqual(['error']);
    expect(err.properties.error.required).toEqual(['code', 'message']);
  });

  test('documents the shapes of the contract', () => {
    const job = doc.paths['/v1/jobs/{job_id}'].put;
    expect(job.requestBody.content['application/json'].schema.required).toEqual(['schedule', 'handler']);
    expect(Object.keys(job.responses['200'].content['application/json'].schema.properties)).toContain(
      'change',
    );
    const list = doc.paths['/v1/jobs'].get;
    expect(list.parameters.map((p: Doc) => `${p.in}:${p.name}`).sort()).toEqual([
      'query:cursor',
      'query:handler',
      'query:limit',
      'query:pool',
      'query:q',
      'query:state',
    ]);
    expect(Object.keys(list.responses['200'].content['application/json'].schema.properties).sort()).toEqual([
      'jobs',
      'next_cursor',
    ]);
    const run = doc.paths['/v1/runs/{run_id}'].get.responses['200'].content['application/json'].schema;
    expect(Object.keys(run.properties)).toContain('attempts');
    const leased = doc.paths['/v1/leases'].post.responses['200'].content['application/json'].schema;
    expect(Object.keys(leased.properties.runs.items.properties).sort()).toEqual(
      [
        'attempt',
        'handler',
        'job_id',
        'lease_expires_at',
        'lease_token',
        'payload',
        'run_id',
        'scheduled_for',
        'tenant_id',
        'pool',
        'max_attempts',
        'available_at',
        'timeout_seconds',
      ].sort(),
    );
    const complete =
      doc.paths['/v1/runs/{run_id}/complete'].post.requestBody.content['application/json'].schema;
    expect(complete.required).toEqual(['lease_token', 'status']);
    const created = doc.paths['/v1/keys'].post.responses['201'].content['application/json'].schema;
    expect(Object.keys(created.properties)).toContain('key');
    const keys = doc.paths['/v1/keys'].get.responses['200'].content['application/json'].schema;
    expect(Object.keys(keys.properties.keys.items.properties)).not.toContain('key');
  });

  test('validates against the OpenAPI schema (and the validator rejects a broken copy)', async () => {
    const result = await new Validator().validate(structuredClone(doc));
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);

    const broken = structuredClone(doc);
    broken.paths['/v1/jobs'].get.responses = { '200': { content: {} } };
    const bad = await new Validator().validate(broken);
    expect(bad.valid).toBe(false);
  });
});

describe('health and readiness', () => {
  test('/healthz answers 200 without a key', async () => {
    const a = await call(api.base, 'GET', '/healthz');
    expect(a.status).toBe(200);
    expect(a.json).toEqual({ status: 'ok' });
  });

  test('/readyz answers 200 when the database answers and migrations are current', async () => {
    const a = await call(api.base, 'GET', '/readyz');
    expect(a.status).toBe(200);
    expect(a.json).toEqual({ status: 'ready', database: true, migrations: true });
  });

  test('/readyz answers 503 when migrations are not current, or readiness fails', async () => {
    const stale = await startApi(db, { readiness: async () => ({ database: true, migrations: false }) });
    const failing = await startApi(db, {
      readiness: async () => {
        throw new Error('connection refused');
      },
    });
    try {
      const a = await call(stale.base, 'GET', '/readyz');
      expect(a.status).toBe(503);
      expect(a.json).toEqual({ status: 'not ready', database: true, migrations: false });
      const b = await call(failing.base, 'GET', '/readyz');
      expect(b.status).toBe(503);
      expect(b.json).toEqual({ status: 'not ready', database: false, migrations: false });
      // Liveness does not depend on readiness.
      expect((await call(stale.base, 'GET', '/healthz')).status).toBe(200);
    } finally {
      await stale.close();
      await failing.close();
    }
  });
});

describe('GET /metrics', () => {
  let m: Api;
  let keys: RoleKeys;

  beforeAll(async () => {
    m = await startApi(db);
    keys = await keysFor(db, 'metered');
  });

  afterAll(async () => {
    await m?.close();
  });

  /** The value of one sample line, exactly as exposed. */
  function sample(text: string, series: string): number | undefined {
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? undefined : Number(line.slice(series.length + 1));
  }

  test('exposes the scheduling delay, runs by state and request durations by route and status', async () => {
    const http = client(m.base);
    const t = db.clock.nowMs();
    expect(
      (
        await http('PUT', '/v1/jobs/metered-job', {
          key: keys.operator,
          body: { schedule: '@every 1h', handler: 'h', pool: 'm-pool' },
        })
      ).status,
    ).toBe(200);
    // Two runs materialised 3 s ago that became claimable 2.5 s and 1 s ago; one more not yet
    // claimable. (Scheduling delay runs from the later of available_at and creation.)
    for (const ago of [2500, 1000]) {
      await db.store.triggerRun({
        tenantId: 'metered',
        jobId: 'metered-job',
        scheduledFor: t - ago,
        now: t - 3000,
      });
    }
    const later = await http('POST', '/v1/jobs/metered-job/runs', {
      key: keys.operator,
      body: { scheduled_for: new Date(t + 60_000).toISOString() },
    });
    expect(later.status).toBe(201);
    expect((await http('GET', '/v1/jobs/metered-job', { key: keys.reader })).status).toBe(200);
    expect((await http('GET', '/v1/jobs/metered-job', { key: keys.reader })).status).toBe(200);
    expect((await http('GET', '/v1/jobs/no-such-job', { key: keys.reader })).status).toBe(404);
    const leased = await http('POST', '/v1/leases', {
      key: keys.worker,
      body: { worker_id: 'w-m', pool: 'm-pool', max: 10 },
    });
    expect(leased.json.runs).toHaveLength(2);

    const a = await call(m.base, 'GET', '/metrics', { key: keys['cluster-admin'] });
    expect(a.status).toBe(200);
    expect(a.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = a.text;

    expect(text).toContain('# TYPE tock_scheduling_delay_seconds histogram');
    expect(sample(text, 'tock_scheduling_delay_seconds_count{pool="m-pool"}')).toBe(2);
    expect(sample(text, 'tock_scheduling_delay_seconds_sum{pool="m-pool"}')).toBe(3.5);
    expect(sample(text, 'tock_scheduling_delay_seconds_bucket{le="1",pool="m-pool"}')).toBe(1);
    expect(sample(text, 'tock_scheduling_delay_seconds_bucket{le="2.5",pool="m-pool"}')).toBe(2);
    expect(sample(text, 'tock_claims_total{pool="m-pool"}')).toBe(2);

    // Runs by state, sampled from the database at scrape time (every tenant of this schema).
    expect(text).toContain('# TYPE tock_runs gauge');
    const { rows } = await db.pool.query('SELECT state, count(*)::int AS n FROM run_states GROUP BY state');
    const counts = Object.fromEntries(rows.map((r) => [r.state as string, r.n as number]));
    expect(counts.running).toBeGreaterThanOrEqual(2);
    for (const state of ['pending', 'running', 'succeeded', 'dead', 'cancelled']) {
      expect(sample(text, `tock_runs{state="${state}"}`), state).toBe(counts[state] ?? 0);
    }

    // Request durations by method, route template (never the raw URL) and status.
    expect(text).toContain('# TYPE tock_http_request_duration_seconds histogram');
    const count = (method: string, route: string, status: number) =>
      sample(
        text,
        `tock_http_request_duration_seconds_count{method="${method}",route="${route}",status="${status}"}`,
      );
    expect(count('GET', '/v1/jobs/:job_id', 200)).toBe(2);
    expect(count('GET', '/v1/jobs/:job_id', 404)).toBe(1);
    expect(count('PUT', '/v1/jobs/:job_id', 200)).toBe(1);
    expect(count('POST', '/v1/jobs/:job_id/runs', 201)).toBe(1);
    expect(count('POST', '/v1/leases', 200)).toBe(1);
    expect(text).not.toContain('metered-job');
    expect(text).not.toContain('no-such-job');

    // The scrape itself is counted by the next scrape.
    // (Within the sampling interval: the gauges are the same sample, not read again.)
    const again = await call(m.base, 'GET', '/metrics', { key: keys['cluster-admin'] });
    expect(
      sample(
        again.text,
        'tock_http_request_duration_seconds_count{method="GET",route="/metrics",status="200"}',
      ),
    ).toBe(1);
  });
});
