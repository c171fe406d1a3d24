/**
 * The `tock` command line: argv → a runtime function. No business logic lives here; every
 * option has an environment variable and a default, and `--help` documents each. The runtime
 * modules are imported when their command runs, so a quick command (`tock jobs list`, `--help`)
 * does not load the API server, the database driver and the embedded PostgreSQL.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError, Option } from 'commander';
import {
  DEFAULT_MISFIRE_THRESHOLD_MS,
  MAX_MISFIRE_THRESHOLD_SECONDS,
  parseInstant,
  SystemClock,
} from '../core/index.js';
import type { LogFormat } from '../runtime/logger.js';
import { previewSchedule } from '../runtime/preview.js';
import {
  databaseOptions,
  duration,
  durationUpTo,
  heldRunOptions,
  intInRange,
  positiveInt,
  tenantList,
} from './options.js';
import { registerRemoteCommands } from './remote.js';
import { harmless } from './table.js';

export { harmless };

const EXAMPLE_JOBS = fileURLToPath(new URL('../../examples/jobs.yaml', import.meta.url));

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

function port(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65535)
    throw new InvalidArgumentError('expected a port from 0 to 65535 (0 picks a free one)');
  return n;
}

const listenOptions = (cmd: Command) =>
  cmd
    .addOption(
      new Option('--host <host>', 'address the API listens on').env('TOCK_HOST').default('127.0.0.1'),
    )
    .addOption(
      new Option('--port <port>', 'API port; 0 picks a free one')
        .env('TOCK_PORT')
        .default(8080)
        .argParser(port),
    );

const schedulerOptions = (cmd: Command) =>
  cmd
    .addOption(
      new Option('--lease <duration>', 'default lease of a run')
        .env('TOCK_LEASE')
        .default(30_000, '30s')
        .argParser(duration),
    )
    .addOption(
      new Option('--tick <duration>', 'pause between scheduler ticks (keep it below --lookahead)')
        .env('TOCK_TICK')
        .default(500, '500ms')
        .argParser(duration),
    )
    .addOption(
      new Option('--lookahead <duration>', 'materialise runs this far before their slot')
        .env('TOCK_LOOKAHEAD')
        .default(1000, '1s')
        .argParser(duration),
    )
    .addOption(
      new Option(
        '--shard-lease <duration>',
        "this node's leases on its shards of the job space: a node that dies is replaced after this long",
      )
        .env('TOCK_SHARD_LEASE')
        .default(10_000, '10s')
        .argParser(duration),
    )
    .addOption(
      new Option(
        '--misfire-threshold <duration>',
        "how late a job's next slot may be before its misfire policy applies, for jobs without misfire_threshold_seconds (give every server the same)",
      )
        .env('TOCK_MISFIRE_THRESHOLD')
        .default(DEFAULT_MISFIRE_THRESHOLD_MS, '60s')
        .argParser(durationUpTo(MAX_MISFIRE_THRESHOLD_SECONDS * 1000, '24h')),
    )
    .addOption(
      new Option('--tick-batch <n>', 'most due jobs per tick')
        .env('TOCK_TICK_BATCH')
        .default(1000)
        .argParser(positiveInt),
    )
    .addOption(
      new Option(
        '--max-clock-uncertainty <duration>',
        'refuse to schedule while the database clock offset is less certain than this',
      )
        .env('TOCK_MAX_CLOCK_UNCERTAINTY')
        .default(500, '500ms')
        .argParser(duration),
    );

/**
 * Installs SIGINT/SIGTERM handling before anything starts, so a signal during start-up is not
 * lost: the returned promise resolves on the first signal; a second signal exits at once.
 */
function stopSignal(log: (msg: string) => void): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (received) {
        log(`${signal} again: exiting now`);
        process.exit(130);
      }
      received = true;
      resolve(signal);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

