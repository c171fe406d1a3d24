/**
 * The lease keeper without a database: a FakeClock and a source that answers heartbeats as the
 * test says. When it renews (a third of the way through a lease, all leases in one call), what a
 * lost lease does to a running, a held and a finishing run, and stepping down when renewals fail.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  type ClaimedRun,
  FakeClock,
  type HeartbeatRunsParams,
  LeaseLostError,
  ValidationError,
} from '../../src/core/index.js';
import { type ActiveRun, ActiveRuns, heldRun, type WorkerEvents } from '../../src/worker/active-run.js';
import { LeaseKeeper } from '../../src/worker/lease-keeper.js';
import { ReportBuffer } from '../../src/worker/run-report.js';

const T0 = Date.UTC(2026, 0, 1);
const LEASE_MS = 30_000;
const logger = pino({ level: 'silent' });

function claimed(runId: string, leaseExpiresAt = T0 + LEASE_MS): ClaimedRun {
  return {
    runId,
    tenantId: 't',
    jobId: `job-${runId}`,
    handler: 'h',
    payload: null,
    pool: 'default',
    scheduledFor: new Date(T0),
    attempt: 1,
    maxAttempts: 3,
    leaseToken: `token-${runId}`,
    leaseExpiresAt: new Date(leaseExpiresAt),
    availableAt: new Date(T0),
    timeoutMs: null,
  };
}

/** A keeper over `runs` (each started unless named in `held`), its source's calls and its events. */
function setup(
  ids: string[],
  o: { held?: string[]; lost?: string[]; fail?: boolean; refuse?: (p: HeartbeatRunsParams) => boolean } = {},
) {
  const clock = new FakeClock(T0);
  const runs = new ActiveRuns();
  for (const id of ids) {
    const a = heldRun(claimed(id), T0);
    a.started = !(o.held ?? []).includes(id);
    runs.add(a);
  }
  const calls: HeartbeatRunsParams[] = [];
  const events: [keyof WorkerEvents, unknown[]][] = [];
  const forgotten: string[] = [];
  const errors: unknown[] = [];
  const lost = new Set(o.lost ?? []);
  const keeper = new LeaseKeeper({
    source: {
      heartbeatRuns: async (p) => {
        calls.push(p);
        const refused = o.refuse?.(p) ?? false;
        if (o.fail) throw new Error('connect ECONNREFUSED');
        if (refused) throw new ValidationError('refused as data');
        return {
          renewed: p.leases
            .filter((l) => !lost.has(l.runId))
            .map((l) => ({ runId: l.runId, leaseExpiresAt: new Date(p.now + LEASE_MS) })),
          lost: p.leases.filter((l) => lost.has(l.runId)).map((l) => l.runId),
        };
      },
    },
    clock,
    logger,
    runs,
    emit: (event, ...args) => void events.push([event, args]),
    checkMs: 1000,
    forgetHeld: (a) => {
      forgotten.push(a.run.runId);
      runs.remove(a);
    },
    onError: (err) => errors.push(err),
  });
  const run = (id: string) => runs.get(id) as ActiveRun;
  return { clock, runs, keeper, calls, events, forgotten, errors, lost, run };
}

/** The signal a handler reads (made on first read, as the executor's context does). */
function signalOf(a: ActiveRun): AbortSignal {
  a.controller = new AbortController();
  return a.controller.signal;
}

