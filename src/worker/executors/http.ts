/**
 * The HTTP executor: a handler that calls one configured URL per run. The URL is fixed in the
 * worker's configuration and must fall under the worker's allow-list, checked when the
 * configuration is loaded — a job names a handler, never a target, so a job definition cannot
 * point a worker at an arbitrary host. Redirects are not followed, for the same reason.
 *
 * Each request carries the run's identity (`Tock-Run-Id`, `Tock-Job-Id`, `Tock-Scheduled-For`,
 * `Tock-Attempt`) and `Idempotency-Key: <job_id>/<scheduled_for>`, the same on every attempt of a
 * slot, so the receiver can make a repeated delivery harmless. The outcome maps onto the worker's:
 * 2xx succeeds with the response body's tail as output; 408, 429, 5xx, a timeout or a failed
 * connection retries (no sooner than `Retry-After` when the answer has one); any other answer is
 * a permanent failure, because sending the same request again cannot change it.
 */
import {
  checkAllowedUrl,
  PermanentError,
  RetryLaterError,
  ValidationError,
  validateAllowList,
} from '../../core/index.js';
import type { Handler, RunContext } from '../worker.js';
import { executorError, failureMessage, OutputTail } from './output.js';

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** Default time a request (response body included) may take, ms. */
export const DEFAULT_HTTP_TIMEOUT_MS = 30_000;
const MAX_TIMEOUT_MS = 24 * 3600 * 1000;

export interface HttpExecutorConfig {
  /** Default `POST`. `GET` and `DELETE` send no body. */
  method?: HttpMethod;
  /** The URL called; it must fall under the worker's allow-list. */
  url: string;
  /** Extra request headers (an `Authorization`, say). The identity headers cannot be overridden. */
  headers?: Record<string, string>;
  /** Most time the request may take, response body included, ms. Default 30000. */
  timeout?: number;
}

export interface HttpExecutorOptions {
  /**
   * URL prefixes this worker may call, such as `https://api.example.com/` or `http://127.0.0.1:`
   * (any port on loopback). A prefix that ends inside the host name matches that host only
   * (`https://api.example.com` does not match `https://api.example.com.evil.net/`).
   */
  allow: readonly string[];
  /** The current time, ms, for a `Retry-After` given as an HTTP date. Default `Date.now`. */
  now?: () => number;
}

/** The allow-list's checks live in core (the notifier's URLs are held to the same rules). */
export { checkAllowedUrl, validateAllowList };

function invalid(field: string, reason: string): ValidationError {
  return new ValidationError(`${field} ${reason}`, { field });
}

/** Headers the executor sets itself; a configuration may not set them. */
const RESERVED_HEADERS = [
  'tock-run-id',
  'tock-job-id',
  'tock-scheduled-for',
  'tock-attempt',
  'idempotency-key',
  'content-length',
  'host',
];

/**
 * The wait a `Retry-After` header asks for, ms: delay-seconds or an HTTP date. `null` when the
 * header is absent or unreadable.
 */
export function parseRetryAfter(value: string | null, nowMs: number): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds * 1000) ? seconds * 1000 : null;
  }
  // HTTP dates start with the day's name (IMF-fixdate, RFC 850 and asctime forms alike).
  if (!/^[A-Za-z]{3}/.test(text)) return null;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

/** The failure's own words: `fetch failed` hides the reason in `cause` (ECONNREFUSED, ENOTFOUND…). */
function describeFetchError(err: unknown): string {
  const cause = err instanceof Error ? (err.cause as unknown) : undefined;
  for (const e of [cause, err]) {
    if (e instanceof Error) {
      const code = (e as { code?: unknown }).code;
      if (e.message)
        return typeof code === 'string' && !e.message.includes(code) ? `${code}: ${e.message}` : e.message;
      if (typeof code === 'string') return code;
    }
  }
  return String(err);
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}

/** A configuration once validated: what every request of the handler uses. */
interface HttpPlan {
  method: HttpMethod;
  url: URL;
  timeoutMs: number;
  /** The configured headers, checked; each request adds the run's identity to a copy. */
  baseHeaders: Headers;
  hasBody: boolean;
  now: () => number;
  /** How messages name the request: without its query string, which may hold a secret. */
  target: string;
}

