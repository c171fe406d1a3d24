/**
 * Rows of the options table that several commands share: where the database is, where the API
 * listens, the scheduler's timings, the worker's held runs, how an operator command reaches the
 * API, and paging. A command's table (`table.ts`) spreads the groups it takes, in `--help` order.
 */
import {
  DEFAULT_AGING_STEP_MS,
  DEFAULT_MISFIRE_THRESHOLD_MS,
  MAX_AGING_STEP_MS,
  MAX_MISFIRE_THRESHOLD_SECONDS,
  MIN_AGING_STEP_MS,
} from '../../core/index.js';
import {
  allowList,
  duration,
  durationBetween,
  durationUpTo,
  intInRange,
  MAX_PAGE,
  pageSize,
  port,
  positiveInt,
  prefetchSetting,
} from './parsers.js';

/** Where a command finds its database: `DATABASE_URL` or embedded, the schema, and its logging. */
export const database = {
  databaseUrl: {
    flags: '--database-url <url>',
    description: 'PostgreSQL connection string; unset: embedded PostgreSQL',
    env: 'DATABASE_URL',
  },
  dataDir: {
    flags: '--data-dir <dir>',
    description: 'embedded PostgreSQL data directory',
    env: 'TOCK_DATA_DIR',
    default: '.tock',
  },
  schema: {
    flags: '--schema <name>',
    description:
      "PostgreSQL schema for Tock's tables (created if missing); default: the server's search_path",
    env: 'TOCK_SCHEMA',
  },
  logFormat: {
    flags: '--log-format <format>',
    description: 'log lines for people or machines',
    choices: ['pretty', 'json'],
    env: 'TOCK_LOG_FORMAT',
    default: 'pretty',
  },
  logLevel: {
    flags: '--log-level <level>',
    description: 'least severe level logged',
    choices: ['trace', 'debug', 'info', 'warn', 'error'],
    env: 'TOCK_LOG_LEVEL',
    default: 'info',
  },
} as const;

/** Where the API of `tock dev` and `tock server` listens. */
export const listen = {
  host: {
    flags: '--host <host>',
    description: 'address the API listens on',
    env: 'TOCK_HOST',
    default: '127.0.0.1',
  },
  port: {
    flags: '--port <port>',
    description: 'API port; 0 picks a free one',
    env: 'TOCK_PORT',
    default: 8080,
    parse: port,
  },
} as const;

/**
 * The priority ageing step, on every command whose store writes sort keys: `tock dev` and
 * `tock server` (materialised, triggered, reaped and replayed runs) and `tock worker` on the
 * database (retries). docs/architecture.md ("Priority ageing") states the bound it gives.
 */
export const agingStep = {
  flags: '--aging-step <duration>',
  description: 'each step a run waits adds one to its priority, 1s-1d (give every node the same)',
  env: 'TOCK_AGING_STEP',
  default: DEFAULT_AGING_STEP_MS,
  defaultText: '60s',
  parse: durationBetween(MIN_AGING_STEP_MS, MAX_AGING_STEP_MS, '1s to 1d'),
} as const;

