/**
 * The API's one error shape, `{error: {code, message}}`, and where each failure gets it: the status
 * of every error code, the database being unreachable (503 `unavailable` with `Retry-After`, not
 * 500), and the errors Node's HTTP parser meets before Fastify sees a request (an over-long request
 * line or headers, a malformed request, a request that took too long to arrive), which Node or
 * Fastify would otherwise answer in their own shapes.
 */
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { TockError } from '../core/index.js';

export function envelope(code: string, message: string, extra: Record<string, unknown> = {}) {
  return { error: { code, message, ...extra } };
}

/** Status of each error code; an unknown code of a `TockError` answers 400. */
export const STATUS: Record<string, number> = {
  validation_error: 400,
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  request_timeout: 408,
  conflict: 409,
  lease_lost: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_mismatch: 422,
  rate_limited: 429,
  request_header_too_large: 431,
  unavailable: 503,
};

/**
 * `Retry-After` of a 503 while the database is unreachable, seconds: long enough that a fleet of
 * clients does not hammer a restarting database, short enough to notice it is back soon.
 */
export const DATABASE_RETRY_AFTER_S = 5;

/** Node-level errors of a connection that failed or broke (node-postgres passes them through). */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

/**
 * SQLSTATEs of a database that is not there for us: class 08 (connection exception), 57P01–57P03
 * (admin or crash shutdown, cannot connect now) and 53300 (too many connections).
 */
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[123]|53300)$/;

/** node-postgres's own messages for a connection it could not make or lost. */
const UNAVAILABLE_MESSAGE =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable)/;

/** Whether `err` means the database cannot be reached now (so retrying later may succeed). */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 3) return false;
  const e = err as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown };
  if (typeof e.code === 'string' && (NETWORK_CODES.has(e.code) || UNAVAILABLE_SQLSTATE.test(e.code)))
    return true;
  if (typeof e.message === 'string' && UNAVAILABLE_MESSAGE.test(e.message)) return true;
  // Node 20 reports a refused connection to a name with several addresses as an AggregateError.
  if (Array.isArray(e.errors) && e.errors.some((x) => isDatabaseUnavailable(x, depth + 1))) return true;
  return e.cause !== undefined && isDatabaseUnavailable(e.cause, depth + 1);
}

/**
 * Answers an error Node's HTTP parser raised on a connection (no request object exists yet) with
 * the envelope, then closes the connection: Fastify's `clientErrorHandler`.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  // The peer went away, or a response is already on the wire: nothing can be answered.
  const busy = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent;
  if (err.code === 'ECONNRESET' || socket.destroyed || !socket.writable || busy) {
    socket.destroy();
    return;
  }
  let status: number;
  let body: ReturnType<typeof envelope>;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    body = envelope('request_header_too_large', 'the request line and headers are larger than 16 KiB');
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    body = envelope('request_timeout', 'the request did not arrive in time');
  } else {
    status = 400;
    body = envelope('bad_request', 'the request is not valid HTTP/1.1');
  }
  const text = JSON.stringify(body);
  const reason = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' }[
    status
  ];
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
  socket.destroySoon();
}

/** The app's error handler: the envelope and status of every error a route or hook throws. */
export function answerError(err: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) {
  if (err instanceof TockError) {
    const status = STATUS[err.code] ?? 400;
    const extra = typeof err.details.run_id === 'string' ? { run_id: err.details.run_id } : {};
    if (typeof err.details.retry_after_s === 'number')
      reply.header('retry-after', String(err.details.retry_after_s));
    return reply.code(status).send(envelope(err.code, err.message, extra));
  }
  const e = err as { validation?: unknown; statusCode?: number; code?: string; message: string };
  if (e.validation) return reply.code(400).send(envelope('validation_error', e.message));
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return reply.code(413).send(envelope('payload_too_large', 'the request body is larger than 1 MiB'));
  }
  if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return reply
      .code(415)
      .send(envelope('unsupported_media_type', 'send JSON: Content-Type: application/json'));
  }
  if (e.statusCode !== undefined && e.statusCode >= 400 && e.statusCode < 500) {
    return reply.code(e.statusCode).send(envelope('validation_error', e.message));
  }
  if (isDatabaseUnavailable(err)) {
    request.log.warn({ err }, 'the database is unreachable');
    return reply
      .code(503)
      .header('retry-after', String(DATABASE_RETRY_AFTER_S))
      .send(envelope('unavailable', 'the database is unreachable; retry later'));
  }
  request.log.error({ err }, 'request failed');
  return reply.code(500).send(envelope('internal', 'internal error; see the server log'));
}
