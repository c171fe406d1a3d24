#!/usr/bin/env node
// The CLI lives in dist/. A checkout has none until it is built: `npm ci` does not build (`npm
// start`, `npm test`, `npm pack` and installs from git do). Say so in one line, not a stack trace.
let main;
let harmless;
try {
  ({ main, harmless } = await import('../dist/cli/main.js'));
} catch (err) {
  if (err?.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('/dist/cli/main.js')) {
    process.stderr.write('tock: dist/ is not built; run `npm run build` in the tock checkout first\n');
    process.exit(1);
  }
  throw err;
}

main(process.argv).catch((err) => {
  process.stderr.write(`tock: ${harmless(err instanceof Error ? err.message : String(err))}\n`);
  process.exit(1);
});
