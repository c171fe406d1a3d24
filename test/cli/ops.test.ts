/**
 * The operator commands of issue 22 (operator features) through the real `tock` binary (built
 * `dist/`) against an API in this process: `tock jobs list` with filters, `tock dlq replay --all`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Api, startApi } from '../setup/api.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Exited, runTock } from '../setup/proc.js';

const TENANT = 'acme';

let db: TestDatabase;
let api: Api;
let adminKey: string;
let otherKey: string;

const tock = (args: string[], key = adminKey): Promise<Exited> =>
  runTock(args, { DATABASE_URL: undefined, TOCK_SCHEMA: undefined, TOCK_URL: api.base, TOCK_KEY: key });

/** Runs a command that must succeed and returns its stdout. */
async function ok(args: string[], key = adminKey): Promise<string> {
  const out = await tock(args, key);
  expect(out.stderr, `tock ${args.join(' ')}`).toBe('');
  expect(out.code, `tock ${args.join(' ')}`).toBe(0);
  return out.stdout;
}

// biome-ignore lint/suspicious/noExplicitAny: a JSON answer of any shape; tests assert on it field by field
const okJson = async (args: string[], key = adminKey): Promise<any> =>
  JSON.parse(await ok([...args, '--json'], key));

const ids = (answer: { jobs: { job_id: string }[] }) => answer.jobs.map((j) => j.job_id);

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db, { quota: { perSecond: 1_000_000, burst: 1_000_000 } });
  const key = (tenantId: string) =>
    db.store
      .createApiKey({ tenantId, role: 'admin', name: 'test', now: db.clock.nowMs() })
      .then((k) => k.secret);
  adminKey = await key(TENANT);
  otherKey = await key('other');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

describe('tock jobs list with filters', () => {
  beforeAll(async () => {
    const jobs: [string, string, string][] = [
      ['s-alpha.1', 'echo', 'default'],
      ['s-alpha.2', 'send', 'io'],
      ['s-alpha_3', 'echo', 'default'],
      ['s-beta.1', 'echo', 'default'],
    ];
    for (const [id, handler, pool] of jobs)
      await ok(['jobs', 'put', id, '--schedule', '@every 1h', '--handler', handler, '--pool', pool]);
    await ok(['jobs', 'pause', 's-alpha.1']);
    await ok(['jobs', 'put', 's-alpha.9', '--schedule', '@every 1h', '--handler', 'echo'], otherKey);
  });

  test('--prefix, --state, --pool and --handler keep the matching jobs of the tenant only', async () => {
    expect(ids(await okJson(['jobs', 'list', '--prefix', 's-alpha']))).toEqual([
      's-alpha.1',
      's-alpha.2',
      's-alpha_3',
    ]);
    expect(ids(await okJson(['jobs', 'list', '--prefix', 's-alpha_']))).toEqual(['s-alpha_3']);
    expect(ids(await okJson(['jobs', 'list', '--prefix', 's-alpha%']))).toEqual([]);
    expect(ids(await okJson(['jobs', 'list', '--state', 'paused']))).toEqual(['s-alpha.1']);
    expect(ids(await okJson(['jobs', 'list', '--pool', 'io']))).toEqual(['s-alpha.2']);
    expect(
      ids(await okJson(['jobs', 'list', '--prefix', 's-', '--handler', 'echo', '--state', 'active'])),
    ).toEqual(['s-alpha_3', 's-beta.1']);
    const table = await ok(['jobs', 'list', '--prefix', 's-beta']);
    expect(table).toMatch(/^s-beta\.1\s+@every 1h/m);
    expect(table).not.toMatch(/s-alpha/);
  });

  test('the hint for the next page repeats the filters; --all walks every page of them', async () => {
    const first = await tock(['jobs', 'list', '--prefix', 's-alpha', '--handler', 'echo', '--limit', '1']);
    expect(first.code).toBe(0);
    expect(first.stderr).toMatch(
      /^more: tock jobs list --prefix s-alpha --handler echo --cursor \S+ \(or --all\)$/m,
    );
    const cursor = /--cursor (\S+)/.exec(first.stderr)?.[1] ?? '';
    const next = await okJson([
      'jobs',
      'list',
      '--prefix',
      's-alpha',
      '--handler',
      'echo',
      '--cursor',
      cursor,
    ]);
    expect(ids(next)).toEqual(['s-alpha_3']);
    expect(ids(await okJson(['jobs', 'list', '--prefix', 's-alpha', '--limit', '1', '--all']))).toEqual([
      's-alpha.1',
      's-alpha.2',
      's-alpha_3',
    ]);
  });

  test('a bad --state is refused before any request', async () => {
    const out = await tock(['jobs', 'list', '--state', 'sleeping']);
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/--state/);
  });
});

