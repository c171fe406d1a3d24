/**
 * A token bucket per tenant: `perSecond` requests refill continuously up to `burst`. In memory,
 * per process: with several servers each enforces its own share.
 */
import type { Clock } from '../core/index.js';

export class TenantQuota {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly perSecond: number,
    private readonly burst: number,
  ) {}

  /** Takes one token; returns 0 when allowed, else the ms until a token is available. */
  take(tenant: string): number {
    const now = this.clock.nowMs();
    const b = this.buckets.get(tenant) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.perSecond);
    b.at = now;
    this.buckets.set(tenant, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - b.tokens) / this.perSecond) * 1000);
  }
}
