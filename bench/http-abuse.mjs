#!/usr/bin/env node
// Two attacks on `tock server` from issue 14, measured against any build of Tock (so that the same
// load runs before and after a fix, on the same machine). Bounded: each stops by itself.
//
//   node bench/http-abuse.mjs longpoll [--tock bin/tock.js] [--clients 300] [--seconds 20]
//   node bench/http-abuse.mjs slowbody [--tock bin/tock.js] [--clients 100] [--seconds 40]
//
// It makes a database of its own on the server (--database-url, default
// postgres://postgres@127.0.0.1:5432/postgres; the database `tock_bench_http`, dropped and
// recreated), migrates it, creates keys for tenants `a` and `b` with `tock keys create --tenant`,
// starts `node <tock> server --port 0` on it and stops it at the end.
//
// longpoll (item 4): `--clients` waiting `POST /v1/leases` (wait_ms 20000, an empty pool) from one
//   worker key of tenant a, each re-sent as soon as it is answered (after Retry-After when 429),
//   for `--seconds`; meanwhile tenant b sends `GET /v1/jobs` one after another. Prints the
//   database's transactions per second (pg_stat_database xact_commit + xact_rollback delta; only
//   this server uses the database), tenant b's p50/p99 latency, and the long-polls' answers.
// slowbody (item 6): `--clients` unauthenticated `PUT /v1/jobs` with Content-Length 1 MiB sending
//   one byte every 5 s, and as many with an operator key; prints how many of each are still open
//   after 5 s, 15 s and `--seconds`.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { recreateDatabase } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    tock: { type: 'string', default: path.join(here, '..', 'bin', 'tock.js') },
    clients: { type: 'string' },
    seconds: { type: 'string' },
    'database-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
  },
});
const scenario = positionals[0];
if (scenario !== 'longpoll' && scenario !== 'slowbody') {
  console.error(
    'usage: node bench/http-abuse.mjs longpoll|slowbody [--tock bin/tock.js] [--clients n] [--seconds s]',
  );
  process.exit(2);
}
const DB = 'tock_bench_http';
const url = await recreateDatabase(args['database-url'], DB);
const env = { ...process.env, DATABASE_URL: url, TOCK_LOG_LEVEL: 'warn', TOCK_LOG_FORMAT: 'json' };
const tock = (...argv) => {
  const r = spawnSync(process.execPath, [args.tock, ...argv], { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tock ${argv.join(' ')}: ${r.stderr}`);
  return r.stdout.trim().split('\n').at(-1);
};
tock('migrate');
const keys = {
  aWorker: tock('keys', 'create', '--tenant', 'a', '--role', 'worker'),
  aOperator: tock('keys', 'create', '--tenant', 'a', '--role', 'operator'),
  bReader: tock('keys', 'create', '--tenant', 'b', '--role', 'reader'),
};
const server = spawn(process.execPath, [args.tock, 'server', '--port', '0'], {
  env,
  stdio: ['ignore', 'pipe', 'inherit'],
});
let out = '';
server.stdout.on('data', (c) => {
  out += c;
});
while (!/tock listening on (\S+)/.test(out)) {
  if (server.exitCode !== null) throw new Error('the server exited');
  await sleep(50);
}
const base = /tock listening on (\S+)/.exec(out)[1];
const port = Number(new URL(base).port);
console.log(`# ${scenario} against ${args.tock} (${base}, database ${DB})`);

try {
  if (scenario === 'longpoll') await longpoll();
  else await slowbody();
} finally {
  server.kill('SIGTERM');
  await Promise.race([once(server, 'exit'), sleep(40_000)]);
  if (server.exitCode === null) server.kill('SIGKILL');
}

async function xacts() {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const { rows } = await c.query(
    'SELECT (xact_commit + xact_rollback)::bigint AS n FROM pg_stat_database WHERE datname = current_database()',
  );
  await c.end();
  return Number(rows[0].n);
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function longpoll() {
  const clients = Number(args.clients ?? 300);
  const seconds = Number(args.seconds ?? 20);
  const end = Date.now() + seconds * 1000;
  const answers = new Map();
  const count = (k) => answers.set(k, (answers.get(k) ?? 0) + 1);
  const poller = async (i) => {
    while (Date.now() < end) {
      try {
        const res = await fetch(`${base}/v1/leases`, {
          method: 'POST',
          headers: { authorization: `Bearer ${keys.aWorker}`, 'content-type': 'application/json' },
          body: JSON.stringify({ worker_id: `w-${i}`, pool: 'idle', wait_ms: 20_000 }),
          signal: AbortSignal.timeout(Math.max(1, end - Date.now())),
        });
        await res.text();
        count(res.status);
        const retry = Number(res.headers.get('retry-after') ?? 0);
        if (res.status !== 200)
          await sleep(Math.min(Math.max(retry, 1) * 1000, Math.max(0, end - Date.now())));
      } catch {
        if (Date.now() < end) count('error');
      }
    }
  };
  const pollers = Array.from({ length: clients }, (_, i) => poller(i));
  await sleep(2000); // let the long-polls settle into waiting
  const x0 = await xacts();
  const t0 = Date.now();
  const latencies = [];
  const statuses = new Map();
  while (Date.now() < end - 500) {
    const s = performance.now();
    const res = await fetch(`${base}/v1/jobs`, { headers: { authorization: `Bearer ${keys.bReader}` } });
    await res.text();
    latencies.push(performance.now() - s);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    await sleep(20);
  }
  const x1 = await xacts();
  const elapsed = (Date.now() - t0) / 1000;
  await Promise.all(pollers);
  latencies.sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      clients,
      seconds: Number(elapsed.toFixed(1)),
      transactions_per_s: Math.round((x1 - x0) / elapsed),
      tenant_b_gets: latencies.length,
      tenant_b_statuses: Object.fromEntries(statuses),
      tenant_b_p50_ms: Number(percentile(latencies, 50).toFixed(1)),
      tenant_b_p99_ms: Number(percentile(latencies, 99).toFixed(1)),
      long_poll_answers: Object.fromEntries(answers),
    }),
  );
}

async function slowbody() {
  const clients = Number(args.clients ?? 100);
  const seconds = Number(args.seconds ?? 40);
  const open = (auth) => {
    const socket = connect({ host: '127.0.0.1', port });
    const conn = { socket, open: true, status: null };
    socket.on('error', () => {});
    socket.on('data', (c) => {
      conn.status ??= /^HTTP\/1\.1 (\d{3})/.exec(c.toString('latin1'))?.[1] ?? null;
    });
    socket.on('close', () => {
      conn.open = false;
    });
    socket.on('connect', () => {
      socket.write(
        `PUT /v1/jobs HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{`,
      );
    });
    const timer = setInterval(() => socket.writable && socket.write('x'), 5000);
    socket.on('close', () => clearInterval(timer));
    return conn;
  };
  const anonymous = Array.from({ length: clients }, () => open(''));
  const keyed = Array.from({ length: clients }, () => open(`Authorization: Bearer ${keys.aOperator}\r\n`));
  const start = Date.now();
  const report = {};
  for (const at of [5, 15, seconds]) {
    await sleep(Math.max(0, start + at * 1000 - Date.now()));
    const statuses = (conns) =>
      Object.fromEntries(
        [...new Set(conns.map((c) => c.status))].map((s) => [
          String(s),
          conns.filter((c) => c.status === s).length,
        ]),
      );
    report[`${at}s`] = {
      unauthenticated_open: anonymous.filter((c) => c.open).length,
      unauthenticated_answers: statuses(anonymous),
      authenticated_open: keyed.filter((c) => c.open).length,
      authenticated_answers: statuses(keyed),
    };
  }
  for (const c of [...anonymous, ...keyed]) c.socket.destroy();
  console.log(JSON.stringify({ clients, ...report }));
}
