/** `tock server`: the API, the scheduler and the reaper, one of several nodes. */
import type { Command } from 'commander';
import { defineCommand, type OptionsFor } from '../command.js';
import { runUntilStopped, schedulerSettings } from './service.js';

type ServerOptions = OptionsFor<'server'>;

async function server(o: ServerOptions): Promise<void> {
  await runUntilStopped(o, async (logger, announce) => {
    const { startServer } = await import('../../runtime/server.js');
    return startServer({
      logger,
      ...schedulerSettings(o),
      host: o.host,
      port: o.port,
      insecure: o.insecure,
      quota: { perSecond: o.apiRate, burst: o.apiBurst },
      workerQuota: { perSecond: o.workerRate, burst: o.workerBurst },
      limits: {
        requestTimeoutMs: o.requestTimeout,
        keepAliveTimeoutMs: o.keepAliveTimeout,
        maxConnections: o.maxConnections,
        maxConnectionsPerAddress: o.maxConnectionsPerAddress,
        longPollsPerKey: o.longPollsPerKey,
        longPollsPerTenant: o.longPollsPerTenant,
      },
      metricsPort: o.metricsPort,
      metricsJobs: { topJobs: o.metricsTopJobs, windowMs: o.metricsJobWindow },
      announce,
    });
  });
}

export function registerServer(program: Command): void {
  defineCommand(
    program,
    'server',
    'run the API (with the web console at /), the scheduler and the reaper against DATABASE_URL (or the embedded database); run several for availability',
  ).action(server);
}
