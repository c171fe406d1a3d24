/**
 * The options of every `tock` command, in one table: command path → its options in `--help`
 * order. Each row says the flags, the description, the environment variable, the default and how
 * the argument is parsed. From it come commander's definitions (`addOptions`, called by each
 * command's `register…`), the type of each action's options (`OptionsOf<Options['dev']>`), and
 * so `--help` and `docs/cli.md` (src/cli/reference.ts reads the definitions).
 * test/cli/options.test.ts checks that each command has exactly these options and that the
 * reference lists every one.
 */
import { fileURLToPath } from 'node:url';
import {
  DEFAULT_DELAY_RANGE_MS,
  DEFAULT_DELAY_STEP_MS,
  DEFAULT_JOB_WINDOW_MS,
  DEFAULT_RETENTION,
  DEFAULT_TOP_JOBS,
  MAX_BACKFILL_SLOTS,
  MAX_DELAY_BUCKETS,
  MAX_DELAY_RANGE_MS,
  MAX_TOP_JOBS,
  MIN_DELAY_STEP_MS,
  NOTIFICATION_EVENTS,
  RETENTION_STATES,
  ROLES,
  RUN_STATES,
} from '../../core/index.js';
import { agingStep, apiClient, database, heldRuns, listen, paging, scheduler } from './groups.js';
import {
  decimal,
  duration,
  durationBetween,
  idempotencyKey,
  instant,
  intInRange,
  json,
  nonNegativeInt,
  notificationEvents,
  port,
  positiveInt,
  retentionValue,
  seconds,
  tenantList,
} from './parsers.js';
import type { OptionTable } from './spec.js';

const EXAMPLE_JOBS = fileURLToPath(new URL('../../../examples/jobs.yaml', import.meta.url));

const dev = {
  ...database,
  ...listen,
  ...scheduler,
  ...heldRuns,
  jobs: {
    flags: '--jobs <file>',
    description: 'YAML or JSON file of jobs registered at start',
    env: 'TOCK_JOBS',
    default: EXAMPLE_JOBS,
    defaultText: 'examples/jobs.yaml',
  },
  handlers: {
    flags: '--handlers <module>',
    description:
      'JS module of your handlers and defined jobs for the worker (as tock worker takes; its jobs are registered after --jobs); a name it shares with a built-in dev handler replaces it',
    env: 'TOCK_HANDLERS',
  },
  config: {
    flags: '--config <file>',
    description:
      'YAML worker config (as tock worker takes): the URL allow-list and the HTTP and command executors',
    env: 'TOCK_WORKER_CONFIG',
  },
  concurrency: {
    flags: '--concurrency <n>',
    description: 'runs the worker executes at once',
    env: 'TOCK_CONCURRENCY',
    default: 10,
    parse: positiveInt,
  },
  poll: {
    flags: '--poll <duration>',
    description: 'wait between claims when idle',
    env: 'TOCK_POLL',
    default: 500,
    defaultText: '500ms',
    parse: duration,
  },
  grace: {
    flags: '--grace <duration>',
    description: 'time running handlers get to finish on Ctrl-C',
    env: 'TOCK_GRACE',
    default: 10_000,
    defaultText: '10s',
    parse: duration,
  },
} as const;

