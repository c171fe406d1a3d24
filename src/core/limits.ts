/**
 * Backlog control, the pure part: what a limit is, the names of the gates a run passes, the
 * token arithmetic the claim statement does in SQL (written here once more, for the waiting
 * time a worker sleeps and for tests), and the overlap policies.
 *
 * A gate is a limit as the claim sees it: `<tenant>/<key>`. A run passes three kinds:
 * - `<tenant>/tenant:<tenant>`, its tenant's limit, when an operator set one;
 * - `<tenant>/job:<job>`, its job's own cap (`max_concurrency`, 1 for overlap `skip` or `queue`);
 * - `<tenant>/<key>` for each named limit its job lists (`limits: ["payments-api"]`).
 * A gate without a row in the store lets everything through.
 */
import { ValidationError } from './errors.js';
import { JOB_KEY_PREFIX, MAX_CONCURRENCY, type OVERLAP_POLICIES, TENANT_KEY_PREFIX } from './fields/job.js';
import { checkInteger, checkNumber, validateId } from './job.js';

export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];
/** Largest rate (tokens per second) and burst of a limit. */
export const MAX_RATE = 1_000_000;
export const MAX_BURST = 1_000_000;

/** What an operator gives to define a limit (`PUT /v1/limits/{key}`). */
export interface LimitInput {
  /** Tokens per second, > 0; with `burst`, or neither. */
  rate?: number | null;
  /** Bucket size (and tokens of a new limit), ≥ 1. */
  burst?: number | null;
  /** Runs holding a slot at once, ≥ 1. */
  maxConcurrency?: number | null;
}

/** A checked limit definition: null where unset. */
export interface LimitSpec {
  rate: number | null;
  burst: number | null;
  maxConcurrency: number | null;
}

/** A limit as the store holds it. */
export interface Limit extends LimitSpec {
  tenantId: string;
  key: string;
  /** Tokens now (after refill), for a limit with a rate; null otherwise. */
  tokens: number | null;
  /** Slots held by running runs. */
  inUse: number;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * A limit's key as an operator may name it in `tenantId`: an id; `tenant:<tenantId>` (its own
 * tenant's limit, no other tenant's); never `job:…` (a job's own gate).
 */
export function validateLimitKey(key: unknown, tenantId: string, what = 'key'): string {
  const k = validateId(key, what);
  if (k.startsWith(JOB_KEY_PREFIX)) {
    throw new ValidationError(
      `${what} "${k}": keys starting with "${JOB_KEY_PREFIX}" are a job's own (max_concurrency, overlap)`,
      {
        field: what,
      },
    );
  }
  if (k.startsWith(TENANT_KEY_PREFIX) && k !== tenantKey(tenantId)) {
    throw new ValidationError(`${what} "${k}": the only tenant key here is "${tenantKey(tenantId)}"`, {
      field: what,
    });
  }
  return k;
}

/** An unset (undefined or null) bound of a limit is null; a set one is checked by `check`. */
function optional(value: unknown, check: (v: unknown) => number): number | null {
  return value === undefined || value === null ? null : check(value);
}

/** Checks a limit definition: a rate with a burst, a concurrency cap, or both. */
export function validateLimit(input: LimitInput): LimitSpec {
  if (typeof input !== 'object' || input === null) throw new ValidationError('limit must be an object');
  for (const k of Object.keys(input)) {
    if (!['rate', 'burst', 'maxConcurrency'].includes(k)) {
      throw new ValidationError(`unknown limit field "${k}"`, { field: k });
    }
  }
  // Checked first: optionalNumber's bounds would say "from 5e-324" of a rate of 0.
  if (typeof input.rate === 'number' && input.rate <= 0) {
    throw new ValidationError('rate must be above 0', { field: 'rate' });
  }
  const rate = optional(input.rate, (v) => checkNumber(v, 'rate', 0, MAX_RATE));
  const burst = optional(input.burst, (v) => checkInteger(v, 'burst', 1, MAX_BURST));
  const maxConcurrency = optional(input.maxConcurrency, (v) =>
    checkInteger(v, 'max_concurrency', 1, MAX_CONCURRENCY),
  );
  if ((rate === null) !== (burst === null)) {
    throw new ValidationError(rate === null ? 'burst needs a rate' : 'rate needs a burst', {
      field: rate === null ? 'rate' : 'burst',
    });
  }
  if (rate === null && maxConcurrency === null) {
    throw new ValidationError('a limit needs a rate and burst, a max_concurrency, or both', {
      field: 'rate',
    });
  }
  return { rate, burst, maxConcurrency };
}

/** The key of a tenant's own limit. */
export function tenantKey(tenantId: string): string {
  return `${TENANT_KEY_PREFIX}${tenantId}`;
}

/** Tokens in a bucket `elapsedMs` after it held `tokens`: refilled at `rate`, at most `burst`. */
export function tokensAfter(l: { rate: number; burst: number; tokens: number }, elapsedMs: number): number {
  return Math.min(l.burst, l.tokens + (l.rate * Math.max(0, elapsedMs)) / 1000);
}

/** How long until a bucket holding `tokens` has a whole one, ms (0 when it has). */
export function msUntilToken(l: { rate: number; tokens: number }): number {
  return l.tokens >= 1 ? 0 : Math.ceil(((1 - l.tokens) / l.rate) * 1000);
}

/** A gate a queued run passes, as it stands (`Store.waitingFor` reads them). */
export interface GateState {
  /** The limit's key: a name, `tenant:<id>` or `job:<id>`. */
  key: string;
  rate: number | null;
  maxConcurrency: number | null;
  inUse: number;
  /** A job gate's overlap policy. */
  overlap: 'skip' | 'queue' | null;
  /** Tokens now (refilled), for a gate with a rate. */
  tokens: number | null;
  /** One run holding a slot of the gate, if any. */
  holder: string | null;
}

/**
 * What holds a run at its gates, one phrase per gate that has no token or no free slot now, e.g.
 * `limit payments-api: no token before 2026-…`, `overlap: run … still running`,
 * `max_concurrency 2`. Empty when every gate has room.
 */
export function describeWaits(gates: readonly GateState[], nowMs: number): string[] {
  const out: string[] = [];
  for (const g of gates) {
    const full = g.maxConcurrency !== null && g.inUse >= g.maxConcurrency;
    const dry = g.rate !== null && g.tokens !== null && g.tokens < 1;
    if (!full && !dry) continue;
    if (g.key.startsWith(JOB_KEY_PREFIX)) {
      if (g.overlap !== null) out.push(`overlap: run ${g.holder ?? '(another)'} still running`);
      else out.push(`max_concurrency ${g.maxConcurrency}`);
      continue;
    }
    const why: string[] = [];
    if (dry) {
      const at = new Date(nowMs + msUntilToken({ rate: g.rate as number, tokens: g.tokens as number }));
      why.push(`no token before ${at.toISOString()}`);
    }
    if (full) why.push(`max_concurrency ${g.maxConcurrency} in use`);
    out.push(`limit ${g.key}: ${why.join(', ')}`);
  }
  return out;
}
