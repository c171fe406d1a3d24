/**
 * `tock worker --handlers <module>` with jobs defined in code (`defineJob`), the real binary: the
 * worker upserts the module's definitions (on the database, or through a server with a key that may
 * define jobs) before it claims, serves their handlers beside the module's handlers by name, and
 * starting it again changes nothing. A worker key cannot define jobs: the worker says so and exits.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SystemClock, ValidationError } from '../../src/core/index.js';
import { type Api, startApi } from '../setup/api.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Line, TockProcess } from '../setup/proc.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const TENANT = 'default';

/** Definitions as an application writes them: a default list, a named one, handlers by name. */
const MODULE = `import { defineJob, Type } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'dist/index.js')).href)};
const mail = defineJob({
  id: 'mail',
  schedule: '@yearly',
  payload: Type.Object({ to: Type.String(), times: Type.Integer({ minimum: 1 }) }),
  defaultPayload: { to: 'ops', times: 1 },
  handler: (ctx) => ctx.payload.to.repeat(ctx.payload.times),
});
export const ping = defineJob({ id: 'ping', schedule: '@yearly', handler: () => 'pong' });
export const handlers = { shout: ({ payload }) => String(payload.word).toUpperCase() };
export default [mail, ping];
`;

let db: TestDatabase;
let dir: string;
let handlersModule: string;

beforeAll(async () => {
  db = await setupDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'tock-definitions-e2e-'));
  handlersModule = path.join(dir, 'jobs.mjs');
  await writeFile(handlersModule, MODULE);
});

afterAll(async () => {
  await db.teardown();
  await rm(dir, { recursive: true, force: true });
});

class Proc extends TockProcess {
  constructor(args: string[], env: Record<string, string | undefined> = {}) {
    super(args, { DATABASE_URL: undefined, TOCK_URL: undefined, TOCK_KEY: undefined, ...env });
  }
}

const running = (l: Line) => l.msg === 'tock worker is running; SIGTERM or Ctrl-C drains it';
const upserted = (l: Line) => l.msg === 'jobs of the handlers module upserted';

/** A loopback port nothing listens on now. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function jobsOf(tenantId: string) {
  const { rows } = await db.pool.query(
    'SELECT job_id, handler, payload, payload_schema, version FROM jobs WHERE tenant_id = $1 ORDER BY job_id',
    [tenantId],
  );
  return rows;
}

describe('tock worker --handlers with job definitions', () => {
  test('on the database: upserts them, serves their handlers, and a second start changes nothing', async () => {
    const env = { DATABASE_URL: db.url, TOCK_SCHEMA: db.schema, TOCK_LOG_FORMAT: 'json' };
    const w = new Proc(['worker', '--handlers', handlersModule, '--poll', '100ms', '--grace', '1s'], env);
    expect((await w.waitFor(upserted, 'the upsert')).jobs).toEqual(['mail: created', 'ping: created']);
    expect((await w.waitFor(running, 'start')).handlers).toEqual(['shout', 'mail', 'ping']);
    const jobs = await jobsOf(TENANT);
    expect(jobs.map((j) => [j.job_id, j.handler, j.version])).toEqual([
      ['mail', 'mail', 1],
      ['ping', 'ping', 1],
    ]);
    expect(jobs[0].payload).toEqual({ to: 'ops', times: 1 });
    expect(jobs[0].payload_schema).toMatchObject({ type: 'object', required: ['to', 'times'] });

    const now = db.clock.nowMs();
    const run = await db.store.triggerRun({
      tenantId: TENANT,
      jobId: 'mail',
      payload: { to: 'ab', times: 3 },
      now,
    });
    await w.waitFor((l) => l.msg === 'run succeeded' && l.run_id === run.runId, 'the run to succeed');
    expect((await db.store.getRun({ tenantId: TENANT, runId: run.runId })).attempts[0]!.output).toBe(
      'ababab',
    );
    // The stored schema refuses a bad payload for every writer, this one included.
    await expect(
      db.store.triggerRun({ tenantId: TENANT, jobId: 'mail', payload: { to: 'ab', times: 0 }, now: now + 1 }),
    ).rejects.toBeInstanceOf(ValidationError);
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);

    const again = new Proc(['worker', '--handlers', handlersModule, '--poll', '100ms'], env);
    expect((await again.waitFor(upserted, 'the upsert')).jobs).toEqual([
      'mail: unchanged',
      'ping: unchanged',
    ]);
    await again.waitFor(running, 'start');
    again.child.kill('SIGTERM');
    expect(await again.exited).toBe(0);
    expect((await jobsOf(TENANT)).map((j) => j.version)).toEqual([1, 1]);
  });

  describe('through a server', () => {
    let api: Api;

    beforeAll(async () => {
      api = await startApi(db, { clock: new SystemClock(), auth: 'keys' });
    });
    afterAll(async () => {
      await api.close();
    });

    /** `tock worker --handlers` with the module, through the server at `url` with `key`. */
    const throughServer = (url: string, key: string) =>
      new Proc(['worker', '--handlers', handlersModule, '--url', url, '--key', key, '--log-format', 'json']);

    const keyOf = async (tenantId: string, role: 'admin' | 'worker') =>
      (await db.store.createApiKey({ tenantId, role, now: new SystemClock().nowMs() })).secret;

    test("with an admin key: upserts them in the key's tenant through PUT /v1/jobs", async () => {
      const key = await keyOf('remote', 'admin');
      const w = throughServer(api.base, key);
      expect((await w.waitFor(upserted, 'the upsert')).jobs).toEqual(['mail: created', 'ping: created']);
      await w.waitFor(running, 'start');
      w.child.kill('SIGTERM');
      expect(await w.exited).toBe(0);
      expect((await jobsOf('remote')).map((j) => j.job_id)).toEqual(['mail', 'ping']);
    });

    test('started before its server: keeps trying to upsert until the server answers, then works', async () => {
      // Found in review: the upsert was sent once, so a worker started before its server exited
      // (its claims, before definitions, kept trying).
      const key = await keyOf('remote-late', 'admin');
      const port = await freePort();
      const w = throughServer(`http://127.0.0.1:${port}`, key);
      const late = await w.waitFor(
        (l) => l.msg === 'could not upsert the jobs of the handlers module yet; retrying',
        'a retried upsert',
      );
      expect(late.error).toMatch(/ECONNREFUSED/);
      const server = await startApi(db, { clock: new SystemClock(), auth: 'keys' }, port);
      try {
        expect((await w.waitFor(upserted, 'the upsert')).jobs).toEqual(['mail: created', 'ping: created']);
        await w.waitFor(running, 'start');
        w.child.kill('SIGTERM');
        expect(await w.exited).toBe(0);
      } finally {
        await server.close();
      }
      expect((await jobsOf('remote-late')).map((j) => j.job_id)).toEqual(['mail', 'ping']);
    });

    test('with a worker key: exit 1, saying that the key may not define jobs', async () => {
      const key = await keyOf('remote-worker', 'worker');
      const p = throughServer(api.base, key);
      expect(await p.exited).toBe(1);
      expect(p.stderr).toMatch(
        new RegExp(
          `^tock: ${api.base} refused to upsert the jobs the handlers module defines: 403 forbidden: .*admin key`,
        ),
      );
      expect(await jobsOf('remote-worker')).toEqual([]);
    });
  });
});
