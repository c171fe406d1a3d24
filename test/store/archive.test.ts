/**
 * The run archive (`--prune-archive`) against PostgreSQL and real files: a pruned run is a line of
 * the file of its slot's UTC day before it leaves the database, with its attempts and reports and
 * no lease token; kept runs are not written; a dry run writes nothing; a write that fails deletes
 * nothing and leaves no line behind; a directory that cannot be written to is refused up front.
 */
import { execFileSync } from 'node:child_process';
import { constants } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { archiveFile, JsonlArchive, PostgresStore } from '../../src/store/index.js';
import { MAX_ARCHIVED_BATCH_RUNS } from '../../src/store/retention.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { countRows, endedRun, insertDelayRuns, job, uniqueId, upsertJob } from '../setup/factories.js';

const DAY = 86_400_000;

let db: TestDatabase;
let dir: string;
beforeAll(async () => {
  db = await setupDatabase();
});
afterAll(() => db.teardown());
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'tock-archive-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** A tenant with one job, its store writing to `archiveDir`, and `now`, midday UTC of a day. */
async function tenant() {
  const tenantId = uniqueId('tenant');
  const def = job();
  await upsertJob(db.store, { tenantId, job: def, now: db.clock.nowMs() });
  const store = new PostgresStore(db.pool, { archive: await JsonlArchive.open(dir) });
  const now = Math.floor(db.clock.nowMs() / DAY) * DAY + DAY / 2;
  return { tenantId, jobId: def.jobId, store, now };
}

const exists = async (runId: string) => (await countRows(db.pool, 'runs', 'run_id = $1', [runId])) === 1;

/** The lines of the archive's file of `at`'s UTC day, parsed; none when it has no file. */
async function linesOf(at: number): Promise<Record<string, unknown>[]> {
  const file = archiveFile(dir, new Date(at).toISOString().slice(0, 10));
  const text = await readFile(file, 'utf8').catch(() => '');
  return text === ''
    ? []
    : text
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l));
}

