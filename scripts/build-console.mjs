#!/usr/bin/env node
// Bundles the web console (src/console/, browser code) into dist/console/: one minified script and
// one style sheet, each named with a hash of its content (so the server may let browsers cache them
// for a year), and index.html that loads them. No inline script or style: the server's
// Content-Security-Policy forbids both. Part of `npm run build`; `--sizes` prints each file's size,
// raw and gzipped, and the gzipped total.
// Usage: node scripts/build-console.mjs [--sizes]
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const root = path.join(import.meta.dirname, '..');
const src = path.join(root, 'src', 'console');
const out = path.join(root, 'dist', 'console');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const result = await build({
  entryPoints: { app: path.join(src, 'main.tsx'), style: path.join(src, 'console.css') },
  outdir: out,
  entryNames: '[name]-[hash]',
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
});

const built = Object.keys(result.metafile.outputs).map((f) => path.basename(f));
const script = built.find((f) => f.endsWith('.js'));
const style = built.find((f) => f.endsWith('.css'));
if (!script || !style) throw new Error(`build-console: expected a script and a style sheet, got ${built}`);

const page = readFileSync(path.join(src, 'index.html'), 'utf8')
  .replace('%SCRIPT%', `/console/${script}`)
  .replace('%STYLE%', `/console/${style}`);
writeFileSync(path.join(out, 'index.html'), page);

if (process.argv.includes('--sizes')) {
  let total = 0;
  for (const name of readdirSync(out).sort()) {
    const body = readFileSync(path.join(out, name));
    const gz = gzipSync(body).length;
    total += gz;
    console.log(
      `${name.padEnd(28)} ${String(body.length).padStart(8)} B  ${String(gz).padStart(7)} B gzipped`,
    );
  }
  console.log(`${'total'.padEnd(28)} ${''.padStart(10)}  ${String(total).padStart(7)} B gzipped`);
}