/** The scheduler's timings, for `tock dev` and `tock server`. */
export const scheduler = {
  lease: {
    flags: '--lease <duration>',
    description: 'default lease of a run',
    env: 'TOCK_LEASE',
    default: 30_000,
    defaultText: '30s',
    parse: duration,
  },
  tick: {
    flags: '--tick <duration>',
    description: 'pause between scheduler ticks (keep it below --lookahead)',
    env: 'TOCK_TICK',
    default: 500,
    defaultText: '500ms',
    parse: duration,
  },
  lookahead: {
    flags: '--lookahead <duration>',
    description: 'materialise runs this far before their slot',
    env: 'TOCK_LOOKAHEAD',
    default: 1000,
    defaultText: '1s',
    parse: duration,
  },
  shardLease: {
    flags: '--shard-lease <duration>',
    description:
      "this node's leases on its shards of the job space: a node that dies is replaced after this long",
    env: 'TOCK_SHARD_LEASE',
    default: 10_000,
    defaultText: '10s',
    parse: duration,
  },
  misfireThreshold: {
    flags: '--misfire-threshold <duration>',
    description:
      "how late a job's next slot may be before its misfire policy applies, for jobs without misfire_threshold_seconds (give every server the same)",
    env: 'TOCK_MISFIRE_THRESHOLD',
    default: DEFAULT_MISFIRE_THRESHOLD_MS,
    defaultText: '60s',
    parse: durationUpTo(MAX_MISFIRE_THRESHOLD_SECONDS * 1000, '24h'),
  },
  agingStep,
  tickBatch: {
    flags: '--tick-batch <n>',
    description: 'most due jobs per tick',
    env: 'TOCK_TICK_BATCH',
    default: 1000,
    parse: positiveInt,
  },
  pruneInterval: {
    flags: '--prune-interval <duration>',
    description:
      'pause between passes of the pruner, which deletes finished runs past their retention (tock retention); one node prunes at a time',
    env: 'TOCK_PRUNE_INTERVAL',
    default: 60_000,
    defaultText: '1m',
    parse: duration,
  },
  pruneArchive: {
    flags: '--prune-archive <dir>',
    description:
      "write each finished run to JSON Lines files in this directory (runs-YYYY-MM-DD.jsonl, by its slot's UTC day; made if missing) before the pruner deletes it; unset: pruned runs are deleted only",
    env: 'TOCK_PRUNE_ARCHIVE',
  },
  notifyAllow: {
    flags: '--notify-allow <prefixes>',
    description:
      "URL prefixes webhook notifications may send to (tock notifications), comma-separated or repeated, as a worker's allow-list: https://hooks.example.com/, http://127.0.0.1: (any port on loopback); unset: none may be written",
    env: 'TOCK_NOTIFY_ALLOW',
    default: [] as string[],
    defaultText: 'none',
    parse: allowList,
  },
  maxClockUncertainty: {
    flags: '--max-clock-uncertainty <duration>',
    description: 'refuse to schedule while the database clock offset is less certain than this',
    env: 'TOCK_MAX_CLOCK_UNCERTAINTY',
    default: 500,
    defaultText: '500ms',
    parse: duration,
  },
} as const;

/** The worker's held-run options, shared by `tock worker` and `tock dev`. */
export const heldRuns = {
  prefetch: {
    flags: '--prefetch <n|auto>',
    description:
      "runs to hold claimed beyond --concurrency, so the next batch is in hand when slots free: 0-1000, or auto for about 100ms of the worker's recent pace (none while idle)",
    env: 'TOCK_PREFETCH',
    default: 'auto',
    parse: prefetchSetting,
  },
  claimAhead: {
    flags: '--claim-ahead <ms>',
    description: 'claim runs this many ms before they are due and start each on its instant (0-10000)',
    env: 'TOCK_CLAIM_AHEAD',
    default: 250,
    parse: intInRange(0, 10_000),
  },
} as const;

/** `--url`, `--key`, `--json` and `--timeout`, on every command that speaks the API. */
export const apiClient = {
  url: {
    flags: '--url <url>',
    description: 'base URL of the Tock server',
    env: 'TOCK_URL',
    default: 'http://127.0.0.1:8080',
  },
  key: { flags: '--key <key>', description: 'API key (sent as a bearer token)', env: 'TOCK_KEY' },
  json: {
    flags: '--json',
    description: "print the API's JSON answer as one document, not a table",
    default: false,
  },
  timeout: {
    flags: '--timeout <duration>',
    description: 'give up on a request after this long',
    env: 'TOCK_TIMEOUT',
    default: 30_000,
    defaultText: '30s',
    parse: duration,
  },
} as const;

/** `--limit`, `--cursor` and `--all` of a list command; `what` it lists (`jobs`, `runs`). */
export function paging<W extends string>(what: W) {
  return {
    limit: {
      flags: '--limit <n>',
      description: `${what} per request, 1-${MAX_PAGE}`,
      default: 50,
      parse: pageSize,
    },
    cursor: { flags: '--cursor <cursor>', description: 'start at this next_cursor of an earlier page' },
    all: { flags: '--all', description: 'follow next_cursor to the last page', default: false },
  } as const;
}
