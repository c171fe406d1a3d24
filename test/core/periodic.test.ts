import { expect, test } from 'vitest';
import { FakeClock } from '../../src/core/clock.js';
import { Periodic } from '../../src/core/periodic.js';

/** Resolves once `n` steps have run (a test guard against hanging, not scheduling logic). */
function stepsReached(counter: { n: number; waiters: (() => void)[] }) {
  return new Promise<void>((resolve) => counter.waiters.push(resolve));
}

test('a poke that arrives during a step makes the next step run without waiting', async () => {
  const clock = new FakeClock(0);
  const counter = { n: 0, waiters: [] as (() => void)[] };
  let periodic!: Periodic;
  periodic = new Periodic({
    clock,
    intervalMs: 60_000,
    step: () => {
      counter.n += 1;
      if (counter.n === 1) periodic.poke(); // e.g. a handler finished while the claim was in flight
      for (const w of counter.waiters.splice(0)) w();
      return false;
    },
    onError: () => {},
  });
  const second = new Promise<void>((resolve) => {
    const check = (): void => {
      if (counter.n >= 2) resolve();
      else void stepsReached(counter).then(check);
    };
    check();
  });
  periodic.start();
  await second;
  expect(counter.n).toBe(2);
  expect(clock.nowMs()).toBe(0);
  await periodic.stop();
});

test('without a poke, the next step waits for the interval', async () => {
  const clock = new FakeClock(0);
  let steps = 0;
  const periodic = new Periodic({
    clock,
    intervalMs: 1000,
    step: () => {
      steps += 1;
      return false;
    },
    onError: () => {},
  });
  periodic.start();
  await new Promise((r) => setImmediate(r));
  expect(steps).toBe(1);
  expect(clock.pendingSleeps).toBe(1);
  clock.advance(999);
  await new Promise((r) => setImmediate(r));
  expect(steps).toBe(1);
  clock.advance(1);
  await new Promise((r) => setImmediate(r));
  expect(steps).toBe(2);
  await periodic.stop();
});

test('a step that returns a number waits that long, never longer than the interval', async () => {
  const clock = new FakeClock(0);
  const at: number[] = [];
  const periodic = new Periodic({
    clock,
    intervalMs: 1000,
    step: () => {
      at.push(clock.nowMs());
      return at.length === 1 ? 30 : 5000;
    },
    onError: () => {},
  });
  periodic.start();
  await new Promise((r) => setImmediate(r));
  clock.advance(29);
  await new Promise((r) => setImmediate(r));
  expect(at).toEqual([0]);
  clock.advance(1);
  await new Promise((r) => setImmediate(r));
  expect(at).toEqual([0, 30]);
  // 5000 is capped at the interval.
  clock.advance(1000);
  await new Promise((r) => setImmediate(r));
  expect(at).toEqual([0, 30, 1030]);
  await periodic.stop();
});