const server = {
  ...database,
  ...listen,
  ...scheduler,
  insecure: {
    flags: '--insecure',
    description: 'serve without API keys (every caller is a cluster-admin of tenant "default")',
    default: false,
  },
  apiRate: {
    flags: '--api-rate <n>',
    description: "requests per second each tenant may make (its workers' lease requests are counted apart)",
    env: 'TOCK_API_RATE',
    default: 200,
    parse: positiveInt,
  },
  apiBurst: {
    flags: '--api-burst <n>',
    description: 'requests a tenant may make at once above the rate',
    env: 'TOCK_API_BURST',
    default: 400,
    parse: positiveInt,
  },
  workerRate: {
    flags: '--worker-rate <n>',
    description:
      "lease requests (claims, heartbeats, results: one per batch) per second each tenant's workers may make",
    env: 'TOCK_WORKER_RATE',
    default: 1000,
    parse: positiveInt,
  },
  workerBurst: {
    flags: '--worker-burst <n>',
    description: "lease requests a tenant's workers may make at once above the worker rate",
    env: 'TOCK_WORKER_BURST',
    default: 2000,
    parse: positiveInt,
  },
  requestTimeout: {
    flags: '--request-timeout <duration>',
    description:
      'time a request (line, headers and body) has to arrive; a long-poll waits after it (default 30s)',
    env: 'TOCK_REQUEST_TIMEOUT',
    parse: duration,
  },
  keepAliveTimeout: {
    flags: '--keep-alive-timeout <duration>',
    description: 'an idle keep-alive connection is closed after this (default 5s)',
    env: 'TOCK_KEEP_ALIVE_TIMEOUT',
    parse: duration,
  },
  maxConnections: {
    flags: '--max-connections <n>',
    description: 'open connections at once; new ones beyond it are closed (default 1000)',
    env: 'TOCK_MAX_CONNECTIONS',
    parse: positiveInt,
  },
  maxConnectionsPerAddress: {
    flags: '--max-connections-per-address <n>',
    description:
      'open connections at once from one client address; new ones beyond it are closed; 0: no cap, behind a proxy (default 500)',
    env: 'TOCK_MAX_CONNECTIONS_PER_ADDRESS',
    parse: intInRange(0, 1_000_000),
  },
  longPollsPerKey: {
    flags: '--long-polls-per-key <n>',
    description: 'waiting lease long-polls per API key; more answer 429 (default 20)',
    env: 'TOCK_LONG_POLLS_PER_KEY',
    parse: positiveInt,
  },
  longPollsPerTenant: {
    flags: '--long-polls-per-tenant <n>',
    description: 'waiting lease long-polls per tenant; more answer 429 (default 100)',
    env: 'TOCK_LONG_POLLS_PER_TENANT',
    parse: positiveInt,
  },
  metricsPort: {
    flags: '--metrics-port <port>',
    description:
      "also serve GET /metrics without a key on this port of 127.0.0.1 (0 picks a free one); the API's /metrics needs a cluster-admin key. Default: off",
    env: 'TOCK_METRICS_PORT',
    parse: port,
  },
  metricsTopJobs: {
    flags: '--metrics-top-jobs <n>',
    description: `jobs in each per-job top N of /metrics (the latest, the most dead runs, the latest misfires), 1-${MAX_TOP_JOBS}`,
    env: 'TOCK_METRICS_TOP_JOBS',
    default: DEFAULT_TOP_JOBS,
    parse: intInRange(1, MAX_TOP_JOBS),
  },
  metricsJobWindow: {
    flags: '--metrics-job-window <duration>',
    description: 'the recent stretch of slots and misfires the per-job gauges of /metrics read, 1s to 1d',
    env: 'TOCK_METRICS_JOB_WINDOW',
    default: DEFAULT_JOB_WINDOW_MS,
    defaultText: '5m',
    parse: durationBetween(1000, 86_400_000, '1s to 1d'),
  },
} as const;

