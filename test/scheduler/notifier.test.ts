/**
 * The notifier against a real database and a real webhook receiver on loopback: the receiver gets
 * exactly the events its notification lists (a dead run, a lost worker, a misfire, a late run), each
 * signed with the notification's secret, and a delivery it answers 500 is tried again with backoff
 * until it is delivered, or marked failed once its attempts are spent. Another tenant's events
 * never reach it. Time moves only through a FakeClock; the notifier is stepped by hand.
 */
import { createHmac } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { FakeClock, validateNotification } from '../../src/core/index.js';
import { Notifier, Reaper } from '../../src/scheduler/index.js';
import { setupDatabase, T0, type TestDatabase } from '../setup/database.js';
import { upsertJob } from '../setup/factories.js';

const logger = pino({ level: 'silent' });
const SECRET = 'a-secret-of-24-characters';

interface Received {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  raw: string;
  body: { id: string; event: string; tenant_id: string; notification: string; data: Record<string, unknown> };
}

let db: TestDatabase;
let clock: FakeClock;
let server: Server;
let base: string;
let received: Received[];
/** The status the receiver answers a request with (by default 200). */
let answer: (r: Received) => number;

beforeEach(async () => {
  db = await setupDatabase();
  clock = new FakeClock(T0);
  received = [];
  answer = () => 200;
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => {
      raw += c.toString('utf8');
    });
    req.on('end', () => {
      const r: Received = { path: req.url ?? '', headers: req.headers, raw, body: JSON.parse(raw) };
      received.push(r);
      res.writeHead(answer(r)).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await db.teardown();
});

const ALLOW = ['http://127.0.0.1:'];

async function notify(tenantId: string, name: string, events: string[], extra: Record<string, unknown> = {}) {
  const notification = validateNotification({ url: `${base}/${tenantId}/${name}`, events, ...extra }, ALLOW);
  await db.store.putNotification({ tenantId, name, notification, now: clock.nowMs() });
}

function notifier(o: Partial<ConstructorParameters<typeof Notifier>[0]> = {}) {
  return new Notifier({ store: db.store, clock, logger, allow: ALLOW, policy: { baseMs: 1000 }, ...o });
}

/** A run of tenant `t`'s job `jobId` (at most `maxAttempts`), claimed by `worker`. */
async function claimed(t: string, jobId: string, maxAttempts: number, worker = 'w1') {
  await upsertJob(db.store, {
    tenantId: t,
    job: { jobId, schedule: '@every 1h', handler: 'h', maxAttempts },
    now: T0,
  });
  const run = await db.store.triggerRun({ tenantId: t, jobId, now: clock.nowMs() });
  const [lease] = await db.store.claimRuns({ workerId: worker, pool: 'default', max: 1, now: clock.nowMs() });
  expect(lease?.runId).toBe(run.runId);
  return lease!;
}

/** Checks each request's signature: HMAC-SHA256 of `<timestamp>.<body>` keyed by the secret. */
function expectSigned(r: Received, secret = SECRET) {
  const timestamp = r.headers['x-tock-timestamp'] as string;
  const mac = createHmac('sha256', secret).update(`${timestamp}.${r.raw}`).digest('hex');
  expect(r.headers['x-tock-signature']).toBe(`sha256=${mac}`);
}

test('a receiver gets exactly the events configured, signed, and a delivery answered 500 twice is retried', async () => {
  await notify('t', 'ops', ['run.dead', 'worker.lost'], { secret: SECRET });
  // Another tenant listens to everything: none of t's events reach it.
  await notify('other', 'all', ['run.dead', 'worker.lost', 'job.misfired', 'run.late'], { lateAfter: '1s' });

  // A dead letter (one attempt, failed), a retried failure (no event), a lost worker (lease expired).
  const dead = await claimed('t', 'dies', 1);
  await db.store.failRun({ ...dead, error: 'boom', now: clock.nowMs() });
  const retried = await claimed('t', 'retries', 3);
  await db.store.failRun({ ...retried, error: 'again', now: clock.nowMs() });
  const lost = await claimed('t', 'lost', 3, 'w-lost');
  clock.advance(31_000);
  await new Reaper({ store: db.store, clock, logger }).reapOnce();

  // The receiver answers the dead run's delivery 500 twice, then 200.
  let deadSeen = 0;
  answer = (r) => (r.body.event === 'run.dead' && ++deadSeen <= 2 ? 500 : 200);
  const n = notifier();
  const attempts: { event: string; attempt: number; state: string; status: number | null }[] = [];
  n.on('delivery', (a) =>
    attempts.push({ event: a.event, attempt: a.attempt, state: a.state, status: a.status }),
  );
  expect(await n.deliverDue()).toBe(2);
  // Not due again before its backoff (1 s after the first attempt, 2 s after the second).
  clock.advance(999);
  expect(await n.deliverDue()).toBe(0);
  clock.advance(1);
  expect(await n.deliverDue()).toBe(1);
  clock.advance(2000);
  expect(await n.deliverDue()).toBe(1);
  clock.advance(60_000);
  expect(await n.deliverDue()).toBe(0);

  expect(attempts.filter((a) => a.event === 'run.dead')).toEqual([
    { event: 'run.dead', attempt: 1, state: 'pending', status: 500 },
    { event: 'run.dead', attempt: 2, state: 'pending', status: 500 },
    { event: 'run.dead', attempt: 3, state: 'delivered', status: 200 },
  ]);
  expect(received.every((r) => r.path === '/t/ops')).toBe(true);
  expect(received.map((r) => r.body.event).sort()).toEqual([
    'run.dead',
    'run.dead',
    'run.dead',
    'worker.lost',
  ]);
  for (const r of received) {
    expectSigned(r);
    expect(r.headers['x-tock-event']).toBe(r.body.event);
    expect(r.body).toMatchObject({ tenant_id: 't', notification: 'ops', id: r.headers['x-tock-delivery'] });
  }
  // The same body on every attempt; the timestamp is this attempt's, from the injected clock.
  const deadBodies = received.filter((r) => r.body.event === 'run.dead');
  expect(new Set(deadBodies.map((r) => r.raw)).size).toBe(1);
  expect(deadBodies.map((r) => Number(r.headers['x-tock-timestamp']))).toEqual(
    [T0 + 31_000, T0 + 32_000, T0 + 34_000].map((ms) => ms / 1000),
  );
  expect(deadBodies[0]!.body.data).toMatchObject({
    run_id: dead.runId,
    job_id: 'dies',
    attempt: 1,
    error: 'boom',
  });
  const lostBody = received.find((r) => r.body.event === 'worker.lost')!.body;
  expect(lostBody.data).toEqual({ worker_id: 'w-lost', run_ids: [lost.runId] });

  const log = await db.store.listDeliveries({ tenantId: 't', name: 'ops', limit: 10 });
  expect(log.items.map((d) => [d.event, d.state, d.attempts, d.lastStatus, d.lastError])).toEqual([
    ['worker.lost', 'delivered', 1, 200, null],
    ['run.dead', 'delivered', 3, 200, null],
  ]);
  expect(await db.store.listDeliveries({ tenantId: 'other', name: 'all', limit: 10 })).toEqual({
    items: [],
    nextCursor: null,
  });
});

test('a delivery is marked failed once its attempts are spent, and one outside the allow-list is never sent', async () => {
  await notify('t', 'ops', ['run.dead']);
  const dead = await claimed('t', 'dies', 1);
  await db.store.failRun({ ...dead, error: 'boom', now: clock.nowMs() });
  answer = () => 500;
  const n = notifier({ policy: { baseMs: 1000, maxAttempts: 3 } });
  for (let i = 0; i < 5; i++) {
    await n.deliverDue();
    clock.advance(10_000);
  }
  expect(received).toHaveLength(3);
  expect(received[0]!.headers['x-tock-signature']).toBeUndefined();
  const [d] = (await db.store.listDeliveries({ tenantId: 't', name: 'ops', limit: 1 })).items;
  expect(d).toMatchObject({ state: 'failed', attempts: 3, lastStatus: 500, lastError: 'HTTP 500' });

  // The server's allow-list no longer covers the URL: failed at once, nothing sent.
  const again = await claimed('t', 'dies-too', 1);
  await db.store.failRun({ ...again, error: 'boom', now: clock.nowMs() });
  await notifier({ allow: ['https://hooks.example.com/'] }).deliverDue();
  expect(received).toHaveLength(3);
  const [refused] = (await db.store.listDeliveries({ tenantId: 't', name: 'ops', limit: 1 })).items;
  expect(refused).toMatchObject({ state: 'failed', attempts: 1, lastStatus: null });
  expect(refused!.lastError).toMatch(/^refused: .*outside the server's notification allow-list/);
});

test('a misfire and a late run are notified once each, to the notifications that want them', async () => {
  await notify('t', 'late', ['run.late', 'job.misfired'], { lateAfter: '1m' });
  await notify('t', 'dead-only', ['run.dead']);
  // A job a day behind with misfire `skip`: the tick drops its missed slots.
  await upsertJob(db.store, {
    tenantId: 't',
    job: { jobId: 'behind', schedule: '@every 1h', handler: 'h', misfire: 'skip' },
    now: T0,
  });
  clock.set(T0 + 24 * 3600_000 + 1000);
  await db.store.tick({ now: clock.nowMs(), lookaheadMs: 0, batchSize: 10 });
  // A queued run two minutes past its available_at.
  const run = await db.store.triggerRun({ tenantId: 't', jobId: 'behind', now: clock.nowMs() });
  const n = notifier();
  expect(await n.scanLate(clock.nowMs())).toBe(0);
  clock.advance(2 * 60_000);
  expect(await n.scanLate(clock.nowMs())).toBe(1);
  expect(await n.scanLate(clock.nowMs())).toBe(0);
  await n.deliverDue();

  expect(received.map((r) => [r.path, r.body.event]).sort()).toEqual([
    ['/t/late', 'job.misfired'],
    ['/t/late', 'run.late'],
  ]);
  const late = received.find((r) => r.body.event === 'run.late')!.body;
  expect(late.data).toMatchObject({ run_id: run.runId, job_id: 'behind', late_seconds: 120 });
  const misfire = received.find((r) => r.body.event === 'job.misfired')!.body;
  expect(misfire.data).toMatchObject({ job_id: 'behind' });
  expect(misfire.data.dropped_slots).toBeGreaterThan(0);
});

test('an attempt without an answer ends at the timeout, on the injected clock, and is tried again', async () => {
  await notify('t', 'ops', ['run.dead']);
  const dead = await claimed('t', 'dies', 1);
  await db.store.failRun({ ...dead, error: 'boom', now: clock.nowMs() });
  // The receiver holds the first request without answering.
  const held: (() => void)[] = [];
  let arrived: () => void = () => {};
  const first = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  server.removeAllListeners('request');
  server.on('request', (req, res) => {
    req.resume();
    if (held.length > 0) return void res.writeHead(200).end();
    held.push(() => res.writeHead(200).end());
    arrived();
  });
  const n = notifier({ timeoutMs: 5000 });
  const step = n.deliverDue();
  await first;
  clock.advance(5000);
  expect(await step).toBe(1);
  const [d] = (await db.store.listDeliveries({ tenantId: 't', name: 'ops', limit: 1 })).items;
  expect(d).toMatchObject({
    state: 'pending',
    attempts: 1,
    lastStatus: null,
    lastError: 'no answer within 5000 ms',
  });
  held[0]!();
  clock.advance(1000);
  expect(await n.deliverDue()).toBe(1);
  const [after] = (await db.store.listDeliveries({ tenantId: 't', name: 'ops', limit: 1 })).items;
  expect(after).toMatchObject({ state: 'delivered', attempts: 2, lastStatus: 200 });
});

test('a prune that found a full batch prunes again at the next step: the log cannot outgrow one batch per 10 minutes', async () => {
  const pruned: number[] = [];
  let left = 2500;
  const n = notifier({
    store: {
      claimDeliveries: async () => ({ deliveries: [], next: null }),
      finishDelivery: async () => true,
      scanLateRuns: async () => ({ written: 0, next: null }),
      pruneDeliveries: async ({ limit }) => {
        const now = Math.min(limit, left);
        left -= now;
        pruned.push(now);
        return now;
      },
    },
  });
  for (let i = 0; i < 5; i++) {
    await n.step();
    clock.advance(1000);
  }
  expect(pruned).toEqual([1000, 1000, 500]);
});

test('a late scan cut off after its pages goes on where it stopped: notifications past the first pages are scanned too', async () => {
  const starts: (string | null)[] = [];
  let page = 0;
  const n = notifier({
    store: {
      claimDeliveries: async () => ({ deliveries: [], next: null }),
      finishDelivery: async () => true,
      pruneDeliveries: async () => 0,
      // More notifications than one scan walks: every page is full.
      scanLateRuns: async ({ after }) => {
        starts.push(after?.name ?? null);
        page++;
        return { written: 0, next: { tenantId: 't', name: `n${page}` } };
      },
    },
  });
  await n.scanLate(clock.nowMs());
  const first = starts.length;
  await n.scanLate(clock.nowMs());
  expect(starts[0]).toBeNull();
  expect(starts[first]).toBe(`n${first}`);
});

test('a scan for late runs reports at most lateRuns per notification and goes on at the next scan, each run once; another tenant’s backlog is not read', async () => {
  await notify('t', 'late', ['run.late'], { lateAfter: '1m' });
  await notify('small', 'late', ['run.late'], { lateAfter: '1m' });
  // 7 queued runs of t, one of small queued after them all.
  await upsertJob(db.store, {
    tenantId: 't',
    job: { jobId: 'j', schedule: '@every 1h', handler: 'h' },
    now: T0,
  });
  await upsertJob(db.store, {
    tenantId: 'small',
    job: { jobId: 'j', schedule: '@every 1h', handler: 'h' },
    now: T0,
  });
  const runs: string[] = [];
  for (let i = 0; i < 7; i++)
    runs.push(
      (await db.store.triggerRun({ tenantId: 't', jobId: 'j', scheduledFor: T0 + i, now: T0 })).runId,
    );
  const small = await db.store.triggerRun({ tenantId: 'small', jobId: 'j', scheduledFor: T0 + 10, now: T0 });
  clock.set(T0 + 2 * 60_000);
  const n = notifier({ lateRuns: 3 });
  const written: number[] = [];
  for (let i = 0; i < 4; i++) written.push(await n.scanLate(clock.nowMs()));
  // t: 3, 3, 1, then nothing; small's one run in the first scan, not behind t's seven.
  expect(written).toEqual([4, 3, 1, 0]);
  const { rows } = await db.pool.query(
    "SELECT tenant_id, data->>'run_id' AS run_id FROM notification_deliveries WHERE event = 'run.late' ORDER BY delivery_id",
  );
  expect(rows.filter((r) => r.tenant_id === 't').map((r) => r.run_id)).toEqual(runs);
  expect(rows.filter((r) => r.tenant_id === 'small').map((r) => r.run_id)).toEqual([small.runId]);
});

/** `n` due `worker.lost` deliveries of the notification, due a minute ago (in order). */
async function pending(tenantId: string, name: string, n: number, dueAgoMs = 60_000) {
  await db.pool.query(
    `INSERT INTO notification_deliveries (tenant_id, name, event, data, created_at, next_attempt_at)
     SELECT $1, $2, 'worker.lost', jsonb_build_object('worker_id', 'w' || i, 'run_ids', '[]'::jsonb), $3,
       $3::timestamptz + i * interval '1 ms'
     FROM generate_series(1, $4::int) i`,
    [tenantId, name, new Date(clock.nowMs() - dueAgoMs), n],
  );
}

/** `p`, or a failure after `ms` of real time (the bound a test puts on something that must not wait). */
function within<T>(ms: number, p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

test("a receiver that never answers holds only its own deliveries' places: another tenant's delivery arrives meanwhile", async () => {
  const hung: ServerResponse[] = [];
  let twoHung: () => void = () => {};
  const bothArrived = new Promise<void>((resolve) => {
    twoHung = resolve;
  });
  const slow = createServer((req, res) => {
    req.resume();
    hung.push(res);
    if (hung.length === 2) twoHung();
  });
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/hook`;
    const notification = validateNotification({ url, events: ['worker.lost'] }, ALLOW);
    await db.store.putNotification({ tenantId: 'slow', name: 'hook', notification, now: clock.nowMs() });
    await notify('fast', 'ops', ['worker.lost']);
    await pending('slow', 'hook', 10);
    const n = notifier({ perNotification: 2 });
    const fastDelivered = new Promise<string>((resolve) =>
      n.on('delivery', (a) => {
        if (a.tenantId === 'fast') resolve(a.state);
      }),
    );
    // The step starts the slow receiver's two attempts (its cap) and does not wait for them (they
    // never end: the clock does not move). 5 s: a bound for a loaded machine, not for the receiver.
    await within(5000, n.step(), 'a step with a receiver that does not answer');
    await within(5000, bothArrived, "the slow receiver's requests");
    // The fast tenant's delivery comes due while they hang: the next step sends it at once.
    await pending('fast', 'ops', 1, 1000);
    await within(5000, n.step(), 'the next step');
    expect(await within(1000, fastDelivered, "the fast tenant's delivery")).toBe('delivered');
    expect(received.map((r) => r.path)).toEqual(['/fast/ops']);
    expect(hung).toHaveLength(2);
    for (const res of hung) res.writeHead(200).end();
    await within(1000, n.stop(), 'stop');
  } finally {
    slow.closeAllConnections();
    await new Promise<void>((resolve) => slow.close(() => resolve()));
  }
});

test("a tenant with many due deliveries does not hold back another's one: both are in the first claim", async () => {
  await notify('big', 'ops', ['worker.lost']);
  await notify('small', 'ops', ['worker.lost']);
  await pending('big', 'ops', 200, 120_000);
  await pending('small', 'ops', 1);
  const n = notifier({ concurrency: 5 });
  const claimed = await n.deliverDue();
  expect(received.filter((r) => r.path === '/small/ops')).toHaveLength(1);
  expect(claimed).toBe(5);
});

test('claims take turns between notifications: each is served in turn, past the last back to the first', async () => {
  for (const name of ['a', 'b', 'c']) {
    await notify('t', name, ['worker.lost']);
    await pending('t', name, 2);
  }
  const n = notifier({ concurrency: 1 });
  for (let i = 0; i < 6; i++) expect(await n.deliverDue()).toBe(1);
  expect(received.map((r) => r.path)).toEqual(['/t/a', '/t/b', '/t/c', '/t/a', '/t/b', '/t/c']);
});

test('a late scan stops after 10 s of the clock and goes on from there at the next scan', async () => {
  const starts: (string | null)[] = [];
  const n = notifier({
    store: {
      claimDeliveries: async () => ({ deliveries: [], next: null }),
      finishDelivery: async () => true,
      pruneDeliveries: async () => 0,
      // Every page is full and takes 4 s of the clock.
      scanLateRuns: async ({ after }) => {
        starts.push(after?.name ?? null);
        clock.advance(4000);
        return { written: 0, next: { tenantId: 't', name: `n${starts.length}` } };
      },
    },
  });
  await n.scanLate(clock.nowMs());
  expect(starts).toEqual([null, 'n1', 'n2']);
  await n.scanLate(clock.nowMs());
  expect(starts.slice(3)).toEqual(['n3', 'n4', 'n5']);
});
