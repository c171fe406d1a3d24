/**
 * The API's one error shape, `{error: {code, message}}`, and where each failure gets it: the status
 * of every error code, the database being unreachable (503 `unavailable` with `Retry-After`, not
 * 500), a route that does not exist (404), a path the router cannot take apart, and the errors
 * Node's HTTP parser meets before Fastify sees a request (an over-long request line or headers, a
 * malformed request, a request that took too long to arrive), which Node or Fastify would otherwise
 * answer in their own shapes. Never a stack or SQL in an answer.
 *
 * `answerClientError` and `answerFrameworkError` are options of the Fastify constructor;
 * `addErrorAnswers` sets the error and not-found handlers on the root instance, which every route
 * module inherits.
 */
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ID_PATTERN, TockError } from '../../core/index.js';
import type { App } from '../types.js';

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

/** One schema validator issue, as Fastify hands it over (Ajv's `ErrorObject`, the fields we read). */
export interface ValidationIssue {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
}

const TYPE_NAMES: Record<string, string> = {
  integer: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  object: 'an object',
  array: 'an array',
  null: 'null',
};

/** `/leases/0/run_id` → `leases[0].run_id`: the field as a user wrote it, not a JSON pointer. */
function fieldName(instancePath: string): string {
  let name = '';
  for (const raw of instancePath.split('/').slice(1)) {
    const part = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    name += /^[0-9]+$/.test(part) ? `[${part}]` : name === '' ? part : `.${part}`;
  }
  return name;
}

/** What a field is called where it was sent: a body field, a query or path parameter, a header. */
function noun(context: string | undefined, name: string): string {
  if (context === 'querystring') return `query parameter "${name}"`;
  if (context === 'params') return `path parameter "${name}"`;
  if (context === 'headers') return `header "${name}"`;
  return `field "${name}"`;
}

const plural = (n: unknown, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** What the value at the issue's path must be, in words (no validator paths, no `NOT`). */
function requirement(
  context: string | undefined,
  issue: ValidationIssue,
  all: readonly ValidationIssue[],
): string {
  const p = issue.params;
  switch (issue.keyword) {
    case 'type': {
      // A query parameter arrives as a string, or as an array when it was given more than once.
      if (context === 'querystring' && p.type === 'string') return 'must be given once';
      const types = String(p.type).split(',');
      return `must be ${types.map((t) => TYPE_NAMES[t] ?? t).join(' or ')}`;
    }
    case 'const':
    case 'enum': {
      // A union of literals: every branch failed; name all the allowed values.
      const allowed = all
        .filter(
          (i) => i.instancePath === issue.instancePath && (i.keyword === 'const' || i.keyword === 'enum'),
        )
        .flatMap((i) =>
          i.keyword === 'const' ? [i.params.allowedValue] : (i.params.allowedValues as unknown[]),
        );
      return `must be ${allowed.length === 1 ? '' : 'one of '}${allowed.map((v) => JSON.stringify(v)).join(', ')}`;
    }
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${plural(p.limit, 'character')}`;
    case 'maxLength':
      return `must be at most ${plural(p.limit, 'character')}`;
    case 'minItems':
      return `must have at least ${plural(p.limit, 'item')}`;
    case 'maxItems':
      return `must have at most ${plural(p.limit, 'item')}`;
    case 'minimum':
      return `must be at least ${p.limit}`;
    case 'maximum':
      return `must be at most ${p.limit}`;
    case 'exclusiveMinimum':
      return `must be more than ${p.limit}`;
    case 'exclusiveMaximum':
      return `must be less than ${p.limit}`;
    case 'format':
      return p.format === 'date-time'
        ? 'must be an RFC 3339 date-time with an offset, such as 2026-01-01T09:00:00Z'
        : `must be a valid ${p.format}`;
    case 'pattern':
      if (p.pattern === ID_PATTERN)
        return 'may hold only letters, digits and . _ : - (at most 200 characters, not . or ..)';
      if (p.pattern === '^[0-9]{1,3}$') return 'must be a whole number';
      return `must match ${p.pattern}`;
    default:
      return (issue.message ?? 'is not valid').replace('must NOT', 'must not');
  }
}

/**
 * The message of a request that failed its schema: names the field and says what it must be
 * (`unknown field "max_attempt"`, `field "priority" must be at most 100`…), instead of Ajv's
 * `body/priority must be <= 100` or `body must NOT have additional properties`.
 */
export function validationMessage(context: string | undefined, issues: readonly ValidationIssue[]): string {
  // Of a union (`anyOf`), the branch issues say more than the union's own "must match a schema".
  // A nullable field's `null` branch says nothing useful either: prefer the other branch's issue.
  const useful = issues.filter((i) => i.keyword !== 'anyOf' && i.keyword !== 'oneOf');
  const issue =
    useful.find((i) => !(i.keyword === 'type' && i.params.type === 'null')) ?? useful[0] ?? issues[0];
  if (issue === undefined) return 'the request is not valid';
  const at = fieldName(issue.instancePath);
  if (issue.keyword === 'additionalProperties') {
    const name = String(issue.params.additionalProperty);
    const full = at === '' ? name : `${at}.${name}`;
    return context === 'querystring' ? `unknown query parameter "${name}"` : `unknown ${noun(context, full)}`;
  }
  if (issue.keyword === 'required') {
    const name = String(issue.params.missingProperty);
    return `missing ${noun(context, at === '' ? name : `${at}.${name}`)}`;
  }
  if (at === '') {
    const what = context === 'querystring' ? 'the query' : context === 'params' ? 'the path' : 'the body';
    if (issue.keyword === 'type' && issue.params.type === 'object') return `${what} must be a JSON object`;
    return `${what} ${requirement(context, issue, issues)}`;
  }
  return `${noun(context, at)} ${requirement(context, issue, issues)}`;
}

/** The status and envelope of a `TockError` (with the conflicting `run_id` when it names one). */
export function tockErrorAnswer(err: TockError): { status: number; body: ReturnType<typeof envelope> } {
  const extra = typeof err.details.run_id === 'string' ? { run_id: err.details.run_id } : {};
  return { status: STATUS[err.code] ?? 400, body: envelope(err.code, err.message, extra) };
}

/** The app's error handler: the envelope and status of every error a route or hook throws. */
export function answerError(err: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) {
  if (err instanceof TockError) {
    const { status, body } = tockErrorAnswer(err);
    if (typeof err.details.retry_after_s === 'number')
      reply.header('retry-after', String(err.details.retry_after_s));
    return reply.code(status).send(body);
  }
  const e = err as { validation?: unknown; statusCode?: number; code?: string; message: string };
  if (Array.isArray(e.validation) && e.validation.length > 0) {
    const context = (err as { validationContext?: string }).validationContext;
    return reply.code(400).send(envelope('validation_error', validationMessage(context, e.validation)));
  }
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

/**
 * A path the router cannot take apart (bad percent-encoding, a parameter past the router's length
 * limit) is bad input too: the envelope, not Fastify's own error shape. Fastify's `frameworkErrors`.
 */
export function answerFrameworkError(err: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  reply.code(400).send(envelope('validation_error', `the request path is invalid (${err.code})`));
}

/** Sets the error handler (`answerError`) and the not-found handler (404 `not_found`, naming the route). */
export function addErrorAnswers(app: App): void {
  app.setErrorHandler(answerError);
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(envelope('not_found', `no route ${request.method} ${request.url.split('?')[0]}`)),
  );
}
