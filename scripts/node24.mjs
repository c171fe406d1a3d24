#!/usr/bin/env node
// A Node.js 24 binary (the current LTS line) beside the machine's Node, for `.ci/run` (the tests run
// on both) and `npm run bench` (the peers' current releases need Node 22 or later). The `node@24`
// package of the npm registry ships the binary: it is installed once into
// node_modules/.cache/tock-node24 (about 10 s), and the machine's Node is left as it is.
// TOCK_NODE24 names a Node 24 binary to use instead.
//
//   node scripts/node24.mjs        prints the binary's path (progress on stderr)
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const NODE_LINE = 24;
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const prefix = path.join(root, 'node_modules', '.cache', `tock-node${NODE_LINE}`);
const INSTALL_TIMEOUT_MS = 5 * 60_000;

/** The major version of the Node binary at `bin`, or null if it does not run. */
function majorOf(bin) {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  const m = r.status === 0 ? /^v(\d+)\./.exec(r.stdout) : null;
  return m ? Number(m[1]) : null;
}

/** The path of a Node 24 binary; installs one from the npm registry the first time. Throws with one line on failure. */
export function node24Path() {
  const given = process.env.TOCK_NODE24;
  if (given) {
    const major = majorOf(given);
    if (major !== NODE_LINE) {
      throw new Error(
        major === null
          ? `TOCK_NODE24=${given} is not a Node binary that runs`
          : `TOCK_NODE24=${given} is Node ${major}, not Node ${NODE_LINE}`,
      );
    }
    return given;
  }
  if (Number(process.versions.node.split('.')[0]) === NODE_LINE) return process.execPath;
  const bin = path.join(prefix, 'node_modules', '.bin', 'node');
  if (existsSync(bin) && majorOf(bin) === NODE_LINE) return bin;
  process.stderr.write(
    `installing Node.js ${NODE_LINE} from the npm registry into ${path.relative(process.cwd(), prefix)} …\n`,
  );
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(
    npm,
    [
      'install',
      '--prefix',
      prefix,
      '--no-audit',
      '--no-fund',
      '--no-save',
      '--loglevel',
      'error',
      `node@${NODE_LINE}`,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'], timeout: INSTALL_TIMEOUT_MS },
  );
  if (r.error || r.status !== 0 || majorOf(bin) !== NODE_LINE) {
    const why =
      r.error?.code === 'ETIMEDOUT'
        ? 'timed out after 5 minutes'
        : (r.error?.message ?? `npm exited with ${r.status}`);
    throw new Error(
      `could not install Node.js ${NODE_LINE} (npm install node@${NODE_LINE}: ${why}); set TOCK_NODE24 to a Node ${NODE_LINE} binary`,
    );
  }
  return bin;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    console.log(node24Path());
  } catch (err) {
    console.error(`node24: ${err.message}`);
    process.exit(1);
  }
}