describe('tock dlq replay --all', () => {
  /** `n` triggered runs of a new job, each failed permanently with `error`. */
  async function deadRuns(jobId: string, n: number, error: string): Promise<string[]> {
    await ok(['jobs', 'put', jobId, '--schedule', '@daily', '--handler', `${jobId}-h`, '--pool', jobId]);
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const at = new Date(db.clock.nowMs() - (n - i) * 1000).toISOString();
      ids.push((await okJson(['jobs', 'trigger', jobId, '--at', at])).run_id);
    }
    const claimed = await db.store.claimRuns({
      workerId: 'w-1',
      pool: jobId,
      max: n,
      handlers: [`${jobId}-h`],
      tenantId: TENANT,
      now: db.clock.nowMs(),
    });
    for (const c of claimed)
      await db.store.failRun({
        runId: c.runId,
        leaseToken: c.leaseToken,
        error,
        permanent: true,
        now: db.clock.nowMs(),
      });
    return ids;
  }

  let flaky: string[];
  let broken: string[];

  beforeAll(async () => {
    flaky = await deadRuns('r-flaky', 3, 'upstream timeout');
    broken = await deadRuns('r-broken', 2, 'TypeError: x is undefined');
  });

  test('--dry-run counts; then --all replays what matches, and only that', async () => {
    expect(await ok(['dlq', 'replay', '--all', '--job', 'r-flaky', '--dry-run'])).toBe(
      '3 dead runs match; none replayed (--dry-run)\n',
    );
    expect(await ok(['dlq', 'replay', '--all', '--error', 'TIMEOUT', '--dry-run'])).toBe(
      '3 dead runs match; none replayed (--dry-run)\n',
    );
    expect((await okJson(['dlq', 'replay', '--all', '--dry-run'])).matching).toBe(5);
    expect(await ok(['dlq', 'replay', '--all', '--error', 'timeout'])).toBe('replayed 3 dead runs\n');
    expect((await okJson(['dlq', 'list'])).runs.map((r: { run_id: string }) => r.run_id).sort()).toEqual(
      [...broken].sort(),
    );
    const all = await okJson(['dlq', 'replay', '--all']);
    expect(all).toMatchObject({ replayed: 2, skipped: 0 });
    expect(new Set(all.replayed_run_ids)).toEqual(new Set(broken));
    expect(flaky).toHaveLength(3);
  });

  test('the single form stays; a run id with --all, or filters without it, are refused before any request', async () => {
    for (const args of [
      ['dlq', 'replay', 'x', '--all'],
      ['dlq', 'replay'],
      ['dlq', 'replay', 'x', '--dry-run'],
      ['dlq', 'replay', 'x', '--job', 'r-flaky'],
      ['dlq', 'replay', '--all', '--from', 'yesterday'],
    ]) {
      const out = await tock(args);
      expect(out.code, args.join(' ')).toBe(1);
      expect(out.stdout).toBe('');
    }
    const out = await tock(['dlq', 'replay', '00000000-0000-7000-8000-000000000000']);
    expect(out.stderr).toMatch(/^tock: 404 not_found/);
  });
});
