/**
 * The tenant request quota: a token bucket per tenant, `perSecond` requests refilled continuously
 * up to `burst`. Every request to a route with a permission takes one token of its tenant once the
 * auth plugin has admitted it; with none left it is answered 429 `rate_limited` with
 * `Retry-After`. In memory, per process: with several servers each enforces its own share. The
 * waiting long-polls' re-claims are paid from a second bucket of the same size (long-poll.ts).
 *
 * Added to the root instance (not an encapsulated plugin) so that every route module inherits it.
 */
import type { Clock } from '../../core/index.js';
import type { App } from '../types.js';
import { envelope } from './errors.js';

/** A tenant's requests per second and burst when the app is given none. */
export const DEFAULT_QUOTA: Readonly<{ perSecond: number; burst: number }> = { perSecond: 200, burst: 400 };

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

/** Adds the `onRequest` hook that spends `quota`; add it after the auth plugin, which sets the tenant. */
export function addTenantQuota(app: App, quota: TenantQuota): void {
  app.addHook('onRequest', async (request, reply) => {
    // Public routes are not counted; a request the auth plugin refused has been answered.
    if (!request.routeOptions.config.permission || reply.sent) return;
    const wait = quota.take(request.principal.tenantId);
    if (wait > 0) {
      return reply
        .code(429)
        .header('retry-after', String(Math.ceil(wait / 1000)))
        .send(envelope('rate_limited', 'the tenant request quota is spent; retry later'));
    }
  });
}