/** Lets the keeper's loop take its next step (a few turns: the step awaits several promises). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

describe('LeaseKeeper', () => {
  it('renews nothing before a lease is a third through, then every lease in one call', async () => {
    const { clock, keeper, calls, run } = setup(['a', 'b', 'c']);
    clock.advance(LEASE_MS / 3 - 1);
    await keeper.heartbeatOnce();
    expect(calls).toEqual([]);
    clock.advance(1);
    await keeper.heartbeatOnce();
    expect(calls).toHaveLength(1);
    expect(calls[0]!.leases.map((l) => [l.runId, l.leaseToken])).toEqual([
      ['a', 'token-a'],
      ['b', 'token-b'],
      ['c', 'token-c'],
    ]);
    expect(calls[0]!.now).toBe(T0 + LEASE_MS / 3);
    // Each lease now ends a whole lease after the renewal, and the next renewal is a third after it.
    expect(run('b')).toMatchObject({
      leaseExpiresAt: T0 + LEASE_MS / 3 + LEASE_MS,
      renewedAt: T0 + LEASE_MS / 3,
    });
    clock.advance(LEASE_MS / 3 - 1);
    await keeper.heartbeatOnce();
    expect(calls).toHaveLength(1);
    // Forced (extendLease), it renews at once.
    await keeper.heartbeatOnce(true);
    expect(calls).toHaveLength(2);
  });

  it('a lost lease aborts a running handler; a held run is forgotten unstarted; a finishing one is left alone', async () => {
    const { clock, keeper, events, forgotten, runs, run } = setup(['running', 'held', 'finishing'], {
      held: ['held'],
      lost: ['running', 'held', 'finishing'],
    });
    const running = run('running');
    const signal = signalOf(running);
    runs.finished(run('finishing'));
    clock.advance(LEASE_MS / 3);
    await keeper.heartbeatOnce();
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(LeaseLostError);
    expect(running.dropped).toBe('lease lost');
    expect(forgotten).toEqual(['held']);
    expect(runs.has('held')).toBe(false);
    // Its result is being written under its token: the store's answer tells whether it was lost.
    expect(run('finishing').dropped).toBeNull();
    expect(
      events.map(([e, args]) => [e, typeof args[0] === 'string' ? args[0] : (args[0] as ClaimedRun).runId]),
    ).toEqual([
      ['lease:lost', 'running'],
      ['lease:lost', 'held'],
      ['run:dropped', 'held'],
    ]);
  });

  it('a dropped run is not renewed again', async () => {
    const { clock, keeper, calls, lost } = setup(['a', 'b']);
    lost.add('a');
    await keeper.heartbeatOnce(true);
    lost.clear();
    clock.advance(LEASE_MS / 3);
    await keeper.heartbeatOnce();
    expect(calls.map((c) => c.leases.map((l) => l.runId))).toEqual([['a', 'b'], ['b']]);
  });

  it('extendLease answers the new expiry, or LeaseLostError once the lease is gone', async () => {
    const { clock, keeper, lost, run } = setup(['a']);
    clock.advance(2000);
    await expect(keeper.extendLease(run('a'))).resolves.toEqual(new Date(T0 + 2000 + LEASE_MS));
    lost.add('a');
    await expect(keeper.extendLease(run('a'))).rejects.toBeInstanceOf(LeaseLostError);
  });

  it('steps down when renewals fail until the lease runs out: the handler is aborted', async () => {
    const { clock, keeper, calls, errors, events, run } = setup(['a'], { fail: true });
    const signal = signalOf(run('a'));
    keeper.start();
    try {
      // Every check from a third of the lease on tries to renew and fails (the loop backs off); the
      // run is kept while its lease lasts (a renewal may yet work), and dropped once it has expired
      // unrenewed.
      await settle();
      let abortedAt: number | null = null;
      while (clock.nowMs() < T0 + 2 * LEASE_MS) {
        clock.advance(1000);
        await settle();
        if (abortedAt === null && signal.aborted) abortedAt = clock.nowMs();
        if (clock.nowMs() < T0 + LEASE_MS) expect(signal.aborted).toBe(false);
      }
      expect(calls.length).toBeGreaterThan(1);
      expect(errors.length).toBe(calls.length);
      expect(abortedAt).toBeGreaterThanOrEqual(T0 + LEASE_MS);
      expect(run('a').dropped).toBe('lease expired before renewal');
      expect(events).toEqual([['lease:lost', ['a']]]);
    } finally {
      await keeper.stop();
    }
  });
});

describe('LeaseKeeper with reports (ctx.progress, ctx.log)', () => {
  /** `id`'s report buffer, made as the executor's context makes it. */
  const buffer = (a: ActiveRun) => {
    a.report ??= new ReportBuffer();
    return a.report;
  };

  it('a run with an unsent report makes the next check renew at once, carrying it; sent, it is gone', async () => {
    const { clock, keeper, calls, run } = setup(['a', 'b']);
    clock.advance(1000);
    await keeper.heartbeatOnce();
    expect(calls).toEqual([]);
    buffer(run('a')).progress(30, 'three of ten');
    buffer(run('a')).log('first');
    await keeper.heartbeatOnce();
    expect(calls).toHaveLength(1);
    expect(calls[0]!.leases).toEqual([
      {
        runId: 'a',
        leaseToken: 'token-a',
        progress: { value: 30, message: 'three of ten' },
        logs: ['first'],
      },
      { runId: 'b', leaseToken: 'token-b' },
    ]);
    expect(run('a').report!.pending).toBe(false);
    expect(run('a').reporting).toBeNull();
    clock.advance(1000);
    await keeper.heartbeatOnce();
    expect(calls).toHaveLength(1);
  });

  it('a failed heartbeat puts its report back before what came since; the next one sends it all', async () => {
    let inFlight = () => {};
    const o = {
      fail: true,
      refuse: () => {
        inFlight();
        return false;
      },
    };
    const { keeper, calls, run } = setup(['a'], o);
    const a = run('a');
    buffer(a).log('one');
    // The handler logs while the heartbeat is in flight.
    inFlight = () => buffer(a).log('two');
    await expect(keeper.heartbeatOnce()).rejects.toThrow('ECONNREFUSED');
    expect(a.reporting).toBeNull();
    inFlight = () => {};
    o.fail = false;
    await keeper.heartbeatOnce();
    expect(calls.map((c) => c.leases[0]!.logs)).toEqual([['one'], ['one', 'two']]);
    expect(a.report!.pending).toBe(false);
  });

  it('refused as data with reports on it, the heartbeat goes again without them, and reports stop going', async () => {
    const { keeper, calls, run, errors } = setup(['a'], {
      refuse: (p) => p.leases.some((l) => l.logs !== undefined || l.progress !== undefined),
    });
    buffer(run('a')).log('one');
    await keeper.heartbeatOnce();
    expect(calls.map((c) => c.leases)).toEqual([
      [{ runId: 'a', leaseToken: 'token-a', logs: ['one'] }],
      [{ runId: 'a', leaseToken: 'token-a' }],
    ]);
    expect(run('a').dropped).toBeNull();
    expect(errors).toEqual([]);
    // From then on a report does not make a heartbeat due, nor goes with one: it waits for the result.
    buffer(run('a')).log('two');
    await keeper.heartbeatOnce();
    expect(calls).toHaveLength(2);
    await keeper.heartbeatOnce(true);
    expect(calls[2]!.leases).toEqual([{ runId: 'a', leaseToken: 'token-a' }]);
    expect(run('a').report!.take()).toEqual({ logs: ['two'] });
  });
});

