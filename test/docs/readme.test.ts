/**
 * The README stays a short, true front page: its example is examples/hello.ts as it is (which
 * `npm run lint` compiles and test/e2e/example.test.ts runs), it stays under 12 KB, and every
 * relative link points at a file that exists.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

test('the README shows examples/hello.ts exactly', () => {
  const example = readFileSync(path.join(ROOT, 'examples/hello.ts'), 'utf8');
  const blocks = [...README.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  expect(blocks, 'the README has one ts block: examples/hello.ts').toHaveLength(1);
  expect(
    blocks[0] === example,
    'the README code block differs from examples/hello.ts: copy the file into it',
  ).toBe(true);
});

test('the README is at most 12 KB', () => {
  expect(Buffer.byteLength(README)).toBeLessThanOrEqual(12 * 1024);
});

test('every relative link of the README and docs/ points at a file that exists', () => {
  const pages = [
    'README.md',
    'AGENTS.md',
    'examples/workers/python/README.md',
    'examples/workers/shell/README.md',
    ...[
      'cli',
      'http-api',
      'configuration',
      'operations',
      'guarantees',
      'benchmarks',
      'workers-any-language',
    ].map((p) => `docs/${p}.md`),
  ];
  for (const page of pages) {
    const text = readFileSync(path.join(ROOT, page), 'utf8');
    for (const m of text.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)) {
      const target = m[1]!;
      if (/^[a-z]+:/.test(target)) continue;
      expect(existsSync(path.join(ROOT, path.dirname(page), target)), `${page} links to ${target}`).toBe(
        true,
      );
    }
  }
});
