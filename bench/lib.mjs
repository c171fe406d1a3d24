// Shared by the benchmarks: the backlog they drain, the databases they run on, what the machine
// is, and how figures are summarised and printed.
import { readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import { Queue as BullQueue } from 'bullmq';
import pg from 'pg';

/**
 * The statements this process's `pg` clients send while `on` (each one round trip to the server):
 * every PostgreSQL system here (Tock, graphile-worker, pg-boss) speaks through this one `pg`.
 */
export const statements = { count: 0, on: false };
const sendQuery = pg.Client.prototype.query;
pg.Client.prototype.query = function countedQuery(...args) {
  if (statements.on) statements.count += 1;
  return sendQuery.apply(this, args);
};

/** The median of a list of numbers (the upper one of the middle two for an even count). */
export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Median, min and max of a list of numbers. */
export const summarise = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs) });

/**
 * `a`'s runs/s ÷ `b`'s, round by round: rounds are interleaved, so a round's systems ran minutes
 * apart at most, and the ratio within a round is less exposed to the machine's drift than the
 * ratio of the medians.
 */
export const roundRatios = (a, b) => a.rounds.map((f, i) => f.runsPerSecond / b.rounds[i].runsPerSecond);

/** Empties runs, attempts, the queue and the claims, then inserts `n` ready runs of job `bench/noop` at distinct past slots, queued. */
export async function seedBacklog(pool, n) {
  await pool.query('TRUNCATE runs, attempts, attempt_progress, run_queue, run_claims');
  await pool.query(
    `INSERT INTO runs (tenant_id, job_id, scheduled_for, max_attempts, handler, payload, pool, priority,
       backoff_base_seconds, backoff_cap_seconds, available_at, sort_key, created_at)
     SELECT 'bench', 'noop', t, 3, 'noop', '{}', 'default', 0, 2, 3600, t, t, t
     FROM generate_series(1, $1::int) AS i, LATERAL (SELECT timestamptz '2026-01-01' + i * interval '1 ms' AS t) s`,
    [n],
  );
  await pool.query(
    `INSERT INTO run_queue (run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key)
     SELECT run_id, tenant_id, job_id, pool, handler, priority, available_at, sort_key FROM runs`,
  );
  await pool.query('VACUUM ANALYZE runs, run_queue, run_claims');
}

/** `url` with its database name replaced. */
export function databaseUrl(url, database) {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** `url` without its credentials, for printing. */
export const redact = (url) => url.replace(/\/\/[^@/]*@/, '//');

/** Drops (closing its sessions) and creates database `name` on the server of `url`; returns its URL. */
export async function recreateDatabase(url, name) {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad database name ${name}`);
  const admin = new pg.Client({ connectionString: databaseUrl(url, 'postgres') });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return databaseUrl(url, name);
}

/** Runs `fn(client)` on one fresh connection to `url`, then closes it. */
export async function withClient(url, fn) {
  const client = new pg.Client({ connectionString: url, application_name: 'tock-bench' });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Calls `check` every `intervalMs` until it returns true; throws after `timeoutMs`. */
export async function waitUntil(check, { intervalMs = 5, timeoutMs = 60_000, what = 'condition' } = {}) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (performance.now() > deadline)
      throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** The server's version and the settings that move these figures. */
export async function serverInfo(url) {
  return withClient(url, async (c) => {
    const version = (await c.query('SHOW server_version')).rows[0].server_version;
    const names = [
      'shared_buffers',
      'synchronous_commit',
      'fsync',
      'wal_level',
      'autovacuum',
      'max_connections',
      'jit',
      'shared_preload_libraries',
    ];
    const { rows } = await c.query(
      'SELECT n AS name, current_setting(n) AS value FROM unnest($1::text[]) AS n',
      [names],
    );
    const settings = Object.fromEntries(rows.map((r) => [r.name, r.value]));
    return { version, settings };
  });
}

/** The machine the figures were taken on. */
export function machineInfo() {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
  };
}

/**
 * The share of CPU time (0–1) the whole machine spent busy over `ms`, from /proc/stat (steal
 * counts as busy: it is time this machine did not get). Null where there is no /proc/stat.
 */
export async function machineBusy(ms = 1000) {
  const read = async () => {
    const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0];
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + f[4]; // idle, iowait
    return { idle, total: f.reduce((a, b) => a + b, 0) };
  };
  try {
    const a = await read();
    await new Promise((resolve) => setTimeout(resolve, ms));
    const b = await read();
    return 1 - (b.idle - a.idle) / Math.max(1, b.total - a.total);
  } catch {
    return null;
  }
}

/** The server's WAL position in bytes (all of its databases), read through `query(sql)`. */
export const walPosition = async (query) =>
  Number((await query(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS b`)).rows[0].b);

/** Redis for BullMQ: `REDIS_URL`, default the machine's. */
export const redisUrl = () => process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** BullMQ's connection options for `redisUrl()` (its Workers need `maxRetriesPerRequest: null`). */
export function redisConnection() {
  const u = new URL(redisUrl());
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.pathname.length > 1 ? { db: Number(u.pathname.slice(1)) } : {}),
    maxRetriesPerRequest: null,
  };
}