export function buildProgram(): Command {
  const program = new Command('tock')
    .description(
      'Tock: a distributed job scheduler on PostgreSQL — cron, intervals and one-shots, on time and once each.',
    )
    .version(packageVersion(), '-V, --version', "print tock's version")
    .configureOutput({ writeErr: (s) => process.stderr.write(harmless(s)) });

  heldRunOptions(
    schedulerOptions(
      listenOptions(
        databaseOptions(
          program
            .command('dev')
            .description(
              'run everything in one process on the embedded database (or DATABASE_URL): migrations, the example jobs, the API on loopback without keys, scheduler, reaper and a worker; logs every run; Ctrl-C stops cleanly',
            ),
        ),
      ),
    ),
  )
    .addOption(
      new Option('--jobs <file>', 'YAML or JSON file of jobs registered at start')
        .env('TOCK_JOBS')
        .default(EXAMPLE_JOBS, 'examples/jobs.yaml'),
    )
    .addOption(
      new Option(
        '--handlers <module>',
        'JS module of your handlers for the worker (as tock worker takes); a name it shares with a built-in dev handler replaces it',
      ).env('TOCK_HANDLERS'),
    )
    .addOption(
      new Option(
        '--config <file>',
        'YAML worker config (as tock worker takes): the URL allow-list and the HTTP and command executors',
      ).env('TOCK_WORKER_CONFIG'),
    )
    .addOption(
      new Option('--concurrency <n>', 'runs the worker executes at once')
        .env('TOCK_CONCURRENCY')
        .default(10)
        .argParser(positiveInt),
    )
    .addOption(
      new Option('--poll <duration>', 'wait between claims when idle')
        .env('TOCK_POLL')
        .default(500, '500ms')
        .argParser(duration),
    )
    .addOption(
      new Option('--grace <duration>', 'time running handlers get to finish on Ctrl-C')
        .env('TOCK_GRACE')
        .default(10_000, '10s')
        .argParser(duration),
    )
    .action(async (opts) => {
      const [{ createLogger }, { startDev }] = await Promise.all([
        import('../runtime/logger.js'),
        import('../runtime/dev.js'),
      ]);
      const logger = createLogger(opts.logFormat as LogFormat, opts.logLevel);
      const signal = stopSignal((m) => logger.warn(m));
      const dev = await startDev({
        logger,
        databaseUrl: opts.databaseUrl,
        dataDir: opts.dataDir,
        schema: opts.schema,
        jobsFile: opts.jobs,
        handlersModule: opts.handlers,
        configFile: opts.config,
        leaseMs: opts.lease,
        tickMs: opts.tick,
        lookaheadMs: opts.lookahead,
        misfireThresholdMs: opts.misfireThreshold,
        batchSize: opts.tickBatch,
        shardLeaseMs: opts.shardLease,
        concurrency: opts.concurrency,
        prefetch: opts.prefetch,
        claimAheadMs: opts.claimAhead,
        pollMs: opts.poll,
        graceMs: opts.grace,
        maxClockUncertaintyMs: opts.maxClockUncertainty,
        host: opts.host,
        port: opts.port,
        announce: (line) => process.stdout.write(`${line}\n`),
      });
      await signal;
      await dev.stop();
      process.exit(0);
    });

  schedulerOptions(
    listenOptions(
      databaseOptions(
        program
          .command('server')
          .description(
            'run the API, the scheduler and the reaper against DATABASE_URL (or the embedded database); run several for availability',
          ),
      ),
    ),
  )
    .addOption(
      new Option(
        '--insecure',
        'serve without API keys (every caller is a cluster-admin of tenant "default")',
      ).default(false),
    )
    .addOption(
      new Option('--api-rate <n>', 'requests per second each tenant may make')
        .env('TOCK_API_RATE')
        .default(200)
        .argParser(positiveInt),
    )
    .addOption(
      new Option('--api-burst <n>', 'requests a tenant may make at once above the rate')
        .env('TOCK_API_BURST')
        .default(400)
        .argParser(positiveInt),
    )
    .addOption(
      new Option(
        '--request-timeout <duration>',
        'time a request (line, headers and body) has to arrive; a long-poll waits after it (default 30s)',
      )
        .env('TOCK_REQUEST_TIMEOUT')
        .argParser(duration),
    )
    .addOption(
      new Option(
        '--keep-alive-timeout <duration>',
        'an idle keep-alive connection is closed after this (default 5s)',
      )
        .env('TOCK_KEEP_ALIVE_TIMEOUT')
        .argParser(duration),
    )
    .addOption(
      new Option(
        '--max-connections <n>',
        'open connections at once; new ones beyond it are closed (default 1000)',
      )
        .env('TOCK_MAX_CONNECTIONS')
        .argParser(positiveInt),
    )
    .addOption(
      new Option(
        '--max-connections-per-address <n>',
        'open connections at once from one client address; new ones beyond it are closed; 0: no cap, behind a proxy (default 500)',
      )
        .env('TOCK_MAX_CONNECTIONS_PER_ADDRESS')
        .argParser(intInRange(0, 1_000_000)),
    )
    .addOption(
      new Option(
        '--long-polls-per-key <n>',
        'waiting lease long-polls per API key; more answer 429 (default 20)',
      )
        .env('TOCK_LONG_POLLS_PER_KEY')
        .argParser(positiveInt),
    )
    .addOption(
      new Option(
        '--long-polls-per-tenant <n>',
        'waiting lease long-polls per tenant; more answer 429 (default 100)',
      )
        .env('TOCK_LONG_POLLS_PER_TENANT')
        .argParser(positiveInt),
    )
    .addOption(
      new Option(
        '--metrics-port <port>',
        "also serve GET /metrics without a key on this port of 127.0.0.1 (0 picks a free one); the API's /metrics needs a cluster-admin key. Default: off",
      )
        .env('TOCK_METRICS_PORT')
        .argParser(port),
    )
    .action(async (opts) => {
      const [{ createLogger }, { startServer }] = await Promise.all([
        import('../runtime/logger.js'),
        import('../runtime/server.js'),
      ]);
      const logger = createLogger(opts.logFormat as LogFormat, opts.logLevel);
      const signal = stopSignal((m) => logger.warn(m));
      const server = await startServer({
        logger,
        databaseUrl: opts.databaseUrl,
        dataDir: opts.dataDir,
        schema: opts.schema,
        host: opts.host,
        port: opts.port,
        insecure: opts.insecure,
        leaseMs: opts.lease,
        tickMs: opts.tick,
        lookaheadMs: opts.lookahead,
        misfireThresholdMs: opts.misfireThreshold,
        batchSize: opts.tickBatch,
        shardLeaseMs: opts.shardLease,
        maxClockUncertaintyMs: opts.maxClockUncertainty,
        quota: { perSecond: opts.apiRate, burst: opts.apiBurst },
        limits: {
          requestTimeoutMs: opts.requestTimeout,
          keepAliveTimeoutMs: opts.keepAliveTimeout,
          maxConnections: opts.maxConnections,
          maxConnectionsPerAddress: opts.maxConnectionsPerAddress,
          longPollsPerKey: opts.longPollsPerKey,
          longPollsPerTenant: opts.longPollsPerTenant,
        },
        metricsPort: opts.metricsPort,
        announce: (line) => process.stdout.write(`${line}\n`),
      });
      await signal;
      await server.stop();
      process.exit(0);
    });

  heldRunOptions(
    databaseOptions(
      program
        .command('worker')
        .description(
          'pull runs and execute handlers: the functions of a handlers module and the built-in executors (HTTP calls, commands) of a worker config; straight from the database, or through a Tock server with --url; SIGTERM/Ctrl-C drains it',
        ),
    ),
  )
    .addOption(
      new Option(
        '--handlers <module>',
        'JS module whose default export (or `handlers` export) maps handler names to functions',
      ).env('TOCK_HANDLERS'),
    )
    .addOption(
      new Option(
        '--config <file>',
        'YAML worker config: the URL allow-list and the HTTP and command executors',
      ).env('TOCK_WORKER_CONFIG'),
    )
    .addOption(
      new Option('--url <url>', 'a Tock server to work through (its HTTP API) instead of the database').env(
        'TOCK_URL',
      ),
    )
    .addOption(new Option('--key <key>', 'API key with the worker role, for --url').env('TOCK_KEY'))
    .addOption(new Option('--pool <name>', 'pool to claim runs from').env('TOCK_POOL').default('default'))
    .addOption(
      new Option('--concurrency <n>', 'runs executed at once')
        .env('TOCK_CONCURRENCY')
        .default(10)
        .argParser(positiveInt),
    )
    .addOption(
      new Option('--grace <duration>', 'time running handlers get to finish on SIGTERM/Ctrl-C')
        .env('TOCK_GRACE')
        .default(30_000, '30s')
        .argParser(duration),
    )
    .addOption(
      new Option('--worker-id <id>', 'unique per process start (default: worker-<host>-<pid>-<random>)').env(
        'TOCK_WORKER_ID',
      ),
    )
    .addOption(
      new Option('--poll <duration>', 'wait between claims when idle')
        .env('TOCK_POLL')
        .default(1000, '1s')
        .argParser(duration),
    )
    .addOption(
      new Option('--lease <duration>', 'lease of a run whose job sets none (database connection only)')
        .env('TOCK_LEASE')
        .default(30_000, '30s')
        .argParser(duration),
    )
    .addOption(
      new Option(
        '--tenant <id>',
        "claim only this tenant's runs; repeat it, or give a comma list, for several (database only; default: every tenant's)",
      )
        .env('TOCK_TENANTS')
        .argParser(tenantList),
    )
    .action(async (opts) => {
      const [{ createLogger }, { startWorker }] = await Promise.all([
        import('../runtime/logger.js'),
        import('../runtime/worker.js'),
      ]);
      const logger = createLogger(opts.logFormat as LogFormat, opts.logLevel);
      const signal = stopSignal((m) => logger.warn(m));
      const running = await startWorker({
        logger,
        handlersModule: opts.handlers,
        configFile: opts.config,
        pool: opts.pool,
        concurrency: opts.concurrency,
        prefetch: opts.prefetch,
        claimAheadMs: opts.claimAhead,
        graceMs: opts.grace,
        workerId: opts.workerId,
        pollMs: opts.poll,
        url: opts.url,
        key: opts.key,
        databaseUrl: opts.databaseUrl,
        dataDir: opts.dataDir,
        schema: opts.schema,
        leaseMs: opts.lease,
        tenants: opts.tenant,
      });
      const refused = await Promise.race([signal.then(() => null), running.refused]);
      if (refused) logger.error(refused.message);
      await running.stop();
      process.exit(refused ? 1 : 0);
    });

  databaseOptions(program.command('migrate').description('apply pending schema migrations and exit')).action(
    async (opts) => {
      const [{ createLogger }, { openDatabase }] = await Promise.all([
        import('../runtime/logger.js'),
        import('../runtime/database.js'),
      ]);
      const logger = createLogger(opts.logFormat as LogFormat, opts.logLevel);
      const db = await openDatabase({
        databaseUrl: opts.databaseUrl,
        dataDir: opts.dataDir,
        schema: opts.schema,
        logger,
        poolSize: 2,
      });
      await db.close();
      logger.info({ database: db.where }, 'schema is current');
    },
  );

  databaseOptions(
    program
      .command('demo')
      .description(
        "replay the reference design's walk-through on a fake clock against the real store and print its ten lines",
      ),
  ).action(async (opts) => {
    const [{ createLogger }, { runDemo }] = await Promise.all([
      import('../runtime/logger.js'),
      import('../runtime/demo.js'),
    ]);
    // Its stdout is the ten lines; warnings (embedded PostgreSQL's set-up as root) go to stderr.
    const logger = createLogger(
      opts.logFormat as LogFormat,
      opts.logLevel === 'info' ? 'warn' : opts.logLevel,
      {
        stderr: true,
      },
    );
    await runDemo({
      logger,
      databaseUrl: opts.databaseUrl,
      dataDir: opts.dataDir,
      print: (line) => process.stdout.write(`${line}\n`),
    });
  });

  program
    .command('schedule')
    .description(
      'print the next slots of a schedule: the UTC instant, the local time with its offset, and where daylight saving moves or repeats a slot',
    )
    .argument(
      '<expression>',
      'cron (5 or 6 fields), a macro such as @daily, "@every <duration>" or "@at <instant>"',
    )
    .addOption(new Option('--timezone <zone>', 'IANA timezone the expression is read in').default('UTC'))
    .addOption(new Option('--count <n>', 'how many slots').default(10).argParser(positiveInt))
    .addOption(
      new Option('--from <instant>', 'list slots strictly after this ISO-8601 instant (default: now)'),
    )
    .action((expression: string, opts) => {
      const fromMs = opts.from === undefined ? new SystemClock().nowMs() : parseInstant(opts.from, '--from');
      const lines = previewSchedule({ expression, timezone: opts.timezone, count: opts.count, fromMs });
      process.stdout.write(`${lines.join('\n')}\n`);
    });

  registerRemoteCommands(program);
  hintHelpAfterErrors(program, '');
  return program;
}

export async function main(argv: string[]): Promise<void> {
  await buildProgram().parseAsync(argv);
}
