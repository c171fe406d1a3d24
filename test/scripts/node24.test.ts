/**
 * scripts/node24.mjs, which `.ci/run` and `npm run bench` use to run on Node 24 beside the
 * machine's Node: TOCK_NODE24 names the binary, and a binary of another line (or none that runs) is
 * refused in one line with exit 1 rather than used. (The install from the registry is run by
 * `.ci/run` itself.)
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';

const SCRIPT = path.resolve(import.meta.dirname, '../../scripts/node24.mjs');

function run(tockNode24: string) {
  return spawnSync(process.execPath, [SCRIPT], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, TOCK_NODE24: tockNode24 },
  });
}

test('TOCK_NODE24 naming this Node: used when it is Node 24, refused in one line otherwise', () => {
  const r = run(process.execPath);
  const major = Number(process.versions.node.split('.')[0]);
  if (major === 24) {
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`${process.execPath}\n`);
  } else {
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`node24: TOCK_NODE24=${process.execPath} is Node ${major}, not Node 24\n`);
  }
});

test('TOCK_NODE24 naming something that is not a Node binary is refused in one line', () => {
  const fake = path.join(tmpdir(), `not-node-${process.pid}`);
  writeFileSync(fake, 'not a program\n', { mode: 0o644 });
  const r = run(fake);
  expect(r.status).toBe(1);
  expect(r.stderr).toBe(`node24: TOCK_NODE24=${fake} is not a Node binary that runs\n`);
});
