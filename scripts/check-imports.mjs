#!/usr/bin/env node
// Enforces the import rules of src/ (see STYLE.md), exit 1 on any breach:
// - direction: core ← store ← scheduler, worker ← runtime ← cli (api beside runtime), so no cycle
//   between folders;
// - no import cycle between files, inside a folder too: every relative import counts (static,
//   `import type`, `export … from`, side-effect, dynamic `import('…')`), and each cycle is printed
//   as `api/app.ts → api/routes/index.ts → api/app.ts`.
// Usage: node scripts/check-imports.mjs [src root] (or TOCK_SRC=<dir>); default src/.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const SRC = path.resolve(
  process.argv[2] ?? process.env.TOCK_SRC ?? path.join(import.meta.dirname, '..', 'src'),
);
// What each folder may import from (besides itself).
const ALLOWED = {
  core: [],
  store: ['core'],
  scheduler: ['core', 'store'],
  worker: ['core', 'store'],
  api: ['core', 'store', 'scheduler', 'worker'],
  client: ['core'],
  // The web console runs in the browser and knows only the HTTP contract (it calls /v1).
  console: [],
  runtime: ['core', 'store', 'scheduler', 'worker', 'api', 'client'],
  cli: ['core', 'runtime', 'client'],
  '.': ['core', 'store', 'scheduler', 'worker', 'client', 'runtime'],
};

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return files(full);
    return /\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name) ? [full] : [];
  });
}

/** The relative specifiers a file imports: static, type-only, re-exports, side-effect and dynamic. */
function specifiers(text) {
  return [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+['"](\.[^'"]+)['"]/g),
    ...text.matchAll(/(?:^|\n)\s*import\s+['"](\.[^'"]+)['"]/g),
    ...text.matchAll(/\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/g),
  ].map((m) => m[1]);
}

/** The source file a specifier names (`./x.js` is `./x.ts` or `./x.tsx`), or null when there is none. */
function resolve(from, specifier) {
  const target = path.resolve(path.dirname(from), specifier);
  const candidates = [
    target.replace(/\.js$/, '.ts'),
    target.replace(/\.js$/, '.tsx'),
    `${target}.ts`,
    path.join(target, 'index.ts'),
  ];
  return candidates.find((c) => /\.tsx?$/.test(c) && existsSync(c) && statSync(c).isFile()) ?? null;
}

const rel = (file) => path.relative(SRC, file).split(path.sep).join('/');
const folderOf = (file) => (rel(file).includes('/') ? rel(file).split('/')[0] : '.');

const problems = [];
/** Each file's imports of other src files, in the order written. */
const graph = new Map();
for (const file of files(SRC)) {
  const from = folderOf(file);
  const edges = [];
  for (const specifier of specifiers(readFileSync(file, 'utf8'))) {
    const target = path.resolve(path.dirname(file), specifier);
    if (path.relative(SRC, target).startsWith('..')) {
      problems.push(`${rel(file)} imports outside src: ${specifier}`);
      continue;
    }
    const resolved = resolve(file, specifier);
    if (resolved !== null) edges.push(resolved);
    const to = path.relative(SRC, target).includes(path.sep)
      ? path.relative(SRC, target).split(path.sep)[0]
      : '.';
    if (to !== from && !(ALLOWED[from] ?? []).includes(to)) {
      problems.push(`${rel(file)} (${from}) may not import ${to}: ${specifier}`);
    }
  }
  graph.set(file, edges);
}

/**
 * The import cycles, one per back edge of a depth-first walk (so at least one in every group of
 * files that import each other), each from its first file back to it, without repeats.
 */
function cycles(graph) {
  const found = new Map();
  const state = new Map(); // file → 'open' while on the walk's path, 'done' after
  const stack = [];
  const visit = (file) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') {
        const cycle = stack.slice(stack.indexOf(next));
        // The same cycle met from another file is one cycle: key it by its smallest rotation.
        const start = cycle.indexOf([...cycle].sort()[0]);
        const key = [...cycle.slice(start), ...cycle.slice(0, start)].join('\n');
        if (!found.has(key)) found.set(key, [...cycle, next].map(rel).join(' → '));
      } else if (!state.has(next)) {
        visit(next);
      }
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return [...found.values()];
}

const loops = cycles(graph);
if (problems.length > 0) console.error(`import direction violated:\n  ${problems.join('\n  ')}`);
if (loops.length > 0) console.error(`import cycles:\n  ${loops.join('\n  ')}`);
if (problems.length > 0 || loops.length > 0) process.exit(1);
console.log('import direction: ok; no import cycles');
