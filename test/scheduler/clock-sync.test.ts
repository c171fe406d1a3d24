import pino from 'pino';
import { expect, test } from 'vitest';
import { type ClockSample, FakeClock, OffsetClock } from '../../src/core/index.js';
import { ClockSync } from '../../src/scheduler/clock-sync.js';
import { TickLoop } from '../../src/scheduler/tick.js';
import type { Store, TickResult } from '../../src/store/index.js';

/** A reference clock 5 s ahead of the local one, answering after `rtt` ms of local time. */
function referenceAhead(local: FakeClock, rtt: number) {
  return async (localNowMs: () => number): Promise<ClockSample> => {
    const sentMs = localNowMs();
    local.advance(rtt);
    return { sentMs, referenceMs: sentMs + rtt / 2 + 5000, receivedMs: localNowMs() };
  };
}

function recordingLogger() {
  const lines: { level: number; msg: string }[] = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => lines.push(JSON.parse(s)) });
  return { logger, lines };
}

test('measures the offset with its uncertainty, which grows with the age of the measurement', async () => {
  const local = new FakeClock(1_000_000);
  const clock = new OffsetClock(local);
  const { logger } = recordingLogger();
  const sync = new ClockSync({
    clock,
    sample: referenceAhead(local, 4),
    localNowMs: () => local.nowMs(),
    logger,
  });
  const estimate = await sync.measureOnce();
  expect(estimate.offsetMs).toBe(5000);
  expect(estimate.uncertaintyMs).toBe(2);
  expect(clock.nowMs()).toBe(local.nowMs() + 5000);
  local.advance(3_600_000);
  // 100 ppm of an hour: 360 ms more.
  expect(clock.offset.uncertaintyMs).toBeCloseTo(362, 6);
});

test('refuses to schedule above the bound, logs once each way, and the tick loop skips its pass', async () => {
  const local = new FakeClock(1_000_000);
  const clock = new OffsetClock(local);
  const { logger, lines } = recordingLogger();
  const sync = new ClockSync({
    clock,
    sample: referenceAhead(local, 4),
    localNowMs: () => local.nowMs(),
    logger,
    maxUncertaintyMs: 100,
  });
  expect(sync.refusal()).toMatch(/exceeds the bound of 100 ms/); // never measured: infinite
  await sync.measureOnce();
  expect(sync.refusal()).toBeNull();
  local.advance(1_000_000); // +100 ms of possible drift: 102 ms > 100 ms
  expect(sync.refusal()).toMatch(/clock uncertainty 102\.0 ms exceeds the bound of 100 ms/);
  expect(sync.refusal()).not.toBeNull();
  const refusals = lines.filter((l) => l.msg.startsWith('refusing to schedule'));
  expect(refusals).toHaveLength(2); // once before the first measurement, once now

  let ticks = 0;
  const store = {
    tick: async (): Promise<TickResult> => {
      ticks += 1;
      return { jobs: 0, created: [], dropped: 0, parked: [], full: false, fencedOut: [] };
    },
  } as unknown as Store;
  const loop = new TickLoop({ store, clock, logger, refusal: () => sync.refusal(), intervalMs: 1000 });
  loop.start();
  await new Promise((r) => setImmediate(r));
  expect(ticks).toBe(0);
  await sync.measureOnce();
  local.advance(1000);
  await new Promise((r) => setImmediate(r));
  expect(ticks).toBe(1);
  expect(lines.filter((l) => l.msg.startsWith('database clock trusted again'))).toHaveLength(2);
  await loop.stop();
});
