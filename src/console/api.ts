/**
 * The console's only way to the server: `fetch` of the public HTTP API (`/v1`, same origin) under
 * the signed-in key. The key lives in the tab's sessionStorage only (gone when the tab closes, not
 * shared with other tabs, never in localStorage, a URL or a log line) and goes in the
 * `Authorization` header. An error answer becomes an {@link ApiError} with the API's `error.code`,
 * its message, and for 429 the seconds `Retry-After` asks for.
 */

const KEY_ITEM = 'tock.key';
/** Dispatched on `window` when the API refuses the stored key (401). */
export const UNAUTHORIZED_EVENT = 'tock:unauthorized';

/** The signed-in key of this tab, or null. */
export function storedKey(): string | null {
  try {
    return sessionStorage.getItem(KEY_ITEM);
  } catch {
    return null;
  }
}

export function storeKey(key: string | null): void {
  if (key === null) sessionStorage.removeItem(KEY_ITEM);
  else sessionStorage.setItem(KEY_ITEM, key);
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** For 429: the seconds the server asks to wait (`Retry-After`); else null. */
    readonly retryAfterS: number | null = null,
  ) {
    super(message);
  }
}

interface Call {
  method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** A JSON body; none: no body and no content type (the API's bare POSTs). */
  body?: unknown;
  /** The key to use instead of the stored one (signing in); null: none. */
  key?: string | null;
  /** An `Idempotency-Key` (a trigger: a double click creates one run, not two). */
  idempotencyKey?: string;
}

/** Calls `path` (`/v1/...`) and answers its JSON (null for an empty answer), or throws {@link ApiError}. */
export async function api<T>(path: string, call: Call = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const key = call.key === undefined ? storedKey() : call.key;
  if (key) headers.authorization = `Bearer ${key}`;
  if (call.body !== undefined) headers['content-type'] = 'application/json';
  if (call.idempotencyKey) headers['idempotency-key'] = call.idempotencyKey;
  let response: Response;
  try {
    response = await fetch(path, {
      method: call.method ?? 'GET',
      headers,
      body: call.body === undefined ? undefined : JSON.stringify(call.body),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'unreachable', 'the server did not answer (is it running?)');
  }
  const text = await response.text();
  // biome-ignore lint/suspicious/noExplicitAny: a JSON answer, typed by the caller (T) or read as an error envelope
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!response.ok) {
    // A key that stopped working (revoked) signs the tab out: the app listens for this event.
    if (response.status === 401 && key) window.dispatchEvent(new Event(UNAUTHORIZED_EVENT));
    const retry = Number(response.headers.get('retry-after'));
    throw new ApiError(
      response.status,
      json?.error?.code ?? `http_${response.status}`,
      json?.error?.message ?? (text.slice(0, 200) || response.statusText),
      Number.isFinite(retry) && retry > 0 ? retry : null,
    );
  }
  return json as T;
}

/** `/v1/...?a=1&b=2`, leaving out undefined and null values. */
export function withQuery(path: string, query: Record<string, string | number | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) q.set(k, String(v));
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

/** A path segment: ids may hold `:` and `.`, never `/`, but encode anyway. */
export const seg = (id: string) => encodeURIComponent(id);
