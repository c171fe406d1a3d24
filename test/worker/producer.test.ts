/**
 * The producer without a database: a FakeClock and a source that hands out the runs the test
 * gives it. What it claims for (free capacity, claim-ahead), when it starts held runs (a free slot
 * and their instant), what it does with a run whose lease is nearly out, and its claim ids.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  type ClaimedRun,
  type ClaimRunsParams,
  FakeClock,
  type ReleaseRunsParams,
} from '../../src/core/index.js';
import { type ActiveRun, ActiveRuns, type WorkerEvents } from '../../src/worker/active-run.js';
import { LEASE_TOO_SHORT, Producer } from '../../src/worker/producer.js';

const T0 = Date.UTC(2026, 0, 1);
const LEASE_MS = 30_000;
const logger = pino({ level: 'silent' });

function claimed(runId: string, o: { availableAt?: number; leaseExpiresAt?: number } = {}): ClaimedRun {
  return {
    runId,
    tenantId: 't',
    jobId: `job-${runId}`,
    handler: 'h',
    payload: null,
    pool: 'default',
    scheduledFor: new Date(o.availableAt ?? T0),
    attempt: 1,
    maxAttempts: 3,
    leaseToken: `token-${runId}`,
    leaseExpiresAt: new Date(o.leaseExpiresAt ?? T0 + LEASE_MS),
    availableAt: new Date(o.availableAt ?? T0),
    timeoutMs: null,
  };
}

/** A producer whose claims answer from `queue` (up to `max`), with its source's calls and its events. */
function setup(
  o: {
    concurrency?: number;
    prefetch?: number | 'auto';
    claimAheadMs?: number;
    /** Each started run's handler returns this many ms of the test's clock later (0: at once). */
    handlerMs?: number;
    next?: Date | null;
    pollIntervalMs?: number;
    /** A source whose claims long-poll (an HTTP source's). */
    waitsForWork?: boolean;
    /** The most runs one claim of the source takes (an HTTP source's 500). */
    maxClaimRuns?: number;
  } = {},
) {
  const clock = new FakeClock(T0);
  const runs = new ActiveRuns();
  const queue: ClaimedRun[] = [];
  const claims: ClaimRunsParams[] = [];
  const releases: ReleaseRunsParams[] = [];
  const started: ActiveRun[] = [];
  /** What the source answers for the next available run; how long a claim takes on the test's clock (a long-poll's wait). */
  const state = { next: o.next ?? null, claimTakesMs: 0 };
  const events: [keyof WorkerEvents, unknown[]][] = [];
  let failNext = false;
  /** A notification on the source's channel (`listen`). */
  let notify = () => {};
  const producer = new Producer({
    source: {
      listen: async (onWake) => {
        notify = onWake;
        return async () => {};
      },
      claimRuns: async (p) => {
        claims.push(p);
        if (state.claimTakesMs) clock.advance(state.claimTakesMs);
        if (failNext) {
          failNext = false;
          throw new Error('socket hang up');
        }
        return queue.splice(0, p.max);
      },
      releaseRuns: async (p) => {
        releases.push(p);
        return { released: p.leases.map((l) => l.runId) };
      },
      nextAvailableAt: async () => state.next,
      waitsForWork: o.waitsForWork,
      maxClaimRuns: o.maxClaimRuns,
    },
    clock,
    logger,
    runs,
    scope: {
      workerId: 'w',
      pool: 'default',
      handlers: ['h'],
      concurrency: o.concurrency ?? 2,
      prefetch: o.prefetch ?? 0,
      claimAheadMs: o.claimAheadMs ?? 250,
    },
    pollIntervalMs: o.pollIntervalMs ?? 3_600_000,
    emit: (event, ...args) => void events.push([event, args]),
    begin: (a) => {
      a.started = true;
      a.startedAt = clock.nowMs();
      started.push(a);
      const { handlerMs } = o;
      if (handlerMs === 0) queueMicrotask(() => end(a));
      else if (handlerMs !== undefined) void clock.sleep(handlerMs).then(() => end(a));
    },
    onError: () => {},
  });
  const failClaim = () => {
    failNext = true;
  };
  /** The executor's part when a started run's handler returns and its result is settled. */
  const end = (a: ActiveRun) => {
    runs.finished(a);
    producer.pump();
    runs.ended(a);
  };
  return {
    clock,
    runs,
    queue,
    claims,
    releases,
    started,
    events,
    producer,
    failClaim,
    end,
    state,
    notify: () => notify(),
  };
}

const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

