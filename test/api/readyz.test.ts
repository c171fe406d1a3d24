/**
 * `/readyz` needs no key and no rate limit (F8): however often it is called, the readiness check
 * (two statements) runs at most once per READINESS_CACHE_MS of the app's clock, concurrent calls
 * sharing the check in flight; a change (the database gone: 503) shows once the interval has
 * passed. And `pendingMigrations` reads the migrations folder once per process.
 */
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { READINESS_CACHE_MS } from '../../src/api/routes/status.js';
import { MIGRATIONS_DIR, pendingMigrations } from '../../src/store/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, startApi } from './helpers.js';

let db: TestDatabase;
let api: Api;
let checks = 0;
let down = false;
/** Holds each check until released: the 100 calls below are all in the server before it answers. */
let gate: Promise<void> = Promise.resolve();

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db, {
    // The real check's statements (as runtime/services.ts builds it), counted; `down` is the
    // database gone (the pool's query rejects).
    readiness: async () => {
      checks += 1;
      await gate;
      if (down) throw new Error('connection refused');
      const pending = await pendingMigrations(db.pool);
      return { database: true, migrations: pending.length === 0 };
    },
  });
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

test('100 concurrent /readyz calls run one readiness check; the database going down shows (503) once the interval has passed', async () => {
  let release = () => {};
  gate = new Promise<void>((r) => {
    release = r;
  });
  let arrived = 0;
  let onRequest = () => {};
  const all = new Promise<void>((resolve) => {
    onRequest = () => {
      arrived += 1;
      if (arrived === 100) resolve();
    };
  });
  api.app.server.on('request', onRequest);
  const http = client(api.base);
  const calls = Array.from({ length: 100 }, () => http('GET', '/readyz'));
  await all;
  release();
  const answers = await Promise.all(calls);
  api.app.server.off('request', onRequest);
  for (const a of answers) {
    expect(a.status, a.text).toBe(200);
    expect(a.json).toEqual({ status: 'ready', database: true, migrations: true });
  }
  expect(checks).toBe(1);

  // The database goes down: within the interval the answer is the cached one, and nothing is checked.
  down = true;
  db.clock.advance(READINESS_CACHE_MS - 1);
  const cached = await Promise.all(Array.from({ length: 20 }, () => http('GET', '/readyz')));
  expect(cached.map((a) => a.status)).toEqual(Array(20).fill(200));
  expect(checks).toBe(1);

  // Once it has passed, one check sees it.
  db.clock.advance(1);
  const after = await Promise.all(Array.from({ length: 20 }, () => http('GET', '/readyz')));
  for (const a of after) {
    expect(a.status, a.text).toBe(503);
    expect(a.json).toEqual({ status: 'not ready', database: false, migrations: false });
  }
  expect(checks).toBe(2);

  // And back up after another interval.
  down = false;
  db.clock.advance(READINESS_CACHE_MS);
  expect((await http('GET', '/readyz')).status).toBe(200);
  expect(checks).toBe(3);
});

test('pendingMigrations reads a migrations folder once per process: a file added later is not read', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tock-pending-'));
  try {
    for (const f of readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql'))) {
      cpSync(join(MIGRATIONS_DIR, f), join(dir, f));
    }
    expect(await pendingMigrations(db.pool, dir)).toEqual([]);
    writeFileSync(join(dir, '9999_later.sql'), 'SELECT 1;');
    expect(await pendingMigrations(db.pool, dir)).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
