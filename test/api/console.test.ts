/**
 * The web console's side of the server: its static files (public, strict Content-Security-Policy,
 * the right types and caching, gzip when accepted, nothing else of the directory) and
 * `GET /v1/whoami`, which tells a key its tenant, role and permissions (and open mode that it needs
 * none). The console itself is tested in a browser by test/e2e/console.test.ts.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CONSOLE_CSP } from '../../src/api/routes/console.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, expectError, keysFor, type RoleKeys, startApi } from './helpers.js';

const SCRIPT = 'app-ABCD1234.js';
const PAGE = `<!doctype html><script type="module" src="/console/${SCRIPT}"></script>`;

let db: TestDatabase;
let dir: string;
let api: Api;
let open: Api;
let http: ReturnType<typeof client>;
let keys: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'tock-console-files-'));
  await writeFile(path.join(dir, 'index.html'), PAGE);
  await writeFile(path.join(dir, SCRIPT), 'console.log("tock");\n'.repeat(50));
  await writeFile(path.join(dir, 'notes.txt'), 'not served');
  api = await startApi(db, { console: dir });
  open = await startApi(db, { console: false, auth: 'open', openTenant: 'dev' });
  http = client(api.base);
  keys = await keysFor(db, 'acme');
});

afterAll(async () => {
  await api?.close();
  await open?.close();
  await rm(dir, { recursive: true, force: true });
  await db?.teardown();
});

describe('the console files', () => {
  test('GET / is the page, without a key, revalidated each load, under the strict policy', async () => {
    const r = await api.app.inject({ method: 'GET', url: '/' });
    expect(r.statusCode).toBe(200);
    expect(r.body).toBe(PAGE);
    expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(r.headers['cache-control']).toBe('no-cache');
    expect(r.headers['content-security-policy']).toBe(CONSOLE_CSP);
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).not.toContain('unsafe-inline');
    expect(r.headers['x-content-type-options']).toBe('nosniff');
    expect(r.headers['referrer-policy']).toBe('no-referrer');
  });

  test('a hashed asset is cached for a year, and gzipped for a client that accepts it', async () => {
    const plain = await api.app.inject({ method: 'GET', url: `/console/${SCRIPT}` });
    expect(plain.statusCode).toBe(200);
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.headers['content-encoding']).toBeUndefined();
    const zipped = await api.app.inject({
      method: 'GET',
      url: `/console/${SCRIPT}`,
      headers: { 'accept-encoding': 'br, gzip' },
    });
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(zipped.headers.vary).toBe('accept-encoding');
    expect(gunzipSync(zipped.rawPayload).toString()).toBe(plain.body);
    expect(zipped.rawPayload.length).toBeLessThan(plain.rawPayload.length);
  });

  test('nothing else is served: other files, other names, paths out of the directory', async () => {
    for (const url of [
      '/console/notes.txt',
      '/console/nope.js',
      '/console/index.html',
      '/console/..%2Fpasswd',
    ])
      expect((await api.app.inject({ method: 'GET', url })).statusCode, url).toBe(404);
  });

  test('without a built console, GET / says how to build it', async () => {
    const unbuilt = await startApi(db, { console: path.join(dir, 'missing') });
    try {
      const r = await unbuilt.app.inject({ method: 'GET', url: '/' });
      expect(r.statusCode).toBe(503);
      expect(r.body).toContain('npm run build');
    } finally {
      await unbuilt.close();
    }
  });

  test('console: false serves nothing at /', async () => {
    expect((await open.app.inject({ method: 'GET', url: '/' })).statusCode).toBe(404);
  });
});

describe('GET /v1/whoami', () => {
  test("answers a key's tenant, role and what the role may do", async () => {
    const reader = await http('GET', '/v1/whoami', { key: keys.reader });
    expect(reader.status).toBe(200);
    expect(reader.json).toEqual({
      tenant_id: 'acme',
      role: 'reader',
      key_id: keys.ids.reader,
      auth: 'keys',
      permissions: ['read'],
    });
    const operator = await http('GET', '/v1/whoami', { key: keys.operator });
    expect(operator.json.permissions).toEqual(['read', 'operate']);
    const admin = await http('GET', '/v1/whoami', { key: keys['cluster-admin'] });
    expect(admin.json.permissions).toEqual(['read', 'operate', 'work', 'admin', 'cluster']);
  });

  test('needs a key that may read: none is 401, a worker key 403', async () => {
    expectError(await http('GET', '/v1/whoami'), 401, 'unauthorized');
    expectError(await http('GET', '/v1/whoami', { key: 'tock_unknown' }), 401, 'unauthorized');
    expectError(await http('GET', '/v1/whoami', { key: keys.worker }), 403, 'forbidden');
  });

  test("open mode needs no key and answers the open tenant's cluster-admin", async () => {
    const r = await call(open, '/v1/whoami');
    expect(r.json).toEqual({
      tenant_id: 'dev',
      role: 'cluster-admin',
      key_id: null,
      auth: 'open',
      permissions: ['read', 'operate', 'work', 'admin', 'cluster'],
    });
  });
});

const call = (a: Api, url: string) => client(a.base)('GET', url);
