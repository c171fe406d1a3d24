/**
 * scripts/sizes.mjs on a fixture folder written here: files ranked by lines as `wc -l` counts them
 * (declarations and tests left out), functions and methods ranked by their own lines with names
 * that say where they are, `--top` cutting both lists, and the limits: the offenders listed and
 * exit 1 when anything is over (0 otherwise), 2 on a bad command line.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { measure, parseArgs, report } from '../../scripts/sizes.mjs';

const SCRIPT = path.resolve(import.meta.dirname, '../../scripts/sizes.mjs');

let dir: string;

/** `n` statements, one a line. */
const body = (n: number, indent = '  ') =>
  Array.from({ length: n }, (_, i) => `${indent}console.log(${i});`).join('\n');

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'tock-sizes-'));
  mkdirSync(path.join(dir, 'src/inner'), { recursive: true });
  // 13 lines: `big` spans all of them, with a 4-line arrow function inside at lines 3-6.
  writeFileSync(
    path.join(dir, 'src/a.ts'),
    `${[
      'export function big() {',
      '  console.log(-1);',
      '  const helper = () => {',
      body(2, '    '),
      '  };',
      body(5),
      '  return helper;',
      '}',
    ].join('\n')}\n`,
  );
  // 10 lines: a class with a 5-line method and a constructor, and a function passed to a call.
  writeFileSync(
    path.join(dir, 'src/inner/b.ts'),
    [
      'export class Store {',
      '  constructor(readonly n: number) {}',
      '  run(): void {',
      body(3, '    '),
      '  }',
      '}',
      'setTimeout(function () {',
      '}, 0);',
      '',
    ].join('\n'),
  );
  // Left out: a declaration and a test, however long.
  writeFileSync(path.join(dir, 'src/c.d.ts'), `${body(50)}\n`);
  writeFileSync(path.join(dir, 'src/c.test.ts'), `function t() {\n${body(50)}\n}\n`);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What `sizes.mjs <args>` prints, run in the fixture's folder, and how many things are over a limit. */
function sizes(...args: string[]) {
  const options = parseArgs(args);
  return report(measure(options.folders, dir), options);
}

const fn = (lines: number, where: string, name: string) =>
  `${String(lines).padStart(6)}  ${where.padEnd(44)}  ${name}`;

test('lists the files and the functions, largest first, with where each function starts', () => {
  expect(sizes()).toEqual({
    over: 0,
    text: [
      'Largest files in src (lines), top 20 of 2:',
      '    13  src/a.ts',
      '    10  src/inner/b.ts',
      '',
      'Largest functions and methods in src (lines), top 20 of 5:',
      fn(13, 'src/a.ts:1', 'big'),
      fn(5, 'src/inner/b.ts:3', 'Store.run'),
      fn(4, 'src/a.ts:3', 'big.helper'),
      fn(2, 'src/inner/b.ts:9', '<callback>'),
      fn(1, 'src/inner/b.ts:2', 'Store.constructor'),
      '',
    ].join('\n'),
  });
});

test('--top cuts both lists; another folder may be named', () => {
  expect(sizes('src/inner', '--top', '1').text).toBe(
    [
      'Largest files in src/inner (lines), top 1 of 1:',
      '    10  src/inner/b.ts',
      '',
      'Largest functions and methods in src/inner (lines), top 1 of 3:',
      fn(5, 'src/inner/b.ts:3', 'Store.run'),
      '',
    ].join('\n'),
  );
});

test('with limits, what is over them is listed after the lists', () => {
  const { text, over } = sizes('--top', '1', '--max-file', '10', '--max-function', '4');
  expect(over).toBe(3);
  expect(text.split('\n\n').slice(2)).toEqual([
    'Files over 10 lines: 1\n    13  src/a.ts',
    [
      'Functions over 4 lines: 2',
      fn(13, 'src/a.ts:1', 'big'),
      fn(5, 'src/inner/b.ts:3', 'Store.run'),
      '',
    ].join('\n'),
  ]);
  const within = sizes('--max-file', '13', '--max-function', '13');
  expect(within.over).toBe(0);
  expect(within.text).toContain('\nFiles over 13 lines: 0\n\nFunctions over 13 lines: 0\n');
});

test('a bad command line is refused with the usage', () => {
  for (const args of [['--max-file', 'many'], ['--max-file'], ['--top', '0'], ['--wat']]) {
    expect(() => parseArgs(args), args.join(' ')).toThrow(/\nusage: sizes\.mjs /);
  }
});

test('the command prints the report and exits 1 when something is over a limit, 2 on a bad command line', () => {
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [SCRIPT, ...args], { cwd: dir, encoding: 'utf8' });
  const over = run('--max-file', '10');
  expect(over.status).toBe(1);
  expect(over.stdout).toBe(sizes('--max-file', '10').text);
  const bad = run('no-such-folder');
  expect(bad.status).toBe(2);
  expect(bad.stdout).toBe('');
  expect(bad.stderr).toMatch(/^sizes: ENOENT/);
});