/** Checks the configured headers: strings, none the executor sets itself, valid for HTTP. */
function checkHeaders(extra: unknown): Headers {
  if (typeof extra !== 'object' || extra === null || Array.isArray(extra))
    throw invalid('headers', 'must be a mapping of header names to strings');
  for (const [name, value] of Object.entries(extra)) {
    if (typeof value !== 'string') throw invalid(`headers.${name}`, 'must be a string');
    if (RESERVED_HEADERS.includes(name.toLowerCase()))
      throw invalid(`headers.${name}`, 'is set by the executor and cannot be configured');
  }
  try {
    return new Headers(extra as Record<string, string>);
  } catch (err) {
    throw invalid(
      'headers',
      `are not valid HTTP headers: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** Checks a configuration, field by field in this order, and returns what the requests use. */
function httpPlan(config: HttpExecutorConfig, options: HttpExecutorOptions): HttpPlan {
  const allow = validateAllowList(options.allow);
  const method = config.method ?? 'POST';
  if (!(HTTP_METHODS as readonly string[]).includes(method))
    throw invalid('method', `must be one of ${HTTP_METHODS.join(', ')}`);
  const url = checkAllowedUrl(config.url, allow);
  const timeoutMs = config.timeout ?? DEFAULT_HTTP_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS)
    throw invalid('timeout', `must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}`);
  const baseHeaders = checkHeaders(config.headers ?? {});
  return {
    method,
    url,
    timeoutMs,
    baseHeaders,
    hasBody: method !== 'GET' && method !== 'DELETE',
    now: options.now ?? Date.now,
    target: `${method} ${url.origin}${url.pathname}`,
  };
}

/** Validates the configuration now (the allow-list included) and returns the handler. */
export function httpExecutor(config: HttpExecutorConfig, options: HttpExecutorOptions): Handler {
  const plan = httpPlan(config, options);
  return async (ctx: RunContext) => {
    if (ctx.signal.aborted) throw abortError(ctx.signal);
    const { response, body } = await sendRequest(plan, ctx);
    return readAnswer(plan, response, body);
  };
}

/** The request's headers: the configured ones, the run's identity and the idempotency key. */
function requestHeaders(plan: HttpPlan, ctx: RunContext): Headers {
  const scheduledFor = ctx.scheduledFor.toISOString();
  const headers = new Headers(plan.baseHeaders);
  headers.set('Tock-Run-Id', ctx.runId);
  headers.set('Tock-Job-Id', ctx.jobId);
  headers.set('Tock-Scheduled-For', scheduledFor);
  headers.set('Tock-Attempt', String(ctx.attempt));
  headers.set('Idempotency-Key', `${ctx.jobId}/${scheduledFor}`);
  if (plan.hasBody && !headers.has('Content-Type')) headers.set('Content-Type', 'application/json');
  return headers;
}

/**
 * Sends the request and reads the whole response body (its tail kept), within the timeout. No
 * answer (a timeout, a failed connection) is an error that retries; an aborted run's signal is
 * thrown as it is.
 */
async function sendRequest(
  plan: HttpPlan,
  ctx: RunContext,
): Promise<{ response: Response; body: OutputTail }> {
  const headers = requestHeaders(plan, ctx);
  const timeout = AbortSignal.timeout(plan.timeoutMs);
  const signal = AbortSignal.any([ctx.signal, timeout]);
  const body = new OutputTail();
  try {
    const response = await fetch(plan.url, {
      method: plan.method,
      headers,
      body: plan.hasBody ? JSON.stringify(ctx.payload ?? null) : undefined,
      signal,
      redirect: 'manual',
    });
    if (response.body) for await (const chunk of response.body) body.write(chunk);
    return { response, body };
  } catch (err) {
    if (ctx.signal.aborted) throw abortError(ctx.signal);
    const summary = timeout.aborted
      ? `${plan.target} timed out after ${plan.timeoutMs} ms`
      : `${plan.target} failed: ${describeFetchError(err)}`;
    throw executorError(new Error(failureMessage(summary, body, 'response body')), body);
  }
}

/**
 * What an answer means for the run: 2xx succeeds with the body's tail as output; 408, 429 and 5xx
 * retry (after `Retry-After` when given); anything else, a redirect included, is permanent.
 */
function readAnswer(plan: HttpPlan, response: Response, body: OutputTail): { output: string } {
  const { status } = response;
  if (status >= 200 && status < 300) return { output: body.text() };
  const summary = `${plan.target} answered ${status}${response.statusText ? ` ${response.statusText}` : ''}`;
  const details = { status };
  if (status === 408 || status === 429 || status >= 500) {
    const { now } = plan;
    const waitMs = parseRetryAfter(response.headers.get('Retry-After'), now());
    const message = failureMessage(
      waitMs === null ? summary : `${summary}; retry after ${Math.ceil(waitMs / 1000)} s`,
      body,
      'response body',
    );
    const err = waitMs === null ? new Error(message) : new RetryLaterError(message, waitMs, details);
    throw executorError(err, body);
  }
  const location = response.headers.get('Location');
  const why =
    status >= 300 && status < 400
      ? `; redirects are not followed${location ? ` (Location: ${location})` : ''}`
      : '';
  throw executorError(
    new PermanentError(failureMessage(`${summary}${why}`, body, 'response body'), details),
    body,
  );
}