/** BullMQ queue `name` on `redisUrl()`, connected. */
export async function openBullQueue(name) {
  const queue = new BullQueue(name, { connection: redisConnection() });
  await queue.waitUntilReady();
  return queue;
}

/** Empties BullMQ queue `queue` (if it was opened) and closes its connection. */
export async function closeBullQueue(queue) {
  await queue?.obliterate({ force: true }).catch(() => {});
  await queue?.close();
}

/** Installed versions of the packages the benchmarks compare, read from node_modules. */
export function packageVersions(names) {
  const root = new URL('../', import.meta.url);
  const out = { tock: JSON.parse(readFileSync(new URL('package.json', root), 'utf8')).version };
  for (const name of names) {
    try {
      out[name] = JSON.parse(
        readFileSync(new URL(`node_modules/${name}/package.json`, root), 'utf8'),
      ).version;
    } catch {
      out[name] = 'not installed';
    }
  }
  return out;
}

/**
 * CPU time (user + system, ms) used so far by each `postgres` process on this machine (the
 * server's backends, its background writer, checkpointer and WAL writer), by pid. Linux only;
 * null elsewhere. Take the difference of two samples with `cpuDelta`.
 */
export async function postgresCpu() {
  let entries;
  try {
    entries = await readdir('/proc');
  } catch {
    return null;
  }
  const sample = new Map();
  await Promise.all(
    entries
      .filter((e) => /^\d+$/.test(e))
      .map(async (pid) => {
        try {
          addServerCpu(sample, pid, await readFile(`/proc/${pid}/stat`, 'utf8'), 'postgres');
        } catch {
          // the process ended while we read it
        }
      }),
  );
  return sample;
}

/**
 * `postgresCpu` without awaiting, for a sample taken inside a handler at an exact moment; `name`
 * picks the processes (`redis-server` for BullMQ's server).
 */
export function serverCpuSync(name = 'postgres') {
  let entries;
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  const sample = new Map();
  for (const pid of entries) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      addServerCpu(sample, pid, readFileSync(`/proc/${pid}/stat`, 'utf8'), name);
    } catch {
      // the process ended while we read it
    }
  }
  return sample;
}

/** Adds a process's CPU ms (utime + stime) to `sample` if its `/proc/<pid>/stat` names it `name…`. */
function addServerCpu(sample, pid, stat, name) {
  const tickMs = 1000 / 100; // USER_HZ is 100 on Linux
  const close = stat.lastIndexOf(')');
  if (!stat.slice(stat.indexOf('(') + 1, close).startsWith(name)) return;
  const fields = stat.slice(close + 2).split(' ');
  sample.set(pid, (Number(fields[11]) + Number(fields[12])) * tickMs);
}

/**
 * CPU ms between two `postgresCpu` samples: the growth of the processes in both, plus all of
 * the time of those started in between. Processes that ended in between are not counted.
 */
export function cpuDelta(before, after) {
  if (!before || !after) return null;
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}

/** A number for a table: thousands separated, `digits` decimals. */
export function fmt(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** `median (min–max)` of a summary. */
export const fmtRange = (s, digits = 0) =>
  s.min === s.max
    ? fmt(s.median, digits)
    : `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})`;

/** A GitHub-flavoured markdown table, columns padded so it reads in a terminal too. */
export function markdownTable(headers, rows) {
  const cells = [headers, ...rows].map((r) => r.map((c) => String(c).replaceAll('|', '\\|')));
  const widths = headers.map((_, i) => Math.max(3, ...cells.map((r) => r[i].length)));
  const line = (r) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [
    line(cells[0]),
    `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`,
    ...cells.slice(1).map(line),
  ].join('\n');
}

/**
 * The peers' settings for speed, from their own docs (docs/benchmarks.md, "Peers and their
 * settings"), shared by the throughput and latency scenarios.
 */
export const PEER_SETTINGS = {
  // graphile-worker's performance page (https://worker.graphile.org/docs/performance): the
  // configuration its quick stats were taken with.
  graphilePerformancePage: {
    concurrency: 24,
    maxPoolSize: 25,
    localQueueSize: 500,
    completeJobBatchDelay: 0,
    role: 'its performance page’s settings',
  },
  // pg-boss 12: its docs give no numbers. `burstWhenBatchFull` (fetch again at once while batches
  // come back full) is their setting for a backlog, and the concurrency is split into 2 loops, the
  // fastest split of 1 × 100, 2 × 50, 4 × 25 and 5 × 20 measured here.
  pgBossBacklog: (concurrency) => ({
    localConcurrency: 2,
    batchSize: Math.ceil(concurrency / 2),
    burstWhenBatchFull: true,
    pollingIntervalSeconds: 0.5,
    max: 10,
    role: 'its docs’ setting for a backlog',
  }),
};
