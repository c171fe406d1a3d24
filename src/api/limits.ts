/**
 * The limits that keep one client from holding the server's sockets, time or database: how long a
 * request may take to arrive, how long an idle connection stays open, how many connections and how
 * many waiting long-polls there may be. Each is a named default an operator may change
 * (`tock server --request-timeout …`). The long-poll caps, like the quota, are per server process.
 *
 * The timeouts bound receiving a request, never answering it: a long-poll (`wait_ms` up to
 * {@link MAX_LONG_POLL_MS}) has its whole request in hand when it starts waiting, and the idle
 * timeout is above the longest wait.
 */
import type { Server, Socket } from 'node:net';

/** The longest `wait_ms` of `POST /v1/leases` (the request schema's maximum), ms. */
export const MAX_LONG_POLL_MS = 30_000;

export interface HttpLimits {
  /** Time for the whole request (line, headers and body) to arrive, ms. Default 30000. */
  requestTimeoutMs: number;
  /** Time for the request line and headers to arrive, ms; at most `requestTimeoutMs`. Default 10000. */
  headersTimeoutMs: number;
  /** An idle keep-alive connection (between requests) is closed after this, ms. Default 5000. */
  keepAliveTimeoutMs: number;
  /**
   * A connection with no bytes either way for this long is closed, ms; above
   * {@link MAX_LONG_POLL_MS} so that a waiting long-poll is never cut. Default 60000.
   */
  idleTimeoutMs: number;
  /** Open connections at once; the server closes new ones beyond it at once. Default 1000. */
  maxConnections: number;
  /**
   * Open connections at once from one client address; the server closes new ones beyond it at once,
   * so one client cannot take every connection. 0: no cap (a server behind a proxy, where every
   * connection comes from the proxy's address: let the proxy cap clients). Default 500.
   */
  maxConnectionsPerAddress: number;
  /** Requests one keep-alive connection may carry before the server closes it. Default 1000. */
  maxRequestsPerSocket: number;
  /** Waiting long-polls (`POST /v1/leases` with `wait_ms`) per API key; more answer 429. Default 20. */
  longPollsPerKey: number;
  /** Waiting long-polls per tenant, over all its keys; more answer 429. Default 100. */
  longPollsPerTenant: number;
}

export const DEFAULT_HTTP_LIMITS: Readonly<HttpLimits> = {
  requestTimeoutMs: 30_000,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 60_000,
  maxConnections: 1000,
  maxConnectionsPerAddress: 500,
  maxRequestsPerSocket: 1000,
  longPollsPerKey: 20,
  longPollsPerTenant: 100,
};

/**
 * How often Node checks connections against the request and headers timeouts, ms (Node's default
 * is 30 s, which would let a slow request live up to 30 s past its timeout).
 */
export const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/**
 * Closes a new connection at once when its address already has `max` open (0: no cap). Counted
 * per process, like the other limits.
 */
export function capConnectionsPerAddress(server: Server, max: number): void {
  if (max <= 0) return;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const n = (open.get(address) ?? 0) + 1;
    if (n > max) {
      socket.destroy();
      return;
    }
    open.set(address, n);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

/** The defaults with `given` on top (unset fields keep them); the headers timeout is held to the request timeout. */
export function httpLimits(given: Partial<HttpLimits> = {}): HttpLimits {
  const set = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
  const l = { ...DEFAULT_HTTP_LIMITS, ...set };
  return { ...l, headersTimeoutMs: Math.min(l.headersTimeoutMs, l.requestTimeoutMs) };
}

/** The Fastify (and Node `http.Server`) options that enforce `l`; the connection cap is set on the server. */
export function serverOptions(l: HttpLimits) {
  return {
    requestTimeout: l.requestTimeoutMs,
    keepAliveTimeout: l.keepAliveTimeoutMs,
    connectionTimeout: l.idleTimeoutMs,
    maxRequestsPerSocket: l.maxRequestsPerSocket,
    http: { headersTimeout: l.headersTimeoutMs, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS },
  };
}
