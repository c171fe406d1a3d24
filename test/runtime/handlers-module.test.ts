/**
 * What `tock worker --handlers <module>` takes from a module: handlers by name as before, and job
 * definitions in every shape an application exports them, each counted once; a module with
 * neither, a list of something else, or a name defined twice is refused. No database.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { importHandlers, loadHandlers } from '../../src/runtime/handlers-module.js';

const ENTRY = pathToFileURL(path.resolve(import.meta.dirname, '../../src/worker/define-job.ts')).href;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'tock-handlers-module-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
/** A module of `body`, with `defineJob` imported, in a file of its own (modules are cached by URL). */
async function moduleOf(body: string): Promise<string> {
  const file = path.join(dir, `m${n++}.ts`);
  await writeFile(file, `import { defineJob } from ${JSON.stringify(ENTRY)};\n${body}\n`);
  return file;
}

const job = (id: string, extra = '') =>
  `defineJob({ id: '${id}', schedule: '@daily', handler: () => '${id}'${extra} })`;

describe('importHandlers', () => {
  test('takes handlers by name, as before, with no jobs', async () => {
    const file = await moduleOf('export default { a: () => 1, b: async () => 2 };');
    const loaded = await importHandlers(file);
    expect(Object.keys(loaded.handlers)).toEqual(['a', 'b']);
    expect(loaded.jobs).toEqual([]);
    const named = await importHandlers(await moduleOf('export const handlers = { c: () => 3 };'));
    expect(Object.keys(named.handlers)).toEqual(['c']);
  });

  test('takes definitions from a default list, named exports, a named list and the handlers object, each once', async () => {
    const file = await moduleOf(
      [
        `export const a = ${job('a')};`,
        `export const b = ${job('b')};`,
        `export const more = [${job('c')}, b];`,
        `export const handlers = { plain: () => 'plain', d: ${job('d')} };`,
        'export default [a, b];',
      ].join('\n'),
    );
    const loaded = await importHandlers(file);
    expect(loaded.jobs.map((j) => j.jobId).sort()).toEqual(['a', 'b', 'c', 'd']);
    expect(Object.keys(loaded.handlers).sort()).toEqual(['a', 'b', 'c', 'd', 'plain']);
    expect(await loaded.handlers.d!({} as never)).toBe('d');
    const single = await importHandlers(await moduleOf(`export default ${job('only')};`));
    expect(single.jobs.map((j) => j.jobId)).toEqual(['only']);
  });

  test('refuses a module with neither, a default list of something else, and a name defined twice', async () => {
    await expect(importHandlers(await moduleOf('export const x = 1;'))).rejects.toThrow(
      /must export handlers by name .* or job definitions/,
    );
    await expect(importHandlers(await moduleOf('export default [() => 1];'))).rejects.toThrow(
      /default export is a list of something other than job definitions/,
    );
    await expect(
      importHandlers(
        await moduleOf(`export const a = ${job('a')};\nexport const handlers = { a: () => 1 };`),
      ),
    ).rejects.toThrow(/: handler "a" of job "a" is defined twice: also in handlers/);
    await expect(
      importHandlers(
        await moduleOf(`export const a = ${job('a')};\nexport const b = ${job('a', ", handlerName: 'x'")};`),
      ),
    ).rejects.toThrow(/job "a" is defined twice/);
  });

  test("loadHandlers refuses a definition's handler name that the worker configuration also defines", async () => {
    const file = await moduleOf(`export default [${job('greet')}];`);
    const config = path.join(dir, 'worker.yaml');
    await writeFile(config, 'handlers:\n  greet:\n    exec: { argv: [echo, hi] }\n');
    await expect(loadHandlers({ handlersModule: file, configFile: config })).rejects.toThrow(
      /handler "greet" is defined twice/,
    );
  });
});
