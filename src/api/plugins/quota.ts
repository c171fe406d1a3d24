/**
 * The tenant request quotas: token buckets per tenant, `perSecond` requests refilled continuously
 * up to `burst`. Every request to a route with a permission takes one token of its tenant once the
 * auth plugin has admitted it, from the worker bucket for a lease route (claims, heartbeats,
 * results: a batch is one request), else from the request bucket; with none left it is answered
 * 429 `rate_limited` with `Retry-After`. In memory, per process: with several servers each enforces its own share. The
 * waiting long-polls' re-claims are paid from a second bucket of the same size (long-poll.ts).
 *
 * Added to the root instance (not an encapsulated plugin) so that every route module inherits it.
 */
import type { Clock } from '../../core/index.js';
import type { App } from '../types.js';
import { envelope } from './errors.js';

/** A tenant's requests per second and burst when the app is given none. */
export const DEFAULT_QUOTA: Readonly<{ perSecond: number; burst: number }> = { perSecond: 200, burst: 400 };

/**
 * A tenant's lease requests (its workers') per second and burst when the app is given none. A
 * batch is one request: a worker finishing 20,000 runs/s in batches of 100 makes about 400 (claims
 * and results).
 */
export const DEFAULT_WORKER_QUOTA: Readonly<{ perSecond: number; burst: number }> = {
  perSecond: 1000,
  burst: 2000,
};

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

/**
 * Adds the `onRequest` hook that spends the quotas: a lease route's request (permission `work`)
 * from `work`, any other from `requests`. Add it after the auth plugin, which sets the tenant.
 */
export function addTenantQuota(app: App, quotas: { requests: TenantQuota; work: TenantQuota }): void {
  app.addHook('onRequest', async (request, reply) => {
    const permission = request.routeOptions.config.permission;
    // Public routes are not counted; a request the auth plugin refused has been answered.
    if (!permission || reply.sent) return;
    const quota = permission === 'work' ? quotas.work : quotas.requests;
    const wait = quota.take(request.principal.tenantId);
    if (wait > 0) {
      return reply
        .code(429)
        .header('retry-after', String(Math.ceil(wait / 1000)))
        .send(
          envelope(
            'rate_limited',
            permission === 'work'
              ? "the tenant's worker request quota is spent; retry later"
              : 'the tenant request quota is spent; retry later',
          ),
        );
    }
  });
}
