/**
 * The generated references match the code: docs/cli.md is what the commander definitions of
 * src/cli say, docs/http-api.md what the OpenAPI document of src/api says, each formatted by Biome
 * as `npm run format` leaves it. A change to an option, a command, a route or a schema fails here
 * until `npm run docs` rewrites the page. No database: the OpenAPI document is built without one.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { formatMarkdown } from '../../scripts/format-markdown.mjs';
import { httpReference, openApiDocument } from '../../src/api/reference.js';
import { buildProgram } from '../../src/cli/main.js';
import { cliReference } from '../../src/cli/reference.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

function expectCurrent(file: string, generated: string): void {
  const committed = readFileSync(path.join(ROOT, file), 'utf8');
  const expected = formatMarkdown(generated, file);
  // One readable line rather than a diff of a 60 KB page; `git diff` after `npm run docs` shows it.
  expect(committed === expected, `${file} is stale: run npm run docs`).toBe(true);
}

describe('generated references', () => {
  test('docs/cli.md is what the commander definitions say', () => {
    expectCurrent('docs/cli.md', cliReference(buildProgram()));
  });

  test('docs/http-api.md is what the OpenAPI document says', async () => {
    expectCurrent('docs/http-api.md', httpReference(await openApiDocument()));
  });

  test('the CLI reference names every command, option and environment variable', () => {
    const program = buildProgram();
    const text = cliReference(program);
    const walk = (c: typeof program): (typeof program)[] => c.commands.flatMap((s) => [s, ...walk(s)]);
    for (const cmd of walk(program)) {
      for (const o of cmd.options) {
        // In a table cell a `|` is written `\|`.
        expect(text).toContain(`\`${o.flags.replaceAll('|', '\\|')}\``);
        if (o.envVar) expect(text).toContain(`\`${o.envVar}\``);
      }
    }
    expect(text).toContain('## tock jobs put');
    // Nothing of this machine: the default of --jobs is described, not the absolute path.
    expect(text).not.toContain(ROOT);
  });

  test('the HTTP reference names every operation and every field of a job', async () => {
    const doc = await openApiDocument();
    const text = httpReference(doc);
    for (const [p, ops] of Object.entries<Record<string, unknown>>(doc.paths)) {
      for (const method of Object.keys(ops)) expect(text).toContain(`### ${method.toUpperCase()} ${p}`);
    }
    const job = doc.paths['/v1/jobs/{job_id}'].put.requestBody.content['application/json'].schema;
    for (const field of Object.keys(job.properties)) expect(text).toContain(`\`${field}\``);
    expect(text).toContain('`jitter_seconds`');
    expect(text).toContain('`timeout_seconds`');
    expect(text).toContain('### POST /v1/runs/{run_id}/release');
  });

  test('docs/configuration.md describes every field a job takes', async () => {
    const doc = await openApiDocument();
    const job = doc.paths['/v1/jobs/{job_id}'].put.requestBody.content['application/json'].schema;
    const text = readFileSync(path.join(ROOT, 'docs/configuration.md'), 'utf8');
    for (const field of ['job_id', ...Object.keys(job.properties)]) {
      expect(text, `docs/configuration.md has no row for ${field}`).toMatch(
        new RegExp(`^\\| \`${field}\` `, 'm'),
      );
    }
  });
});