const worker = {
  ...database,
  ...heldRuns,
  handlers: {
    flags: '--handlers <module>',
    description:
      'JS module whose default export (or `handlers` export) maps handler names to functions, and/or that exports jobs defined with defineJob (upserted at start, their handlers served)',
    env: 'TOCK_HANDLERS',
  },
  config: {
    flags: '--config <file>',
    description: 'YAML worker config: the URL allow-list and the HTTP and command executors',
    env: 'TOCK_WORKER_CONFIG',
  },
  url: {
    flags: '--url <url>',
    description: 'a Tock server to work through (its HTTP API) instead of the database',
    env: 'TOCK_URL',
  },
  key: { flags: '--key <key>', description: 'API key with the worker role, for --url', env: 'TOCK_KEY' },
  pool: {
    flags: '--pool <name>',
    description: 'pool to claim runs from',
    env: 'TOCK_POOL',
    default: 'default',
  },
  concurrency: {
    flags: '--concurrency <n>',
    description: 'runs executed at once',
    env: 'TOCK_CONCURRENCY',
    default: 10,
    parse: positiveInt,
  },
  grace: {
    flags: '--grace <duration>',
    description: 'time running handlers get to finish on SIGTERM/Ctrl-C',
    env: 'TOCK_GRACE',
    default: 30_000,
    defaultText: '30s',
    parse: duration,
  },
  workerId: {
    flags: '--worker-id <id>',
    description: 'unique per process start (default: worker-<host>-<pid>-<random>)',
    env: 'TOCK_WORKER_ID',
  },
  poll: {
    flags: '--poll <duration>',
    description: 'wait between claims when idle',
    env: 'TOCK_POLL',
    default: 1000,
    defaultText: '1s',
    parse: duration,
  },
  lease: {
    flags: '--lease <duration>',
    description: 'lease of a run whose job sets none (database connection only)',
    env: 'TOCK_LEASE',
    default: 30_000,
    defaultText: '30s',
    parse: duration,
  },
  agingStep: {
    ...agingStep,
    description: `${agingStep.description}; for the retries it writes (database connection only)`,
  },
  tenant: {
    flags: '--tenant <id>',
    description:
      "claim only this tenant's runs; repeat it, or give a comma list, for several (database only; default: every tenant's)",
    env: 'TOCK_TENANTS',
    parse: tenantList,
  },
} as const;

const schedule = {
  timezone: {
    flags: '--timezone <zone>',
    description: 'IANA timezone the expression is read in',
    default: 'UTC',
  },
  count: { flags: '--count <n>', description: 'how many slots', default: 10, parse: positiveInt },
  from: {
    flags: '--from <instant>',
    description: 'list slots strictly after this ISO-8601 instant (default: now)',
  },
} as const;

/**
 * The job-definition flags of `tock jobs put` (src/cli/commands/jobs-put.ts says which body field
 * each sets); unset ones are left out of the body, so the API applies its defaults.
 */
const jobDefinition = {
  schedule: {
    flags: '--schedule <expr>',
    description: 'cron (5 or 6 fields), a macro, "@every <duration>" or "@at <instant>"',
  },
  handler: { flags: '--handler <name>', description: 'handler a worker runs' },
  timezone: {
    flags: '--timezone <zone>',
    description: 'IANA timezone the cron expression is read in (default UTC)',
  },
  payload: { flags: '--payload <json>', description: 'JSON given to the handler (default {})', parse: json },
  payloadSchema: {
    flags: '--payload-schema <json>',
    description:
      "a JSON Schema every payload must match, the job's own and each trigger's, at most 16 KiB (default: any payload)",
    parse: json,
  },
  priority: {
    flags: '--priority <n>',
    description: '0-100, higher first (default 0)',
    parse: nonNegativeInt,
  },
  maxAttempts: {
    flags: '--max-attempts <n>',
    description: 'attempts before a run is dead-lettered, 1-100 (default 3)',
    parse: positiveInt,
  },
  misfire: {
    flags: '--misfire <policy>',
    description: 'what to do with slots missed while down (default fire_once)',
    choices: ['skip', 'fire_once', 'catch_up'],
  },
  catchUpLimit: {
    flags: '--catch-up-limit <n>',
    description: 'most missed slots catch_up backfills, 1-1000 (default 10)',
    parse: positiveInt,
  },
  pool: { flags: '--pool <name>', description: 'worker pool that runs it (default "default")' },
  lease: {
    flags: '--lease <duration>',
    description: "lease of this job's runs, whole seconds (default: the server's)",
    parse: seconds(false),
  },
  runTimeout: {
    flags: '--run-timeout <duration>',
    description:
      'abort a run that takes longer than this and retry it, whole seconds, 1s-24h (default: no limit)',
    parse: seconds(false),
  },
  misfireThreshold: {
    flags: '--misfire-threshold <duration>',
    description:
      "the misfire policy applies once a slot is more than this late, whole seconds, 0-24h (default: the scheduler's, 60s)",
    parse: seconds(true),
  },
  jitter: {
    flags: '--jitter <duration>',
    description: 'spread runs up to this long after their slot, whole seconds (default 0)',
    parse: seconds(true),
  },
  backoffBase: {
    flags: '--backoff-base <n>',
    description: 'retry n waits base^n seconds, 1.1-60 (default 2)',
    parse: decimal,
  },
  backoffCap: {
    flags: '--backoff-cap <duration>',
    description: 'longest retry wait, whole seconds (default 1h)',
    parse: seconds(false),
  },
} as const;