describe('the run archive', () => {
  test('a pruned run is a line of its slot day’s file, with its attempts and reports and no lease token', async () => {
    const { tenantId, jobId, store, now } = await tenant();
    const deadSlot = now - 40 * DAY;
    const dead = await endedRun(db, { tenantId, jobId, slot: deadSlot, state: 'dead', finishedAt: deadSlot });
    const succeededSlot = now - 9 * DAY;
    const succeeded = await endedRun(db, {
      tenantId,
      jobId,
      slot: succeededSlot,
      state: 'succeeded',
      finishedAt: succeededSlot + 1000,
    });
    const young = await endedRun(db, {
      tenantId,
      jobId,
      slot: now - DAY,
      state: 'succeeded',
      finishedAt: now - DAY,
    });

    const r = await store.pruneBatch({ tenantId, now, horizon: now, after: null, limit: 100, dryRun: false });

    expect(r.byState).toEqual({ dead: 1, succeeded: 1 });
    expect(await exists(dead)).toBe(false);
    expect(await exists(succeeded)).toBe(false);
    expect(await exists(young)).toBe(true);
    const [deadLine, ...otherDead] = await linesOf(deadSlot);
    expect(otherDead).toEqual([]);
    expect(deadLine).toMatchObject({ run_id: dead, tenant_id: tenantId, job_id: jobId, state: 'dead' });
    expect(new Date(deadLine?.scheduled_for as string).getTime()).toBe(deadSlot);
    expect(deadLine?.attempts).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'failed', worker_id: 'w' }),
    ]);
    expect(deadLine?.progress).toEqual([expect.objectContaining({ progress: 1 })]);
    expect(await linesOf(succeededSlot)).toEqual([
      expect.objectContaining({ run_id: succeeded, state: 'succeeded' }),
    ]);
    expect(JSON.stringify([deadLine, ...(await linesOf(succeededSlot))])).not.toContain('lease_token');
    expect(await linesOf(now - DAY)).toEqual([]);
    expect((await readdir(dir)).sort()).toEqual(
      [deadSlot, succeededSlot].map((t) => `runs-${new Date(t).toISOString().slice(0, 10)}.jsonl`).sort(),
    );
  });

  test('a second batch appends to the day’s file; a dry run writes nothing', async () => {
    const { tenantId, jobId, store, now } = await tenant();
    const slot = now - 10 * DAY;
    const first = await endedRun(db, { tenantId, jobId, slot, state: 'succeeded', finishedAt: slot });
    await store.pruneBatch({ tenantId, now, horizon: now, after: null, limit: 100, dryRun: true });
    expect(await readdir(dir)).toEqual([]);
    await store.pruneBatch({ tenantId, now, horizon: now, after: null, limit: 100, dryRun: false });
    const second = await endedRun(db, {
      tenantId,
      jobId,
      slot: slot + 1000,
      state: 'cancelled',
      finishedAt: slot,
    });
    await store.pruneBatch({ tenantId, now, horizon: now, after: null, limit: 100, dryRun: false });

    expect((await linesOf(slot)).map((l) => l.run_id)).toEqual([first, second]);
  });

  test('a write that fails deletes nothing and leaves no line in any file', async () => {
    const { tenantId, jobId, store, now } = await tenant();
    const early = now - 12 * DAY;
    const late = now - 11 * DAY;
    const a = await endedRun(db, { tenantId, jobId, slot: early, state: 'succeeded', finishedAt: early });
    const b = await endedRun(db, { tenantId, jobId, slot: late, state: 'succeeded', finishedAt: late });
    // The earlier day's file takes its line; the later day's "file" is a directory, so its write fails.
    await writeFile(archiveFile(dir, new Date(early).toISOString().slice(0, 10)), '{"run_id":"kept"}\n');
    await mkdir(archiveFile(dir, new Date(late).toISOString().slice(0, 10)));

    await expect(
      store.pruneBatch({ tenantId, now, horizon: now, after: null, limit: 100, dryRun: false }),
    ).rejects.toThrow(/EISDIR|directory/);

    expect(await exists(a)).toBe(true);
    expect(await exists(b)).toBe(true);
    expect(await linesOf(early)).toEqual([{ run_id: 'kept' }]);

    // Once the archive can take them, the same runs go, each written once.
    await rm(archiveFile(dir, new Date(late).toISOString().slice(0, 10)), { recursive: true });
    await store.pruneBatch({ tenantId, now, horizon: now, after: null, limit: 100, dryRun: false });
    expect(await exists(a)).toBe(false);
    expect((await linesOf(early)).map((l) => l.run_id)).toEqual(['kept', a]);
    expect((await linesOf(late)).map((l) => l.run_id)).toEqual([b]);
  });

  test('a batch that archives looks at no more than MAX_ARCHIVED_BATCH_RUNS runs, and the next goes on from it', async () => {
    const { tenantId, jobId, store, now } = await tenant();
    const slot = now - 10 * DAY;
    const n = MAX_ARCHIVED_BATCH_RUNS + 50;
    await insertDelayRuns(
      db.pool,
      Array.from({ length: n }, (_, i) => ({ tenantId, jobId, slot: slot + i * 1000, delayMs: 5 })),
    );
    const first = await store.pruneBatch({
      tenantId,
      now,
      horizon: now,
      after: null,
      limit: 2000,
      dryRun: false,
    });
    expect(first.scanned).toBe(MAX_ARCHIVED_BATCH_RUNS);
    expect(first.next).not.toBeNull();
    const second = await store.pruneBatch({
      tenantId,
      now,
      horizon: now,
      after: first.next,
      limit: 2000,
      dryRun: false,
    });
    expect(second).toMatchObject({ scanned: 50, next: null });
    const lines = await linesOf(slot);
    expect(lines).toHaveLength(n);
    expect(new Set(lines.map((l) => l.run_id)).size).toBe(n);
    expect(await countRows(db.pool, 'runs', 'tenant_id = $1', [tenantId])).toBe(0);
  });

  test('a write that hangs (a FIFO nobody reads as the day’s file) is given up in time and deletes nothing', async () => {
    const { tenantId, jobId, now } = await tenant();
    const store = new PostgresStore(db.pool, {
      archive: await JsonlArchive.open(dir, { writeTimeoutMs: 300 }),
    });
    const slot = now - 10 * DAY;
    const run = await endedRun(db, { tenantId, jobId, slot, state: 'succeeded', finishedAt: slot });
    const fifo = archiveFile(dir, new Date(slot).toISOString().slice(0, 10));
    execFileSync('mkfifo', [fifo]);
    try {
      const started = performance.now();
      await expect(
        store.pruneBatch({ tenantId, now, horizon: now, after: null, limit: 100, dryRun: false }),
      ).rejects.toThrow('the archive write did not finish within 300 ms');
      expect(performance.now() - started).toBeLessThan(5000);
      expect(await exists(run)).toBe(true);
    } finally {
      // A reader lets the hung open go on, so no thread stays blocked after the test.
      const reader = await open(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
      await new Promise((r) => setTimeout(r, 200));
      await reader.close();
    }
  });

  test('pruneTenant (POST /v1/runs/prune) writes to the archive as well', async () => {
    const { tenantId, jobId, store, now } = await tenant();
    const slot = now - 10 * DAY;
    const run = await endedRun(db, { tenantId, jobId, slot, state: 'succeeded', finishedAt: slot });
    const r = await store.pruneTenant({ tenantId, now, cursor: null, dryRun: false, batches: 5, limit: 100 });
    expect(r.byState.succeeded).toBe(1);
    expect((await linesOf(slot)).map((l) => l.run_id)).toEqual([run]);
  });

  test('a directory that cannot be made or written to is refused with a reason', async () => {
    const file = path.join(dir, 'a-file');
    await writeFile(file, '');
    await expect(JsonlArchive.open(path.join(file, 'archive'))).rejects.toThrow(
      /the archive directory .*a-file\/archive cannot be written to/,
    );
    await expect(JsonlArchive.open('')).rejects.toThrow('the archive directory must be a path');
    await expect(JsonlArchive.open('bad\0path')).rejects.toThrow('the archive directory must be a path');
    const made = path.join(dir, 'new', 'deeper');
    expect((await JsonlArchive.open(made)).dir).toBe(made);
  });
});
