/**
 * scripts/check-imports.mjs (the last step of `npm run lint`) run on small fake src trees: an import
 * cycle between files fails it, inside one folder too, whatever kind of import closes it (static,
 * `import type`, `export … from`, side-effect, dynamic `import()`), each cycle printed once as
 * `a.ts → b.ts → a.ts`; a tree without one passes; and the folder direction is still checked.
 * The repository's own src/ passes (`npm run lint` runs it there).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, expect, test } from 'vitest';

const SCRIPT = path.resolve(import.meta.dirname, '../../scripts/check-imports.mjs');
const roots: string[] = [];

afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

/** A src tree of `files` (path → text) in a new temporary directory; returns its root. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(tmpdir(), 'tock-imports-'));
  roots.push(root);
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  }
  return root;
}

function check(root: string, how: 'argument' | 'env' = 'argument') {
  return spawnSync(process.execPath, how === 'argument' ? [SCRIPT, root] : [SCRIPT], {
    encoding: 'utf8',
    timeout: 30_000,
    env: how === 'argument' ? process.env : { ...process.env, TOCK_SRC: root },
  });
}

test('a tree without a cycle passes, given as an argument or in TOCK_SRC', () => {
  const root = tree({
    'core/index.ts': "export { a } from './a.js';\n",
    'core/a.ts': "import { b } from './b.js';\nexport const a = b + 1;\n",
    'core/b.ts': 'export const b = 1;\n',
    'store/index.ts': "import { a } from '../core/index.js';\nexport const s = a;\n",
    // A test file is no module of the tree: its imports close no cycle.
    'core/b.test.ts': "import { a } from './a.js';\n",
  });
  for (const how of ['argument', 'env'] as const) {
    const r = check(root, how);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('import direction: ok; no import cycles\n');
    expect(r.status).toBe(0);
  }
});

test('a cycle inside one folder fails, printed as a.ts → b.ts → a.ts', () => {
  const root = tree({
    'api/app.ts': "import { routes } from './routes/index.js';\nexport const app = routes;\n",
    'api/routes/index.ts': "import type { App } from '../app.js';\nexport const routes = 1;\n",
    'api/other.ts': "import { app } from './app.js';\nexport const other = app;\n",
  });
  const r = check(root);
  expect(r.status).toBe(1);
  expect(r.stdout).toBe('');
  expect(r.stderr).toBe('import cycles:\n  api/app.ts → api/routes/index.ts → api/app.ts\n');
});

test('every kind of import closes a cycle: export from, side effect, dynamic import, multi-line', () => {
  const root = tree({
    'core/a.ts': "export { b } from './b.js';\n",
    'core/b.ts': "import './c.js';\nexport const b = 1;\n",
    'core/c.ts': "export async function c() {\n  return import('./d.js');\n}\n",
    'core/d.ts': "import {\n  type A,\n  b,\n} from './a.js';\nexport const d = b;\n",
  });
  const r = check(root);
  expect(r.status).toBe(1);
  expect(r.stderr).toBe('import cycles:\n  core/a.ts → core/b.ts → core/c.ts → core/d.ts → core/a.ts\n');
});

test('each cycle is printed once, however many files lead into it; two cycles, two lines', () => {
  const root = tree({
    'worker/a.ts': "import { b } from './b.js';\nexport const a = b;\n",
    'worker/b.ts': "import { a } from './a.js';\nexport const b = a;\n",
    'worker/x.ts': "import { b } from './b.js';\nexport const x = b;\n",
    'worker/y.ts': "import { a } from './a.js';\nexport const y = a;\n",
    'worker/p.ts': "import { q } from './q.js';\nexport const p = q;\n",
    'worker/q.ts': "import { p } from './p.js';\nexport const q = p;\n",
  });
  const r = check(root);
  expect(r.status).toBe(1);
  expect(r.stderr).toBe(
    'import cycles:\n  worker/a.ts → worker/b.ts → worker/a.ts\n  worker/p.ts → worker/q.ts → worker/p.ts\n',
  );
});

test('the folder direction is still checked, beside the cycles', () => {
  const root = tree({
    'core/a.ts': "import { s } from '../store/s.js';\nexport const a = s;\n",
    'store/s.ts': "import { a } from '../core/a.js';\nexport const s = a;\n",
  });
  const r = check(root);
  expect(r.status).toBe(1);
  expect(r.stderr).toBe(
    [
      'import direction violated:',
      '  core/a.ts (core) may not import store: ../store/s.js',
      'import cycles:',
      '  core/a.ts → store/s.ts → core/a.ts',
      '',
    ].join('\n'),
  );
});

test("the repository's src/ passes (the default root)", () => {
  const r = spawnSync(process.execPath, [SCRIPT], { encoding: 'utf8', timeout: 30_000 });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
});
