import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { jitterOffsetMs } from '../../src/core/jitter.js';

describe('jitterOffsetMs', () => {
  it('is zero without jitter', () => {
    expect(jitterOffsetMs('t', 'job', 0)).toBe(0);
  });

  it('stays within [0, jitter) and never moves a run before its slot', () => {
    for (let i = 0; i < 10_000; i++) {
      const o = jitterOffsetMs('acme', `job-${i}`, 300);
      expect(o).toBeGreaterThanOrEqual(0);
      expect(o).toBeLessThan(300_000);
      expect(Number.isInteger(o)).toBe(true);
    }
  });

  it('spreads 10,000 jobs evenly: chi-square over 50 buckets below the 0.1% critical value', () => {
    const buckets = new Array<number>(50).fill(0);
    const n = 10_000;
    for (let i = 0; i < n; i++) buckets[Math.floor(jitterOffsetMs('acme', `job-${i}`, 300) / 6000)]! += 1;
    const expected = n / buckets.length;
    const chi = buckets.reduce((sum, b) => sum + (b - expected) ** 2 / expected, 0);
    // 49 degrees of freedom: P(chi² > 85.35) = 0.001.
    expect(chi).toBeLessThan(85.35);
    expect(Math.max(...buckets.map((b) => Math.abs(b - expected) / expected))).toBeLessThan(0.2);
  });

  it('depends on tenant and job only, and is the same in another process', () => {
    const ids = ['a', 'b', 'nightly-billing', 'x:y.z'];
    const here = ids.map((id) => jitterOffsetMs('tenant-1', id, 3600));
    expect(new Set(here).size).toBe(ids.length);
    expect(jitterOffsetMs('tenant-2', 'a', 3600)).not.toBe(here[0]);
    // The built module (npm test builds first), run by a separate Node process.
    const built = new URL('../../dist/core/jitter.js', import.meta.url).href;
    const script = `import { jitterOffsetMs } from ${JSON.stringify(built)};
      console.log(JSON.stringify(${JSON.stringify(ids)}.map((id) => jitterOffsetMs('tenant-1', id, 3600))));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    expect(JSON.parse(out)).toEqual(here);
  });
});
