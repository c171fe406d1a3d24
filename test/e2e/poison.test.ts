/**
 * The real `tock worker` with exec handlers whose output holds NUL bytes (`printf 'a\0b'`), beside
 * innocent runs on the same database (issue 14, item 1). Before the fix the completion batch they
 * shared failed with SQLSTATE 22021 and was retried while the worker's own heartbeats renewed the
 * leases: every run stayed `running`, and SIGTERM did not stop the worker. Now every run ends
 * (the NUL kept as U+FFFD), nothing stays running, and SIGTERM stops the worker promptly.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { upsertJob } from '../setup/factories.js';
import { type Line, TockProcess } from '../setup/proc.js';

const TENANT = 'default';

let db: TestDatabase;
let dir: string;

beforeAll(async () => {
  db = await setupDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'tock-poison-e2e-'));
  await writeFile(
    path.join(dir, 'worker.yaml'),
    [
      'handlers:',
      '  binary:',
      `    exec: { argv: [sh, -c, "printf 'a\\\\0b'"] }`,
      '  binfail:',
      `    exec: { argv: [sh, -c, "printf 'x\\\\0y' >&2; exit 3"], permanent_exit_codes: others }`,
      '  plain:',
      `    exec: { argv: [sh, -c, 'echo ok'] }`,
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  await db.teardown();
  await rm(dir, { recursive: true, force: true });
});

async function trigger(jobId: string, handler: string): Promise<string> {
  await upsertJob(db.store, {
    tenantId: TENANT,
    job: { jobId, schedule: '@yearly', handler, maxAttempts: 3 },
    now: db.clock.nowMs(),
  });
  return (await db.store.triggerRun({ tenantId: TENANT, jobId, now: db.clock.nowMs() })).runId;
}

const about = (msg: string, runId: string) => (l: Line) => l.msg === msg && l.run_id === runId;

test('exec output holding NUL ends its run beside the others, and SIGTERM stops the worker', async () => {
  const binary = await trigger('binary-output', 'binary');
  const binfail = await trigger('binary-error', 'binfail');
  const plain: string[] = [];
  for (let i = 0; i < 5; i++) plain.push(await trigger(`plain-${i}`, 'plain'));
  const w = new TockProcess(
    ['worker', '--config', 'worker.yaml', '--poll', '100ms', '--grace', '500ms'],
    {
      DATABASE_URL: db.url,
      TOCK_SCHEMA: db.schema,
      TOCK_LOG_FORMAT: 'json',
      TOCK_URL: undefined,
      TOCK_KEY: undefined,
    },
    dir,
  );
  try {
    await w.waitFor(about('run succeeded', binary), 'the binary output run to succeed', 15_000);
    await w.waitFor(about('run failed; dead-lettered', binfail), 'the binary error run to fail', 15_000);
    for (const id of plain) await w.waitFor(about('run succeeded', id), 'the plain runs to succeed', 15_000);
  } finally {
    w.child.kill('SIGTERM');
  }
  const started = Date.now();
  const code = await Promise.race([
    w.exited,
    new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 10_000)),
  ]);
  if (code === 'hung') w.child.kill('SIGKILL');
  expect(code, w.stderr).toBe(0);
  expect(Date.now() - started).toBeLessThan(10_000);

  const b = await db.store.getRun({ tenantId: TENANT, runId: binary });
  expect(b.state).toBe('succeeded');
  expect(b.attempts.map((a) => a.output)).toEqual(['a\uFFFDb']);
  const f = await db.store.getRun({ tenantId: TENANT, runId: binfail });
  expect(f.state).toBe('dead');
  expect(f.attempts).toHaveLength(1);
  expect(f.attempts[0]!.output).toBe('x\uFFFDy');
  expect(f.attempts[0]!.error).toContain('sh exited with code 3 (permanent)');
  expect(f.attempts[0]!.error).toContain('x\uFFFDy');
  for (const id of plain) {
    const r = await db.store.getRun({ tenantId: TENANT, runId: id });
    expect([r.state, r.attempts.length]).toEqual(['succeeded', 1]);
  }
  const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM run_states WHERE state = 'running'");
  expect(rows[0].n).toBe(0);
});
