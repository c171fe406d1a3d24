#!/usr/bin/env node
// Writes the generated references from the built code (run `npm run build` first; `npm run docs`
// does both): docs/cli.md from the commander definitions of src/cli, docs/http-api.md from the
// OpenAPI document of src/api. Each page is formatted by Biome, as `npm run format` would.
// `--check` writes nothing and exits 1 when a committed page differs.
// test/docs/reference.test.ts makes the same comparison from the sources, as part of `npm test`.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { httpReference, openApiDocument } from '../dist/api/reference.js';
import { buildProgram } from '../dist/cli/main.js';
import { cliReference } from '../dist/cli/reference.js';
import { formatMarkdown } from './format-markdown.mjs';

const ROOT = path.resolve(import.meta.dirname, '..');

const pages = {
  'docs/cli.md': cliReference(buildProgram()),
  'docs/http-api.md': httpReference(await openApiDocument()),
};

const check = process.argv.includes('--check');
let stale = 0;
for (const [file, text] of Object.entries(pages)) {
  const formatted = formatMarkdown(text, file);
  const target = path.join(ROOT, file);
  let current = '';
  try {
    current = readFileSync(target, 'utf8');
  } catch {}
  if (current === formatted) continue;
  if (check) {
    console.error(`${file} is stale: run npm run docs`);
    stale++;
  } else {
    writeFileSync(target, formatted);
    console.log(`wrote ${file}`);
  }
}
process.exit(stale > 0 ? 1 : 0);
