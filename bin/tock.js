#!/usr/bin/env node
// The CLI lives in dist/. A checkout has none until it is built (`npm ci` does not build; `npm
// start`, `npm test` and `npm pack` do): in a checkout with its dev dependencies, the first command
// builds it (a line on stderr says so), so `npm ci && node bin/tock.js demo` works. Anywhere else it
// says what to do in one line, not a stack trace.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const load = () => import('../dist/cli/main.js');
const unbuilt = (err) =>
  err?.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('/dist/cli/main.js');

let cli;
try {
  cli = await load();
} catch (err) {
  if (!unbuilt(err)) throw err;
  const tsc = `${root}node_modules/typescript/bin/tsc`;
  if (!existsSync(`${root}tsconfig.build.json`) || !existsSync(tsc)) {
    process.stderr.write('tock: dist/ is not built; run `npm run build` in the tock checkout first\n');
    process.exit(1);
  }
  process.stderr.write('tock: dist/ is not built yet: building it (npm run build) …\n');
  const built = spawnSync(process.execPath, [tsc, '-b', `${root}tsconfig.build.json`], {
    cwd: root,
    stdio: ['ignore', 2, 2],
  });
  // The web console's bundle (scripts/build-console.mjs, with esbuild, a dev dependency).
  const consoleBuild = `${root}scripts/build-console.mjs`;
  const bundled =
    built.status === 0 && existsSync(consoleBuild) && existsSync(`${root}node_modules/esbuild`)
      ? spawnSync(process.execPath, [consoleBuild], { cwd: root, stdio: ['ignore', 2, 2] })
      : built;
  if (built.status !== 0 || bundled.status !== 0) {
    process.stderr.write('tock: the build failed (above); fix it, then run `npm run build`\n');
    process.exit(1);
  }
  cli = await load();
}

cli.main(process.argv).catch((err) => {
  process.stderr.write(`tock: ${cli.harmless(err instanceof Error ? err.message : String(err))}\n`);
  process.exit(1);
});
