/**
 * The `tock` command line: argv → a runtime function. No business logic lives here; every
 * option has an environment variable and a default, and `--help` documents each. Each command is
 * one file of commands/ and its options are rows of options/table.ts. The runtime modules are
 * imported when their command runs, so a quick command (`tock jobs list`, `--help`) does not load
 * the API server, the database driver and the embedded PostgreSQL.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { registerDelay } from './commands/delay.js';
import { registerDemo } from './commands/demo.js';
import { registerDev } from './commands/dev.js';
import { registerDlq } from './commands/dlq.js';
import { registerJobs } from './commands/jobs.js';
import { registerKeys } from './commands/keys.js';
import { registerLimits } from './commands/limits.js';
import { registerMigrate } from './commands/migrate.js';
import { registerNotifications } from './commands/notifications.js';
import { registerRetention } from './commands/retention.js';
import { registerRuns } from './commands/runs.js';
import { registerSchedule } from './commands/schedule.js';
import { registerServer } from './commands/server.js';
import { registerStatus } from './commands/status.js';
import { registerWorker } from './commands/worker.js';
import { harmless } from './format/table.js';

export { harmless };

/** The package's version, from its package.json (two levels up from both src/cli and dist/cli). */
function packageVersion(): string {
  const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
  return String((JSON.parse(text) as { version?: unknown }).version);
}

/**
 * After a usage error (an unknown option, a bad value, a missing argument) commander prints its
 * one-line `error: …`; this adds one line saying where the options are, on every command, instead
 * of the whole usage text (which buried the error above a screenful of options).
 */
function hintHelpAfterErrors(cmd: Command, path: string): void {
  cmd.showHelpAfterError(
    `(tock${path} --help lists the ${cmd.commands.length > 0 ? 'commands' : 'options'})`,
  );
  for (const sub of cmd.commands) hintHelpAfterErrors(sub, `${path} ${sub.name()}`);
}

/** Every command, in the order `tock --help` lists them. */
export function buildProgram(): Command {
  const program = new Command('tock')
    .description(
      'Tock: a distributed job scheduler on PostgreSQL — cron, intervals and one-shots, on time and once each.',
    )
    .version(packageVersion(), '-V, --version', "print tock's version")
    .configureOutput({ writeErr: (s) => process.stderr.write(harmless(s)) });
  for (const register of [
    registerDev,
    registerServer,
    registerWorker,
    registerMigrate,
    registerDemo,
    registerSchedule,
    registerStatus,
    registerJobs,
    registerRuns,
    registerDlq,
    registerDelay,
    registerLimits,
    registerNotifications,
    registerRetention,
    registerKeys,
  ]) {
    register(program);
  }
  hintHelpAfterErrors(program, '');
  return program;
}

export async function main(argv: string[]): Promise<void> {
  await buildProgram().parseAsync(argv);
}
