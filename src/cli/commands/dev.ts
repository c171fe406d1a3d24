/** `tock dev`: everything in one process, for a laptop. */
import type { Command } from 'commander';
import { defineCommand, type OptionsFor } from '../command.js';
import { runUntilStopped, schedulerSettings } from './service.js';

type DevOptions = OptionsFor<'dev'>;

async function dev(o: DevOptions): Promise<void> {
  await runUntilStopped(o, async (logger, announce) => {
    const { startDev } = await import('../../runtime/dev.js');
    return startDev({
      logger,
      ...schedulerSettings(o),
      jobsFile: o.jobs,
      handlersModule: o.handlers,
      configFile: o.config,
      concurrency: o.concurrency,
      prefetch: o.prefetch,
      claimAheadMs: o.claimAhead,
      pollMs: o.poll,
      graceMs: o.grace,
      host: o.host,
      port: o.port,
      announce,
    });
  });
}

export function registerDev(program: Command): void {
  defineCommand(
    program,
    'dev',
    'run everything in one process on the embedded database (or DATABASE_URL): migrations, the example jobs, the API and the web console (/) on loopback without keys, scheduler, reaper and a worker; logs every run; Ctrl-C stops cleanly',
  ).action(dev);
}
