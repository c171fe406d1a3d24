/**
 * examples/hello.ts, the job in code the README shows, runs as a user would run it: compiled to
 * JavaScript, in a project of its own where `tock` (this checkout, built) and `pino` are installed,
 * as a child process against the test database. Its job's run must succeed and be recorded, and
 * SIGTERM must stop it cleanly. (`npm run lint` type-checks the file; test/docs/readme.test.ts
 * checks that the README shows it as it is.)
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { setupDatabase, type TestDatabase } from '../setup/database.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

let db: TestDatabase;
let project: string;

beforeAll(async () => {
  db = await setupDatabase();
  // A user's project: the example as JavaScript, with `tock` and `pino` in its node_modules.
  project = await mkdtemp(path.join(tmpdir(), 'tock-example-'));
  await mkdir(path.join(project, 'node_modules'));
  await symlink(ROOT, path.join(project, 'node_modules', 'tock'), 'dir');
  await symlink(path.join(ROOT, 'node_modules', 'pino'), path.join(project, 'node_modules', 'pino'), 'dir');
  const source = await readFile(path.join(ROOT, 'examples/hello.ts'), 'utf8');
  const js = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  await writeFile(path.join(project, 'hello.mjs'), js.outputText);
});

afterAll(async () => {
  await db?.teardown();
  await rm(project, { recursive: true, force: true });
});

test('examples/hello.ts upserts its defined job, runs it, records the success and stops on SIGTERM', async () => {
  const child = spawn(process.execPath, ['hello.mjs'], {
    cwd: project,
    env: { ...process.env, DATABASE_URL: db.url, TOCK_SCHEMA: db.schema },
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  try {
    // The first `@every 5s` slot is at most 5 s away; then a tick and a claim.
    const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no "run succeeded" within 20 s; stdout: ${stdout}; stderr: ${stderr}`)),
        20_000,
      );
      child.stdout.on('data', (d) => {
        stdout += d;
        // Complete lines only: a chunk may end inside one.
        for (const part of stdout.split('\n').slice(0, -1)) {
          if (!part.startsWith('{')) continue;
          const l = JSON.parse(part) as Record<string, unknown>;
          if (l.msg === 'run succeeded') {
            clearTimeout(timer);
            resolve(l);
          }
        }
      });
      child.on('close', (code) => reject(new Error(`exited with ${code}; stderr: ${stderr}`)));
    });
    const run = await db.store.getRun({ tenantId: 'default', runId: String(line.run_id) });
    expect(run?.jobId).toBe('hello');
    expect(run?.state).toBe('succeeded');
    // The handler read the job's typed payload.
    expect(run?.attempts[0]?.output).toMatch(/^hello, world at \d{4}-/);
  } finally {
    child.kill('SIGTERM');
  }
  expect(await exited, stderr).toBe(0);
}, 40_000);
