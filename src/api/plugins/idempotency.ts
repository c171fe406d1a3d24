/**
 * `Idempotency-Key`: a request repeated with the same key (within the tenant and the route's scope)
 * gets the first request's answer again rather than doing the work twice. The key is taken with the
 * body's hash before the work starts; the answer is remembered once the work is done, for
 * IDEMPOTENCY_TTL_MS. Invariants: the same key with another body is refused (422
 * `idempotency_mismatch`), a key whose first request is still being served is refused (409
 * `conflict`, retry), and only a lasting answer is remembered: a failure the route does not call
 * lasting frees the key, so that a retry can succeed.
 */
import { createHash } from 'node:crypto';
import { type Clock, ConflictError, TockError, ValidationError } from '../../core/index.js';
import type { Store } from '../../store/index.js';

/** How long an answer is replayed, ms. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/** What an Idempotency-Key may be: 1 to 200 visible ASCII characters. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

/** An answer as a route sends it, and as it is replayed: status and JSON body. */
export interface Answer<B = unknown> {
  status: number;
  body: B;
}

export interface IdempotentRequest {
  tenantId: string;
  /** What the key is for within the tenant, e.g. `trigger:<job_id>`: the same key elsewhere is another key. */
  scope: string;
  /** The `Idempotency-Key` header as received; undefined: none, the work is done as usual. */
  header: string | string[] | undefined;
  /** The request's body: a replay must have the same. */
  body: unknown;
}

export interface IdempotencyOptions {
  store: Pick<Store, 'takeIdempotent' | 'finishIdempotent' | 'releaseIdempotent'>;
  clock: Clock;
}

/** The SHA-256 of a body's JSON (no body: of `null`). */
export function hashBody(body: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(body ?? null))
    .digest('hex');
}

/**
 * `work`'s answer, done once per key: with no key, `work` as is; with a key seen before, the
 * remembered answer. When `work` throws, `lasting` says whether the error is an answer to remember
 * (and gives it); any other error frees the key and is thrown.
 */
export async function idempotent<B>(
  o: IdempotencyOptions,
  request: IdempotentRequest,
  work: () => Promise<Answer<B>>,
  lasting: (err: unknown) => Answer<B> | null,
): Promise<Answer<B>> {
  const { store, clock } = o;
  const rawKey = request.header;
  if (rawKey === undefined) return await work();
  if (typeof rawKey !== 'string' || !IDEMPOTENCY_KEY.test(rawKey)) {
    throw new ValidationError('Idempotency-Key must be 1-200 visible ASCII characters', {
      field: 'Idempotency-Key',
    });
  }
  const requestHash = hashBody(request.body);
  const idem = { tenantId: request.tenantId, scope: request.scope, key: rawKey };
  const taken = await store.takeIdempotent({
    ...idem,
    requestHash,
    now: clock.nowMs(),
    ttlMs: IDEMPOTENCY_TTL_MS,
  });
  if (taken.state !== 'taken') {
    const storedHash = taken.state === 'done' ? taken.answer.requestHash : taken.requestHash;
    if (storedHash !== requestHash) {
      throw new TockError(
        'idempotency_mismatch',
        'this Idempotency-Key was used with a different request body',
      );
    }
    if (taken.state === 'in_progress')
      throw new ConflictError('a request with this Idempotency-Key is in progress; retry');
    // What `finishIdempotent` stored under this scope: an answer of this same route.
    return { status: taken.answer.status, body: taken.answer.body as B };
  }
  let answer: Answer<B>;
  try {
    answer = await work();
  } catch (err) {
    const kept = lasting(err);
    if (kept === null) {
      await store.releaseIdempotent(idem);
      throw err;
    }
    answer = kept;
  }
  await store.finishIdempotent({ ...idem, answer: { requestHash, ...answer } });
  return answer;
}