describe('ReportBuffer', () => {
  it('keeps the latest progress and the last 100 lines, counting the dropped ones; text cut and sanitised', () => {
    const b = new ReportBuffer();
    expect(b.pending).toBe(false);
    expect(b.take()).toBeNull();
    b.progress(1, 'first');
    b.progress(2.5, `${'m'.repeat(250)}`);
    for (let i = 0; i < 130; i++) b.log(`line ${i}`);
    b.log(`bad \u0000 \uD800 ${'x'.repeat(2000)}`);
    const r = b.take()!;
    expect(r.progress).toEqual({ value: 2.5, message: 'm'.repeat(200) });
    expect(r.logs).toHaveLength(100);
    expect(r.logs![0]).toBe('line 31');
    expect(r.logs![99]).toBe(`bad \uFFFD \uFFFD ${'x'.repeat(1000 - 8)}`);
    expect(r.logsDropped).toBe(31);
    expect(b.pending).toBe(false);
  });

  it('refuses a progress that is not a finite number', () => {
    const b = new ReportBuffer();
    for (const v of [Number.NaN, Number.POSITIVE_INFINITY, '5' as unknown as number]) {
      expect(() => b.progress(v)).toThrow(ValidationError);
    }
    expect(b.pending).toBe(false);
  });

  it('putBack: the newer progress wins, the older lines go first, the bound holds', () => {
    const b = new ReportBuffer();
    b.progress(1);
    b.log('old');
    const sent = b.take()!;
    b.progress(2);
    for (let i = 0; i < 100; i++) b.log(`new ${i}`);
    b.putBack(sent);
    const r = b.take()!;
    expect(r.progress).toEqual({ value: 2, message: null });
    expect(r.logs![0]).toBe('new 0');
    expect(r.logsDropped).toBe(1);
    b.putBack({ progress: { value: 7 }, logs: ['x'], logsDropped: 4 });
    expect(b.take()).toEqual({ progress: { value: 7 }, logs: ['x'], logsDropped: 4 });
  });
});
