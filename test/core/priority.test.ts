import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/core/errors.js';
import {
  checkAgingStep,
  MAX_AGING_STEP_MS,
  MAX_PRIORITY,
  MIN_AGING_STEP_MS,
  MIN_PRIORITY,
  sortKey,
} from '../../src/core/priority.js';

const STEP = 60_000;
const T = 1_700_000_000_000;

interface Run {
  id: string;
  availableAt: number;
  priority: number;
}

/** The claim order: ascending sort key, as the store's index reads it. */
const claimOrder = (runs: Run[]) =>
  [...runs]
    .sort((a, b) => sortKey(a.availableAt, a.priority, STEP) - sortKey(b.availableAt, b.priority, STEP))
    .map((r) => r.id);

describe('sortKey', () => {
  it('is availableAt minus priority aging steps', () => {
    expect(sortKey(1_000_000, 5, STEP)).toBe(700_000);
    expect(sortKey(1_000_000, 0, STEP)).toBe(1_000_000);
    expect(sortKey(T, 100, 1_000)).toBe(T - 100_000);
  });

  it('puts priority 9 before priority 5 at equal availability', () => {
    expect(sortKey(T, 9, STEP)).toBeLessThan(sortKey(T, 5, STEP));
    expect(
      claimOrder([
        { id: 'p5', availableAt: T, priority: 5 },
        { id: 'p9', availableAt: T, priority: 9 },
        { id: 'p0', availableAt: T, priority: 0 },
      ]),
    ).toEqual(['p9', 'p5', 'p0']);
  });

  it('lets a priority-0 run that waited 10 aging steps overtake a newer priority-9 run', () => {
    const old = sortKey(T - 10 * STEP, 0, STEP);
    const fresh = sortKey(T, 9, STEP);
    expect(old).toBeLessThan(fresh);
    expect(fresh - old).toBe(STEP);
    expect(
      claimOrder([
        { id: 'fresh-p9', availableAt: T, priority: 9 },
        { id: 'old-p0', availableAt: T - 10 * STEP, priority: 0 },
      ]),
    ).toEqual(['old-p0', 'fresh-p9']);
  });

  it('ages one priority level per aging step exactly', () => {
    // Nine steps of waiting make priority 0 equal to priority 9; a millisecond less does not.
    expect(sortKey(T - 9 * STEP, 0, STEP)).toBe(sortKey(T, 9, STEP));
    expect(sortKey(T - 9 * STEP + 1, 0, STEP)).toBeGreaterThan(sortKey(T, 9, STEP));
  });

  it('keeps strict priority order among runs available within one aging step of each other', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: MIN_PRIORITY, max: MAX_PRIORITY - 1 }),
        fc.integer({ min: 1, max: MAX_PRIORITY }),
        fc.integer({ min: -(STEP - 1), max: STEP - 1 }),
        (low, bump, delta) => {
          const high = Math.min(MAX_PRIORITY, low + bump);
          // The higher-priority run may have become available up to one step later (or earlier).
          expect(sortKey(T + delta, high, STEP)).toBeLessThan(sortKey(T, low, STEP));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('orders equal priorities by availability', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 1, max: 10 * STEP }), (p, wait) => {
        expect(sortKey(T - wait, p, STEP)).toBeLessThan(sortKey(T, p, STEP));
      }),
    );
  });

  it('spans priorities 0 to 100', () => {
    expect(MIN_PRIORITY).toBe(0);
    expect(MAX_PRIORITY).toBe(100);
  });
});

describe('checkAgingStep', () => {
  it('takes whole milliseconds from 1 s to 1 day', () => {
    expect(checkAgingStep(MIN_AGING_STEP_MS)).toBe(1000);
    expect(checkAgingStep(60_000)).toBe(60_000);
    expect(checkAgingStep(MAX_AGING_STEP_MS)).toBe(86_400_000);
  });

  it.each([0, -1, 999, MAX_AGING_STEP_MS + 1, 1000.5, Number.NaN, Number.POSITIVE_INFINITY])(
    'refuses %s, naming the field',
    (ms) => {
      expect(() => checkAgingStep(ms)).toThrow(ValidationError);
      expect(() => checkAgingStep(ms, 'aging_step')).toThrow(/^aging_step must be from 1s to 1d/);
      try {
        checkAgingStep(ms);
      } catch (err) {
        expect((err as ValidationError).details).toEqual({ field: 'agingStepMs' });
      }
    },
  );

  it('gives the bound: a priority-p run goes before any priority-q run ready more than (q-p) steps after it', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: MIN_AGING_STEP_MS, max: MAX_AGING_STEP_MS }),
        fc.integer({ min: MIN_PRIORITY, max: MAX_PRIORITY }),
        fc.integer({ min: MIN_PRIORITY, max: MAX_PRIORITY }),
        fc.integer({ min: 1, max: 10 * MAX_AGING_STEP_MS }),
        (step, p, q, after) => {
          const later = T + (q - p) * step + after;
          expect(sortKey(T, p, step)).toBeLessThan(sortKey(later, q, step));
          // And at or before t + (q - p) steps, the priority-q run's key is not larger.
          expect(sortKey(T + (q - p) * step, q, step)).toBe(sortKey(T, p, step));
        },
      ),
      { numRuns: 500 },
    );
  });
});
