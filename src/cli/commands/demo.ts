/** `tock demo`: the reference design's walk-through on a fake clock, against the real store. */
import type { Command } from 'commander';
import { defineCommand, type OptionsFor } from '../command.js';

async function demo(o: OptionsFor<'demo'>): Promise<void> {
  const [{ createLogger }, { runDemo }] = await Promise.all([
    import('../../runtime/logger.js'),
    import('../../runtime/demo.js'),
  ]);
  // Its stdout is the ten lines; warnings (embedded PostgreSQL's set-up as root) go to stderr.
  const logger = createLogger(o.logFormat, o.logLevel === 'info' ? 'warn' : o.logLevel, { stderr: true });
  await runDemo({
    logger,
    databaseUrl: o.databaseUrl,
    dataDir: o.dataDir,
    print: (line) => process.stdout.write(`${line}\n`),
  });
}

export function registerDemo(program: Command): void {
  defineCommand(
    program,
    'demo',
    "replay the reference design's walk-through on a fake clock against the real store and print its ten lines",
  ).action(demo);
}