describe('Producer', () => {
  it('on a source that long-polls: a short answer with runs claims again in half the claim-ahead (fewer, larger claims), at once without claim-ahead; an empty one at once, unless it did not wait', async () => {
    // Measured by the http benchmark: claiming again at once after every short answer made about
    // 200 claims a second at 1,000 runs/s, each of a few runs.
    const ahead = setup({ concurrency: 10, waitsForWork: true });
    ahead.producer.start();
    try {
      await settle();
      // Its first claim found nothing and did not wait (the test's clock does not move): it sleeps
      // its poll interval rather than claim again at once.
      expect(ahead.claims).toHaveLength(1);
      ahead.queue.push(claimed('r1'));
      expect(await ahead.producer.claimOnce()).toBe(125);
    } finally {
      await ahead.producer.stop();
    }
    const none = setup({ concurrency: 10, claimAheadMs: 0, waitsForWork: true });
    none.producer.start();
    try {
      await settle();
      none.queue.push(claimed('r2'));
      expect(await none.producer.claimOnce()).toBe(true);
      expect(await none.producer.claimOnce()).toBe(false);
    } finally {
      await none.producer.stop();
    }
    // A claim that waited (its answer came a long-poll later) and found nothing: at once.
    const waited = setup({ concurrency: 10, waitsForWork: true });
    waited.producer.start();
    try {
      await settle();
      waited.state.claimTakesMs = 20_000;
      expect(await waited.producer.claimOnce()).toBe(true);
    } finally {
      await waited.producer.stop();
    }
  });

  it('claims its free capacity, starts up to concurrency and holds the prefetched rest for a free slot', async () => {
    const { queue, claims, started, producer, runs, end } = setup({ concurrency: 2, prefetch: 2 });
    queue.push(...['a', 'b', 'c', 'd', 'e'].map((id) => claimed(id)));
    producer.start();
    try {
      await settle();
      expect(claims[0]).toMatchObject({
        workerId: 'w',
        pool: 'default',
        max: 4,
        aheadMs: 250,
        handlers: ['h'],
      });
      expect(started.map((a) => a.run.runId)).toEqual(['a', 'b']);
      expect(producer.heldCount).toBe(2);
      expect(runs.size).toBe(4);
      // A full claim: the capacity it asked for is taken, so it claims nothing more now.
      expect(await producer.claimOnce()).toBe(false);
      // A slot frees: the next held run takes it at once, in claim order.
      end(started[0]!);
      expect(started.map((a) => a.run.runId)).toEqual(['a', 'b', 'c']);
      // Runs whose result is being written do not count against the capacity of the next claim.
      runs.finished(started[1]!);
      await producer.claimOnce();
      expect(claims.at(-1)!.max).toBe(2);
    } finally {
      await producer.stop();
    }
  });

  it('a freed slot looks at the held runs it needs, not all 1,000; a sweep still finds a held run whose lease is nearly out', async () => {
    const { clock, queue, started, releases, producer, end, runs } = setup({ concurrency: 1, prefetch: 999 });
    // Counts reads of each held run's instant: what a pass over the held runs costs.
    let reads = 0;
    const counted = (r: ClaimedRun): ClaimedRun => {
      const availableAt = r.availableAt;
      return Object.defineProperty({ ...r }, 'availableAt', {
        get: () => {
          reads += 1;
          return availableAt;
        },
      }) as ClaimedRun;
    };
    // One deep in the list has a lease that runs out soon (its claim's heartbeat failed, say).
    const ids = Array.from({ length: 1000 }, (_, i) => `r${i}`);
    queue.push(...ids.map((id) => counted(claimed(id, id === 'r900' ? { leaseExpiresAt: T0 + 1500 } : {}))));
    producer.start();
    try {
      await settle();
      expect([started.length, producer.heldCount]).toEqual([1, 999]);
      // Each slot freeing starts the next held run after a look at one or two of them.
      reads = 0;
      for (let i = 0; i < 50; i++) end(started[i]!);
      expect(started).toHaveLength(51);
      expect(reads).toBeLessThan(150);
      // In claim order, the rest still held; a held run forgotten (its lease lost) leaves only itself.
      expect(started.map((a) => a.run.runId)).toEqual(ids.slice(0, 51));
      expect(producer.heldCount).toBe(949);
      producer.forget(runs.get('r60')!);
      expect(producer.heldCount).toBe(948);
      end(started[50]!);
      end(started[51]!);
      expect(started.slice(51).map((a) => a.run.runId)).toEqual(['r51', 'r52']);
      expect(releases).toEqual([]);
      // Later (past the sweep interval; r900 has 300 ms of its lease left, under its margin), the
      // next pass looks at every held run, and gives r900 back.
      clock.advance(1200);
      end(started[52]!);
      await settle();
      expect(releases.flatMap((r) => r.leases.map((l) => l.runId))).toEqual(['r900']);
      expect(started.map((a) => a.run.runId)).not.toContain('r900');
    } finally {
      await producer.stop();
    }
  });

  it('starts a run claimed ahead exactly at its instant, not before', async () => {
    const { clock, queue, started, producer } = setup({ claimAheadMs: 500 });
    queue.push(claimed('soon', { availableAt: T0 + 400 }));
    producer.start();
    try {
      await settle();
      expect(producer.heldCount).toBe(1);
      expect(started).toEqual([]);
      clock.advance(399);
      await settle();
      expect(started).toEqual([]);
      clock.advance(1);
      await settle();
      expect(started.map((a) => [a.run.runId, a.startedAt])).toEqual([['soon', T0 + 400]]);
    } finally {
      await producer.stop();
    }
  });

  it('does not start a held run whose lease is nearly out: it is released (no attempt spent) and dropped', async () => {
    const { clock, queue, started, releases, events, producer, runs } = setup({ claimAheadMs: 500 });
    // Its lease ends 200 ms after its instant: less than the margin left when it is due (a quarter
    // of the lease, counted as at least 1 s, when that is less than START_MARGIN_MS).
    queue.push(claimed('late', { availableAt: T0 + 400, leaseExpiresAt: T0 + 600 }));
    producer.start();
    try {
      await settle();
      clock.advance(400);
      await settle();
      expect(started).toEqual([]);
      expect(runs.size).toBe(0);
      expect(releases).toEqual([
        { leases: [{ runId: 'late', leaseToken: 'token-late' }], reason: LEASE_TOO_SHORT, now: T0 + 400 },
      ]);
      expect(events).toEqual([
        ['run:dropped', [expect.objectContaining({ runId: 'late' }), LEASE_TOO_SHORT]],
      ]);
    } finally {
      await producer.stop();
    }
  });

  it('sends a failed claim again with the same claim id; the next claim has a new one', async () => {
    const { queue, claims, producer, failClaim } = setup();
    producer.start();
    try {
      await settle(); // the loop's first claim, which found nothing
      failClaim();
      await expect(producer.claimOnce()).rejects.toThrow('socket hang up');
      queue.push(claimed('a'));
      await producer.claimOnce();
      await producer.claimOnce();
      const ids = claims.slice(-3).map((c) => c.claimId);
      expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
      expect(ids[1]).toBe(ids[0]);
      expect(ids[2]).not.toBe(ids[0]);
      // Only the retry may find a claim under its id: the store looks it up for that one alone.
      expect(claims.slice(-3).map((c) => c.firstTry)).toEqual([true, false, true]);
    } finally {
      await producer.stop();
    }
  });

  it('with nothing to claim, answers when to look again: the next run less the claim-ahead', async () => {
    const { producer } = setup({ claimAheadMs: 300, next: new Date(T0 + 1000) });
    producer.start();
    try {
      expect(await producer.claimOnce()).toBe(700);
    } finally {
      await producer.stop();
    }
    const none = setup({ next: null });
    none.producer.start();
    try {
      expect(await none.producer.claimOnce()).toBe(false);
    } finally {
      await none.producer.stop();
    }
  });

  it('idle, claims again when the next run may be claimed, at most a poll interval later, or when poked', async () => {
    const soon = setup({ claimAheadMs: 300, next: new Date(T0 + 1000), pollIntervalMs: 5000 });
    soon.producer.start();
    try {
      await settle();
      expect(soon.claims).toHaveLength(1);
      // By then another worker has it: the source knows of no other run.
      soon.state.next = null;
      soon.clock.advance(699);
      await settle();
      expect(soon.claims).toHaveLength(1);
      soon.clock.advance(1);
      await settle();
      expect(soon.claims).toHaveLength(2);
    } finally {
      await soon.producer.stop();
    }
    const idle = setup({ next: null, pollIntervalMs: 5000 });
    idle.producer.start();
    try {
      await settle();
      idle.clock.advance(4999);
      await settle();
      expect(idle.claims).toHaveLength(1);
      idle.clock.advance(1);
      await settle();
      expect(idle.claims).toHaveLength(2);
      // A freed slot does not wake it: its last claim found too few runs, not too little room.
      idle.producer.poke();
      await settle();
      expect(idle.claims).toHaveLength(2);
      // A notification does, at once.
      idle.notify();
      await settle();
      expect(idle.claims).toHaveLength(3);
      expect(idle.clock.nowMs()).toBe(T0 + 5000);
    } finally {
      await idle.producer.stop();
    }
  });

  describe("prefetch 'auto': held runs are about 100 ms of the handlers' recent pace", () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => claimed(`r${i}`));

    it('with handlers that return at once, claims grow beyond concurrency after a warm-up, up to 1000 runs', async () => {
      const { clock, queue, claims, producer } = setup({ concurrency: 10, prefetch: 'auto', handlerMs: 0 });
      queue.push(...many(100_000));
      producer.start();
      try {
        await settle();
        // No pace yet: the first claim asks for the free slots only, as with no prefetch.
        expect(claims.map((c) => c.max)).toEqual([10]);
        for (let i = 0; i < 100; i++) {
          clock.advance(5);
          await producer.claimOnce();
          await settle();
        }
        const asked = claims.map((c) => c.max);
        expect(asked[1]).toBe(11); // 10 starts in the last second: 1 run of 100 ms held
        expect(Math.max(...asked)).toBe(1000);
        for (const max of asked) expect(max).toBeLessThanOrEqual(1000);
      } finally {
        await producer.stop();
      }
    });

    it('at a pace of more than one claim per 100 ms, holds more than one claim brings: up to two full claims of its source, running and held', async () => {
      // [the most one claim of the source takes, the most running and held]: the database's, HTTP's.
      for (const [claimMax, most] of [
        [1000, 2000],
        [500, 1000],
      ] as const) {
        // 100 slots whose handlers take 5 ms: 20,000 starts a second, 2,000 in 100 ms.
        const { clock, queue, claims, runs, producer } = setup({
          concurrency: 100,
          prefetch: 'auto',
          handlerMs: 5,
          maxClaimRuns: claimMax === 1000 ? undefined : claimMax,
        });
        queue.push(...many(100_000));
        producer.start();
        try {
          await settle();
          let held = 0;
          for (let i = 0; i < 400; i++) {
            clock.advance(5);
            await producer.claimOnce();
            await settle();
            held = Math.max(held, producer.heldCount);
            expect(runs.size).toBeLessThanOrEqual(most);
          }
          // More held than one claim brings (one claim's worth less the running was the most before:
          // 900 held on the database, and its claims asked only for the runs started since the last).
          expect(held).toBeGreaterThan(claimMax);
          expect(held).toBeLessThanOrEqual(most - 100);
          for (const c of claims) expect(c.max).toBeLessThanOrEqual(claimMax);
        } finally {
          await producer.stop();
        }
      }
    });

    it('on a source that takes at most 500 a claim (HTTP), asks for no more, and a full answer is no reason to wait', async () => {
      const { clock, queue, claims, producer } = setup({
        concurrency: 10,
        prefetch: 'auto',
        handlerMs: 0,
        waitsForWork: true,
        maxClaimRuns: 500,
      });
      queue.push(...many(100_000));
      producer.start();
      try {
        await settle();
        const answers: (boolean | number)[] = [];
        for (let i = 0; i < 100; i++) {
          clock.advance(5);
          answers.push(await producer.claimOnce());
          await settle();
        }
        const asked = claims.map((c) => c.max);
        expect(Math.max(...asked)).toBe(500);
        // Once the pace asks for more than the source takes, each claim is full: claim again as
        // soon as slots free (true, false), never after a pause (a number of ms).
        const full = answers.slice(asked.indexOf(500));
        expect(full.length).toBeGreaterThan(10);
        for (const a of full) expect(typeof a).toBe('boolean');
      } finally {
        await producer.stop();
      }
    });

    it('with slow handlers, a claim asks for at most concurrency + floor(starts of the last second × 0.1)', async () => {
      for (const concurrency of [2, 20]) {
        const { clock, queue, claims, started, producer } = setup({
          concurrency,
          prefetch: 'auto',
          handlerMs: 1000,
        });
        queue.push(...many(10_000));
        producer.start();
        try {
          await settle();
          let held = 0;
          for (let t = 0; t < 20_000; t += 50) {
            clock.advance(50);
            await settle();
            const now = clock.nowMs();
            const pace = started.filter((a) => a.startedAt! > now - 1000).length;
            const before = claims.length;
            await producer.claimOnce();
            for (const c of claims.slice(before)) {
              expect(c.max).toBeLessThanOrEqual(concurrency + Math.floor(pace * 0.1));
            }
            held = Math.max(held, producer.heldCount);
          }
          // Each handler takes 1 s: the pace is `concurrency` starts a second, so about 100 ms of
          // it is held (none at concurrency 2, 2 runs at 20), and every slot stays busy.
          expect(held).toBe(Math.floor(concurrency * 0.1));
          expect(started.length).toBeGreaterThanOrEqual(concurrency * 19);
        } finally {
          await producer.stop();
        }
      }
    });

    it('an idle second empties the pace: the next claim asks for the free slots only', async () => {
      const { clock, queue, claims, producer } = setup({ concurrency: 10, prefetch: 'auto', handlerMs: 0 });
      queue.push(...many(5_000));
      producer.start();
      try {
        await settle();
        for (let i = 0; i < 50; i++) {
          clock.advance(5);
          await producer.claimOnce();
          await settle();
        }
        expect(claims.at(-1)!.max).toBeGreaterThan(10);
        clock.advance(1000);
        await producer.claimOnce();
        expect(claims.at(-1)!.max).toBe(10);
      } finally {
        await producer.stop();
      }
    });
  });
});