/** `tock limits put`: the whole definition (a flag not given is unset: the limit is replaced). */
const limitDefinition = {
  rate: {
    flags: '--rate <n>',
    description:
      'tokens per second, above 0 (e.g. 50 or 0.5); a run takes one when claimed, and at most max(burst, ceil(rate)) start in any second. Needs --burst',
    parse: decimal,
  },
  burst: {
    flags: '--burst <n>',
    description: 'most tokens the bucket holds, and the tokens of a new limit; at least 1. Needs --rate',
    parse: positiveInt,
  },
  maxConcurrency: {
    flags: '--max-concurrency <n>',
    description: 'most runs holding a slot at once (default: no cap)',
    parse: positiveInt,
  },
} as const;

/** `tock notifications set`: a webhook notification's whole definition. */
const notificationDefinition = {
  webhook: {
    flags: '--webhook <url>',
    description: "where each event is POSTed: an http(s) URL under the server's --notify-allow",
    required: true,
  },
  events: {
    flags: '--events <list>',
    description: `the events to send, comma-separated: ${NOTIFICATION_EVENTS.join(', ')}`,
    parse: notificationEvents,
    required: true,
  },
  lateAfter: {
    flags: '--late-after <duration>',
    description:
      'with run.late (and only then): how long past its due time a queued run is late, 1s to 7d (e.g. 10m)',
  },
  secret: {
    flags: '--secret <secret>',
    description:
      'signs each delivery (X-Tock-Signature), 16 to 200 characters; prefer the environment variable (ps shows arguments). Unset: unsigned',
    env: 'TOCK_NOTIFICATION_SECRET',
  },
} as const;

/** `tock retention set`: one option per state a finished run can be in. */
const retentionStates = Object.fromEntries(
  RETENTION_STATES.map((s) => [
    s,
    {
      flags: `--${s} <duration>`,
      description: `keep runs that ended ${s} this long after they ended: 1s to 366d (e.g. 7d, 12h), or forever (default ${DEFAULT_RETENTION[s]})`,
      parse: retentionValue,
    },
  ]),
) as Record<
  (typeof RETENTION_STATES)[number],
  { flags: string; description: string; parse: typeof retentionValue }
>;

const keysCreate = {
  role: {
    flags: '--role <role>',
    description:
      'what the key may do: admin, operator, worker or reader in its tenant; cluster-admin (an admin that also sees the whole cluster: every node, shards, backlog, /metrics) only with --tenant',
    choices: ROLES,
    required: true,
  },
  name: { flags: '--name <name>', description: 'a label shown in key listings' },
  tenant: {
    flags: '--tenant <tenant>',
    description:
      'create the key in this tenant, directly in the database (the --database-url/--data-dir/--schema options apply; --url and --key are not used)',
  },
} as const;

