/**
 * `tock server`'s metrics, the real binary (built `dist/`): the API's `/metrics` needs a
 * cluster-admin key (401 without a key, 403 with a tenant admin's), and `--metrics-port` serves
 * the same metrics without a key on 127.0.0.1 only. `--metrics-top-jobs` and
 * `--metrics-job-window` reach the per-job gauges (their help says their bound).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { createPool, migrate, PostgresStore } from '../../src/store/index.js';
import { TockProcess } from '../setup/proc.js';

const url = inject('databaseUrl');
const schema = `e2e_${randomBytes(4).toString('hex')}`;
const keys = { admin: '', cluster: '' };

beforeAll(async () => {
  const admin = createPool(url, { max: 1 });
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const pool = createPool(url, { schema, max: 1 });
  await migrate(pool);
  const store = new PostgresStore(pool);
  const now = Date.now();
  keys.admin = (await store.createApiKey({ tenantId: 'acme', role: 'admin', now })).secret;
  keys.cluster = (await store.createApiKey({ tenantId: 'ops', role: 'cluster-admin', now })).secret;
  await pool.end();
});

afterAll(async () => {
  const pool = createPool(url, { max: 1 });
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
});

describe('tock server --metrics-port', () => {
  test('the API /metrics needs a cluster-admin key; the loopback port needs none', async () => {
    const env = { DATABASE_URL: url, TOCK_SCHEMA: schema, TOCK_LOG_FORMAT: 'json' };
    const server = new TockProcess(
      [
        'server',
        '--port',
        '0',
        '--metrics-port',
        '0',
        '--metrics-top-jobs',
        '7',
        '--metrics-job-window',
        '2m',
      ],
      env,
    );
    try {
      const listening = await server.waitFor(
        (l) => String(l.msg).startsWith('tock listening on http://127.0.0.1:'),
        'the listening line',
      );
      const base = String(listening.msg).slice('tock listening on '.length);
      const announced = await server.waitFor(
        (l) => l.msg === 'metrics listening (loopback, no key)',
        'the metrics line',
      );
      const metricsUrl = String(announced.url);
      expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);

      const get = (u: string, key?: string) =>
        fetch(u, { headers: key ? { authorization: `Bearer ${key}` } : {} });
      expect((await get(`${base}/metrics`)).status).toBe(401);
      expect((await get(`${base}/metrics`, keys.admin)).status).toBe(403);
      const api = await get(`${base}/metrics`, keys.cluster);
      expect(api.status).toBe(200);
      expect(await api.text()).toContain('# TYPE tock_runs gauge');
      const loopback = await get(metricsUrl);
      expect(loopback.status).toBe(200);
      const text = await loopback.text();
      expect(text).toContain('# TYPE tock_runs gauge');
      expect(text).toMatch(
        /^# HELP tock_job_scheduling_delay_seconds .*the last 120 s of slots.*only the 7 jobs/m,
      );
      expect((await get(metricsUrl.replace('/metrics', '/v1/jobs'))).status).toBe(404);
    } finally {
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    }
  }, 60_000);
});
