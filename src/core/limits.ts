/**
 * Backlog control, the pure part: what a limit is, the names of the gates a run passes, the
 * token and window arithmetic the claim statement does in SQL (written here once more, for what
 * the API and `waitingFor` answer and for tests), and the overlap policies.
 *
 * A limit with a rate paces starts two ways at once: a token bucket (`rate` per second, at most
 * `burst` saved up) and a sliding window (at most max(burst, ⌈rate⌉) starts in any second, counted
 * in sub-windows of WINDOW_GRAIN_MS). The bucket alone would let a second that follows a slow one
 * start the burst on top of the rate.
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
  /**
   * For a limit with a rate (null otherwise), its room now (`roomAt`): the tokens refilled to now,
   * but no more than its one-second window has left; a claim may take the whole part.
   */
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
  // A rate of 0 passes checkNumber's bounds (from 0): it is refused here, by its own message.
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

/** The window a limit with a rate paces starts over, ms: at most `windowCap` starts in any such span. */
export const WINDOW_MS = 1000;
/**
 * The grain of the window, ms: starts are counted per sub-window of this length, and a sub-window
 * counts whole while any of it is within the last `WINDOW_MS`. Counting whole never lets too many
 * start; it delays a start by at most one grain.
 */
export const WINDOW_GRAIN_MS = 50;
/** Sub-windows before the current one that can still meet the window (20). */
const GRAINS = WINDOW_MS / WINDOW_GRAIN_MS;

/** The most runs a limit with a rate lets start in any window of `WINDOW_MS`: max(burst, ⌈rate⌉). */
export function windowCap(l: { rate: number; burst: number }): number {
  return Math.max(l.burst, Math.ceil(l.rate));
}

/** The sub-window index of an instant: floor(epoch ms / WINDOW_GRAIN_MS). */
export function grainOf(ms: number): number {
  return Math.floor(ms / WINDOW_GRAIN_MS);
}

/**
 * A limit's recent starts as its row keeps them (`recent_at`, `recent_n`): in parallel, sub-window
 * indexes (`grainOf`) and the runs started in each.
 */
export interface RecentStarts {
  at: readonly number[];
  n: readonly number[];
}

/** Whether sub-window `j` still meets the window ending at `nowMs`, (now − 1 s, now]: (j + 1) × grain > now − 1 s. */
const live = (j: number, nowMs: number) => j >= grainOf(nowMs) - GRAINS;

/** Runs started in the window ending at `nowMs`, every live sub-window counted whole. */
export function windowUsed(recent: RecentStarts, nowMs: number): number {
  let used = 0;
  recent.at.forEach((j, i) => {
    if (live(j, nowMs)) used += recent.n[i] ?? 0;
  });
  return used;
}

/**
 * The recent starts after `n` runs started at `nowMs`: added to the current sub-window's entry,
 * dead entries dropped, by index. What the claim's update does in SQL (`windowAfter`).
 */
export function recordStarts(recent: RecentStarts, n: number, nowMs: number): RecentStarts {
  const by = new Map<number, number>();
  const add = (j: number, k: number) => {
    if (live(j, nowMs)) by.set(j, (by.get(j) ?? 0) + k);
  };
  recent.at.forEach((j, i) => {
    add(j, recent.n[i] ?? 0);
  });
  add(grainOf(nowMs), n);
  const at = [...by.keys()].sort((a, b) => a - b);
  return { at, n: at.map((j) => by.get(j) as number) };
}

/** A limit's pacing as its row keeps it: the bucket as of `refilledAtMs`, and its recent starts. */
export interface Pacing extends RecentStarts {
  rate: number;
  burst: number;
  /** Tokens in the bucket at `refilledAtMs`. */
  tokens: number;
  refilledAtMs: number;
  /** Tokens its credits hold (store migration 0017): the bucket refills up to burst less these. Default 0. */
  credited?: number;
}

/** The bucket of `p` at `nowMs`: refilled, up to its burst less what its credits hold. */
const bucketAt = (p: Pacing, nowMs: number) =>
  tokensAfter({ ...p, burst: p.burst - (p.credited ?? 0) }, nowMs - p.refilledAtMs);

/**
 * The room of a limit with a rate at `nowMs`: what a claim may take from it now (its whole part),
 * the bucket's tokens refilled to now but no more than the window has left. May be fractional (a
 * bucket refilling) or below 0 (a window over a lowered cap). What the claim computes in SQL
 * (`roomNow`), for what the API, the gauges and `waitingFor` answer.
 */
export function roomAt(p: Pacing, nowMs: number): number {
  return Math.min(bucketAt(p, nowMs), windowCap(p) - windowUsed(p, nowMs));
}

/**
 * How long from `nowMs` until a claim may take one run of the limit, ms (0 when it may now): the
 * later of the bucket's next whole token and the instant enough of the window's oldest starts
 * leave it for one more.
 */
export function msUntilRoom(p: Pacing, nowMs: number): number {
  const bucket = msUntilToken({ rate: p.rate, tokens: bucketAt(p, nowMs) });
  let over = windowUsed(p, nowMs) - (windowCap(p) - 1);
  let window = 0;
  const entries = p.at
    .map((j, i) => ({ j, n: p.n[i] ?? 0 }))
    .filter((e) => live(e.j, nowMs))
    .sort((a, b) => a.j - b.j);
  for (const e of entries) {
    if (over <= 0) break;
    over -= e.n;
    // Sub-window j leaves the window when now − 1 s reaches its end: at (j + 1) × grain + 1 s.
    window = (e.j + 1) * WINDOW_GRAIN_MS + WINDOW_MS - nowMs;
  }
  return Math.max(bucket, window);
}

/** A gate a queued run passes, as it stands (`Store.waitingFor` reads them). */
export interface GateState {
  /** The limit's key: a name, `tenant:<id>` or `job:<id>`. */
  key: string;
  maxConcurrency: number | null;
  inUse: number;
  /** A job gate's overlap policy. */
  overlap: 'skip' | 'queue' | null;
  /** A gate with a rate: its bucket and recent starts (null: no rate). */
  pacing: Pacing | null;
  /** One run holding a slot of the gate, if any. */
  holder: string | null;
}

/**
 * What holds a run at its gates, one phrase per gate that has no room (`roomAt` below 1: no whole
 * token, or its window's starts at the cap) or no free slot now, e.g.
 * `limit payments-api: no token before 2026-…`, `overlap: run … still running`,
 * `max_concurrency 2`. Empty when every gate has room.
 */
export function describeWaits(gates: readonly GateState[], nowMs: number): string[] {
  const out: string[] = [];
  for (const g of gates) {
    const full = g.maxConcurrency !== null && g.inUse >= g.maxConcurrency;
    const dry = g.pacing !== null && roomAt(g.pacing, nowMs) < 1;
    if (!full && !dry) continue;
    if (g.key.startsWith(JOB_KEY_PREFIX)) {
      if (g.overlap !== null) out.push(`overlap: run ${g.holder ?? '(another)'} still running`);
      else out.push(`max_concurrency ${g.maxConcurrency}`);
      continue;
    }
    const why: string[] = [];
    if (dry) {
      const at = new Date(nowMs + msUntilRoom(g.pacing as Pacing, nowMs));
      why.push(`no token before ${at.toISOString()}`);
    }
    if (full) why.push(`max_concurrency ${g.maxConcurrency} in use`);
    out.push(`limit ${g.key}: ${why.join(', ')}`);
  }
  return out;
}
