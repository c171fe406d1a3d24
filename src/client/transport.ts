/**
 * The client's transport: one JSON request to the API over `fetch`, within a timeout and the
 * caller's abort signal, and what its answer means. Every error answer becomes a `TockApiError`
 * carrying the status and the envelope's stable `code`; a server that cannot be reached (or does
 * not answer in time) is a `TockConnectionError` naming the URL. Nothing here retries: whether a
 * request may be repeated is the caller's decision.
 */

/** The server answered with an error: `status` and the envelope's `{code, message, run_id?}`. */
export class TockApiError extends Error {
  /** The HTTP status, e.g. 404. */
  readonly status: number;
  /** The stable machine-readable code, e.g. `not_found`, `validation_error`, `lease_lost`. */
  readonly code: string;
  /** For a slot conflict: the run that slot already has. */
  readonly runId?: string;

  constructor(status: number, code: string, message: string, runId?: string) {
    super(message);
    this.name = 'TockApiError';
    this.status = status;
    this.code = code;
    if (runId !== undefined) this.runId = runId;
  }
}

/** No answer: the server could not be reached, or did not answer within the timeout. */
export class TockConnectionError extends Error {
  /** The URL requested. */
  readonly url: string;

  constructor(url: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TockConnectionError';
    this.url = url;
  }
}

/** Where and how requests go: the server's base URL, the key, the default timeout, the `fetch`. */
export interface Connection {
  /** The base URL, without a trailing slash. */
  url: string;
  key: string | undefined;
  timeoutMs: number;
  fetch: typeof fetch;
}

export interface RequestOptions {
  query?: Record<string, string | number | undefined | null>;
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** Sends one request and returns the answer's JSON (undefined for an empty success). */
export async function request<T>(
  conn: Connection,
  method: string,
  path: string,
  o: RequestOptions = {},
): Promise<T> {
  return (await requestWithStatus<T>(conn, method, path, o)).body;
}

/** `request`, with the success status too (a PUT's 201 created beside its 200 replaced). */
export async function requestWithStatus<T>(
  conn: Connection,
  method: string,
  path: string,
  o: RequestOptions = {},
): Promise<{ status: number; body: T }> {
  const url = requestUrl(conn.url, path, o.query);
  const headers: Record<string, string> = { accept: 'application/json', ...o.headers };
  if (conn.key !== undefined) headers.authorization = `Bearer ${conn.key}`;
  let payload: string | undefined;
  if (o.body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(o.body);
  }
  const { status, text } = await send(conn, url, { method, headers, body: payload }, o);
  return { status, body: decodeAnswer<T>(method, url, status, text) };
}

/** The URL of `path` under the base, with the query's defined values. */
function requestUrl(base: string, path: string, query: RequestOptions['query']): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null) search.set(name, String(value));
  }
  const text = search.toString();
  return `${base}${path}${text ? `?${text}` : ''}`;
}

/**
 * Fetches `url` and reads the whole answer, within the timeout (`o.timeoutMs`, else the
 * connection's) and `o.signal`. No answer is a `TockConnectionError`; when `o.signal` aborts, its
 * error is thrown as it is.
 */
async function send(
  conn: Connection,
  url: string,
  init: { method: string; headers: Record<string, string>; body: string | undefined },
  o: RequestOptions,
): Promise<{ status: number; text: string }> {
  const timeoutMs = o.timeoutMs ?? conn.timeoutMs;
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  const onAbort = () => controller.abort(o.signal?.reason);
  if (o.signal?.aborted) onAbort();
  else o.signal?.addEventListener('abort', onAbort, { once: true });

  const fetchImpl = conn.fetch;
  try {
    const response = await fetchImpl(url, { ...init, signal: controller.signal });
    return { status: response.status, text: await response.text() };
  } catch (err) {
    if (timedOut) {
      throw new TockConnectionError(url, `${init.method} ${url} got no answer within ${timeoutMs} ms`, {
        cause: err,
      });
    }
    if (o.signal?.aborted) throw err;
    throw new TockConnectionError(url, `cannot reach ${url}: ${describeCause(err)}`, { cause: err });
  } finally {
    clearTimeout(timer);
    o.signal?.removeEventListener('abort', onAbort);
  }
}

/** The answer's JSON, or the `TockApiError` for an error status or a body that is not JSON. */
function decodeAnswer<T>(method: string, url: string, status: number, text: string): T {
  if (status === 204 || (text === '' && status < 300)) return undefined as T;
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    const snippet = text.slice(0, 200).trim();
    if (status >= 400) throw new TockApiError(status, 'http_error', snippet || `HTTP ${status}`);
    throw new TockApiError(
      status,
      'bad_response',
      `${method} ${url} answered ${status} with a non-JSON body`,
    );
  }
  if (status >= 400) {
    const error = (doc as { error?: { code?: unknown; message?: unknown; run_id?: unknown } } | null)?.error;
    if (error && typeof error.code === 'string' && typeof error.message === 'string') {
      throw new TockApiError(
        status,
        error.code,
        error.message,
        typeof error.run_id === 'string' ? error.run_id : undefined,
      );
    }
    throw new TockApiError(status, 'http_error', `HTTP ${status}: ${text.slice(0, 200)}`);
  }
  return doc as T;
}

/** `fetch failed` says nothing; its cause (ECONNREFUSED, ENOTFOUND, …) says what happened. */
function describeCause(err: unknown): string {
  const cause = (err as { cause?: unknown })?.cause;
  const deepest = cause instanceof Error ? cause : err;
  if (deepest instanceof Error) {
    const code = (deepest as { code?: unknown }).code;
    return typeof code === 'string' && !deepest.message.includes(code)
      ? `${code} ${deepest.message}`
      : deepest.message;
  }
  return String(err);
}
