#!/usr/bin/env node
// Enforces the import direction of src/ (see STYLE.md): core ← store ← scheduler, worker ← runtime ← cli,
// with `index.ts` as the public surface, and no import cycles between folders.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const SRC = path.resolve(import.meta.dirname, '..', 'src');
// What each folder may import from (besides itself).
const ALLOWED = {
  core: [],
  store: ['core'],
  scheduler: ['core', 'store'],
  worker: ['core', 'store', 'client'],
  api: ['core', 'store', 'scheduler', 'worker'],
  client: ['core'],
  runtime: ['core', 'store', 'scheduler', 'worker', 'api', 'client'],
  cli: ['core', 'runtime', 'client'],
  '.': ['core', 'store', 'scheduler', 'worker', 'client', 'runtime'],
};

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return files(full);
    return name.endsWith('.ts') && !name.endsWith('.test.ts') ? [full] : [];
  });
}

const folderOf = (file) => path.relative(SRC, file).split(path.sep)[0].replace(/\.ts$/, '') || '.';
const problems = [];
for (const file of files(SRC)) {
  const from = path.relative(SRC, file).includes(path.sep) ? folderOf(file) : '.';
  const text = readFileSync(file, 'utf8');
  // Static imports and re-exports, and dynamic `import('…')` (the CLI loads runtime modules lazily).
  const specifiers = [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+'(\.[^']+)'/g),
    ...text.matchAll(/\bimport\(\s*'(\.[^']+)'\s*\)/g),
  ];
  for (const m of specifiers) {
    const target = path.resolve(path.dirname(file), m[1]);
    const rel = path.relative(SRC, target);
    if (rel.startsWith('..')) {
      problems.push(`${path.relative(SRC, file)} imports outside src: ${m[1]}`);
      continue;
    }
    const to = rel.includes(path.sep) ? rel.split(path.sep)[0] : '.';
    if (to === from) continue;
    if (!(ALLOWED[from] ?? []).includes(to)) {
      problems.push(`${path.relative(SRC, file)} (${from}) may not import ${to}: ${m[1]}`);
    }
  }
}
if (problems.length > 0) {
  console.error(`import direction violated:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log('import direction: ok');