/** Every command's options, by the command's words after `tock`. */
export const OPTIONS = {
  dev,
  server,
  worker,
  migrate: database,
  demo: database,
  schedule,
  status: apiClient,
  'jobs put': {
    file: {
      flags: '-f, --file <file>',
      description:
        'YAML or JSON file of jobs ({jobs: [...]}, snake_case); every entry is validated before any is applied',
    },
    ...jobDefinition,
    ...apiClient,
  },
  'jobs get': apiClient,
  'jobs list': {
    prefix: {
      flags: '--prefix <text>',
      description: 'only jobs whose id starts with this text (taken literally: % and _ are themselves)',
    },
    state: {
      flags: '--state <state>',
      description: 'only jobs in this state',
      choices: ['active', 'paused', 'finished'],
    },
    pool: { flags: '--pool <pool>', description: 'only jobs of this pool' },
    handler: { flags: '--handler <handler>', description: 'only jobs of this handler' },
    ...paging('jobs'),
    ...apiClient,
  },
  'jobs pause': apiClient,
  'jobs resume': apiClient,
  'jobs delete': apiClient,
  'jobs trigger': {
    at: {
      flags: '--at <instant>',
      description: 'the slot, an ISO-8601 instant with offset (default: now)',
      parse: instant,
    },
    payload: {
      ...jobDefinition.payload,
      description: "JSON given to the handler for this run only, in place of the job's (default: the job's)",
    },
    idempotencyKey: {
      flags: '--idempotency-key <key>',
      description:
        'repeating the trigger with the same key returns the same run instead of a new one or an error',
      parse: idempotencyKey,
    },
    ...apiClient,
  },
  'jobs backfill': {
    from: {
      flags: '--from <instant>',
      description: 'first instant of the range (included), ISO-8601 with offset',
      parse: instant,
      required: true,
    },
    to: {
      flags: '--to <instant>',
      description: `end of the range (excluded), ISO-8601 with offset; at most ${MAX_BACKFILL_SLOTS} slots in between`,
      parse: instant,
      required: true,
    },
    idempotencyKey: {
      flags: '--idempotency-key <key>',
      description: 'repeating the backfill with the same key and range prints the first answer again',
      parse: idempotencyKey,
    },
    ...apiClient,
  },
  'runs list': {
    job: { flags: '--job <job_id>', description: 'only this job' },
    state: { flags: '--state <state>', description: 'only runs in this state', choices: RUN_STATES },
    ...paging('runs'),
    ...apiClient,
  },
  'runs show': apiClient,
  'runs cancel': apiClient,
  'runs prune': {
    dryRun: { flags: '--dry-run', description: 'count the runs that would be deleted; delete none' },
    ...apiClient,
  },
  'dlq list': {
    job: { flags: '--job <job_id>', description: 'only this job' },
    ...paging('runs'),
    ...apiClient,
  },
  'dlq replay': {
    all: {
      flags: '--all',
      description:
        'replay every dead run the filters pick (all of them without a filter), 500 a request, instead of one <run_id>',
    },
    job: { flags: '--job <job_id>', description: "with --all: only this job's dead runs" },
    error: {
      flags: '--error <text>',
      description: 'with --all: only dead runs whose last error holds this text (any case, taken literally)',
    },
    from: {
      flags: '--from <instant>',
      description: 'with --all: only slots at or after this instant, ISO-8601 with offset',
      parse: instant,
    },
    to: {
      flags: '--to <instant>',
      description: 'with --all: only slots before this instant, ISO-8601 with offset',
      parse: instant,
    },
    dryRun: {
      flags: '--dry-run',
      description: 'with --all: print how many dead runs match (counted up to 100,000); replay none',
    },
    ...apiClient,
  },
  delay: {
    job: { flags: '--job <job_id>', description: 'only this job' },
    pool: { flags: '--pool <pool>', description: 'only this pool' },
    since: {
      flags: '--since <duration>',
      description: `how far back from now, e.g. 1h, 30m, 2d; at most ${MAX_DELAY_RANGE_MS / 86_400_000}d`,
      default: DEFAULT_DELAY_RANGE_MS,
      defaultText: '1h',
      parse: duration,
    },
    step: {
      flags: '--step <duration>',
      description: `one line per this much time, e.g. 1m, 5m, 1h; at least ${MIN_DELAY_STEP_MS / 1000}s, at most ${MAX_DELAY_BUCKETS} lines`,
      default: DEFAULT_DELAY_STEP_MS,
      defaultText: '1m',
      parse: duration,
    },
    ...apiClient,
  },
  'retention get': apiClient,
  'retention set': { ...retentionStates, ...apiClient },
  'limits put': { ...limitDefinition, ...apiClient },
  'limits get': apiClient,
  'limits list': { ...paging('limits'), ...apiClient },
  'limits delete': apiClient,
  'notifications set': { ...notificationDefinition, ...apiClient },
  'notifications get': apiClient,
  'notifications list': { ...paging('notifications'), ...apiClient },
  'notifications delete': apiClient,
  'notifications deliveries': { ...paging('deliveries'), ...apiClient },
  'keys create': { ...keysCreate, ...apiClient, ...database },
  'keys list': apiClient,
  'keys revoke': apiClient,
} as const satisfies Record<string, OptionTable>;

export type Options = typeof OPTIONS;
export type CommandPath = keyof Options;
