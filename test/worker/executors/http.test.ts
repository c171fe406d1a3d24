/**
 * The HTTP executor against a real `node:http` server on loopback: what it sends, how each answer
 * maps onto success, retry or dead letter, timeouts, refused connections, cancellation, and the
 * allow-list checked at configuration time.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { PermanentError, RetryLaterError, ValidationError } from '../../../src/core/index.js';
import { httpExecutor, parseRetryAfter } from '../../../src/worker/executors/http.js';
import { OUTPUT_TAIL_BYTES } from '../../../src/worker/executors/output.js';
import type { RunContext } from '../../../src/worker/worker.js';

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

let server: Server;
let base: string;
let received: Received[] = [];
/** What the server does with the current test's requests. */
let respond: (req: IncomingMessage, res: ServerResponse, body: string) => void;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => {
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      server.emit('received', req);
      respond(req, res, body);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  server.close();
});

beforeEach(() => {
  received = [];
  respond = (_req, res) => res.end('ok');
});

const ALLOW = ['http://127.0.0.1:'];
const SLOT = new Date('2026-03-08T07:00:00.000Z');

function ctx(overrides: Partial<RunContext> = {}): RunContext {
  return {
    runId: 'run-42',
    tenantId: 'acme',
    jobId: 'sync-invoices',
    scheduledFor: SLOT,
    attempt: 2,
    payload: { region: 'eu', ids: [1, 2, 3], note: 'ünïcødé' },
    signal: new AbortController().signal,
    logger: pino({ level: 'silent' }),
    extendLease: async () => new Date(SLOT.getTime() + 30_000),
    progress: () => {},
    log: () => {},
    ...overrides,
  };
}

function reply(status: number, body = '', headers: Record<string, string> = {}) {
  return (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(status, headers);
    res.end(body);
  };
}

async function failure(promise: unknown): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the handler to fail');
}

describe('httpExecutor', () => {
  test('2xx succeeds with the response body as output', async () => {
    respond = reply(200, 'synced 3 invoices');
    const handler = httpExecutor({ url: `${base}/sync` }, { allow: ALLOW });
    expect(await handler(ctx())).toEqual({ output: 'synced 3 invoices' });
    respond = reply(204);
    expect(await handler(ctx())).toEqual({ output: '' });
  });

  test('sends the identity headers and the payload as the JSON body, exactly', async () => {
    const handler = httpExecutor(
      { method: 'PUT', url: `${base}/sync?x=1`, headers: { Authorization: 'Bearer s3cret' } },
      { allow: ALLOW },
    );
    await handler(ctx());
    expect(received).toHaveLength(1);
    const [r] = received;
    expect(r!.method).toBe('PUT');
    expect(r!.url).toBe('/sync?x=1');
    expect(r!.headers['tock-run-id']).toBe('run-42');
    expect(r!.headers['tock-job-id']).toBe('sync-invoices');
    expect(r!.headers['tock-scheduled-for']).toBe('2026-03-08T07:00:00.000Z');
    expect(r!.headers['tock-attempt']).toBe('2');
    expect(r!.headers['idempotency-key']).toBe('sync-invoices/2026-03-08T07:00:00.000Z');
    expect(r!.headers['content-type']).toBe('application/json');
    expect(r!.headers.authorization).toBe('Bearer s3cret');
    expect(r!.body).toBe('{"region":"eu","ids":[1,2,3],"note":"ünïcødé"}');
  });

  test('POST is the default; GET and DELETE send no body', async () => {
    await httpExecutor({ url: `${base}/a` }, { allow: ALLOW })(ctx());
    await httpExecutor({ method: 'GET', url: `${base}/b` }, { allow: ALLOW })(ctx());
    await httpExecutor({ method: 'DELETE', url: `${base}/c` }, { allow: ALLOW })(ctx());
    expect(received.map((r) => [r.method, r.body])).toEqual([
      ['POST', JSON.stringify(ctx().payload)],
      ['GET', ''],
      ['DELETE', ''],
    ]);
    expect(received[1]!.headers['content-length']).toBeUndefined();
    expect(received[1]!.headers['idempotency-key']).toBe('sync-invoices/2026-03-08T07:00:00.000Z');
  });

  test.each([500, 503, 408])(
    '%i is retryable, and the error names the status and the body',
    async (status) => {
      respond = reply(status, `upstream says no (${status})`);
      const err = await failure(httpExecutor({ url: `${base}/x` }, { allow: ALLOW })(ctx()));
      expect(err).not.toBeInstanceOf(PermanentError);
      expect(err).not.toBeInstanceOf(RetryLaterError);
      expect(err.message.split('\n')[0]).toBe(`POST ${base}/x answered ${status} ${statusText(status)}`);
      expect(err.message).toContain(`upstream says no (${status})`);
      expect((err as { output?: string }).output).toBe(`upstream says no (${status})`);
    },
  );

  test('429 with Retry-After: 7 retries no sooner than 7 s', async () => {
    respond = reply(429, 'slow down', { 'Retry-After': '7' });
    const err = await failure(httpExecutor({ url: `${base}/x` }, { allow: ALLOW })(ctx()));
    expect(err).toBeInstanceOf(RetryLaterError);
    expect((err as RetryLaterError).retryAfterMs).toBe(7000);
    expect(err.message).toContain('429');
    expect(err.message).toContain('slow down');
  });

  test('503 with Retry-After as an HTTP date retries at that time', async () => {
    const now = Date.UTC(2026, 0, 1, 12, 0, 0);
    respond = reply(503, '', { 'Retry-After': new Date(now + 90_000).toUTCString() });
    const err = await failure(httpExecutor({ url: `${base}/x` }, { allow: ALLOW, now: () => now })(ctx()));
    expect(err).toBeInstanceOf(RetryLaterError);
    expect((err as RetryLaterError).retryAfterMs).toBe(90_000);
  });

  test.each([404, 400, 401, 422])('%i is permanent', async (status) => {
    respond = reply(status, '{"error":"no such invoice"}');
    const err = await failure(httpExecutor({ url: `${base}/x` }, { allow: ALLOW })(ctx()));
    expect(err).toBeInstanceOf(PermanentError);
    expect(err.message).toContain(`answered ${status}`);
    expect(err.message).toContain('{"error":"no such invoice"}');
    expect((err as PermanentError).details).toEqual({ status });
  });

  test('a redirect is not followed (it could leave the allow-list) and is permanent', async () => {
    respond = reply(302, '', { Location: 'https://elsewhere.example/' });
    const err = await failure(httpExecutor({ url: `${base}/x` }, { allow: ALLOW })(ctx()));
    expect(err).toBeInstanceOf(PermanentError);
    expect(err.message).toContain('redirects are not followed (Location: https://elsewhere.example/)');
    expect(received).toHaveLength(1);
  });

  test('a hung server times out after the configured timeout, retryably', async () => {
    respond = () => {}; // never answers
    const started = performance.now();
    const err = await failure(httpExecutor({ url: `${base}/hang`, timeout: 200 }, { allow: ALLOW })(ctx()));
    const elapsed = performance.now() - started;
    expect(err).not.toBeInstanceOf(PermanentError);
    expect(err.message).toBe(`POST ${base}/hang timed out after 200 ms`);
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(5000);
  });

  test('the timeout covers a body that never ends', async () => {
    respond = (_req, res) => {
      res.writeHead(200);
      res.write('partial answer');
    };
    const err = await failure(httpExecutor({ url: `${base}/slow`, timeout: 200 }, { allow: ALLOW })(ctx()));
    expect(err).not.toBeInstanceOf(PermanentError);
    expect(err.message).toContain('timed out after 200 ms');
    expect(err.message).toContain('partial answer');
  });

  test('a refused connection is retryable', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const { port } = closed.address() as AddressInfo;
    closed.close();
    await once(closed, 'close');
    const err = await failure(httpExecutor({ url: `http://127.0.0.1:${port}/x` }, { allow: ALLOW })(ctx()));
    expect(err).not.toBeInstanceOf(PermanentError);
    expect(err.message).toMatch(new RegExp(`^POST http://127\\.0\\.0\\.1:${port}/x failed: .*ECONNREFUSED`));
  });

  test('aborting the run signal cancels the request', async () => {
    respond = () => {};
    const controller = new AbortController();
    const arrived = once(server, 'received') as Promise<[IncomingMessage]>;
    const pending = failure(
      httpExecutor({ url: `${base}/hang` }, { allow: ALLOW })(ctx({ signal: controller.signal })),
    );
    const [req] = await arrived;
    const closed = once(req.socket, 'close');
    controller.abort(new Error('lease lost on run run-42'));
    const err = await pending;
    expect(err.message).toBe('lease lost on run run-42');
    await closed; // the server sees the connection go
  });

  test('an already aborted signal sends nothing', async () => {
    const controller = new AbortController();
    controller.abort(new Error('worker shutdown'));
    const err = await failure(
      httpExecutor({ url: `${base}/x` }, { allow: ALLOW })(ctx({ signal: controller.signal })),
    );
    expect(err.message).toBe('worker shutdown');
    expect(received).toHaveLength(0);
  });

  test('keeps only the last 64 KiB of a large body', async () => {
    const big = `${'a'.repeat(100_000)}${'z'.repeat(OUTPUT_TAIL_BYTES)}`;
    respond = reply(200, big);
    const result = (await httpExecutor({ url: `${base}/big` }, { allow: ALLOW })(ctx())) as {
      output: string;
    };
    expect(result.output).toBe('z'.repeat(OUTPUT_TAIL_BYTES));
    respond = reply(500, big);
    const err = await failure(httpExecutor({ url: `${base}/big` }, { allow: ALLOW })(ctx()));
    expect(Buffer.byteLength(err.message)).toBeLessThanOrEqual(OUTPUT_TAIL_BYTES);
    expect(err.message.split('\n')[0]).toBe(`POST ${base}/big answered 500 Internal Server Error`);
    expect(err.message.endsWith('zzzz')).toBe(true);
  });
});

describe('httpExecutor configuration', () => {
  const refused = (url: string, allow: string[]) => {
    try {
      httpExecutor({ url }, { allow });
    } catch (err) {
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).details.field).toBe('url');
      return (err as Error).message;
    }
    throw new Error(`${url} was accepted`);
  };

  test('a URL outside the allow-list is refused when the configuration is loaded', () => {
    expect(refused('https://evil.example/hook', ALLOW)).toMatch(/outside this worker's allow-list/);
    expect(refused('https://api.example.com/x', [])).toMatch(/allow-list \(empty\)/);
    // A prefix that ends inside a host matches that host only.
    refused('https://api.example.com.evil.net/', ['https://api.example.com']);
    refused('https://api.example.com:8443/', ['https://api.example.com']);
    expect(() =>
      httpExecutor({ url: 'https://api.example.com' }, { allow: ['https://api.example.com'] }),
    ).not.toThrow();
    expect(() =>
      httpExecutor({ url: 'https://API.example.com/v1' }, { allow: ['https://api.example.com/'] }),
    ).not.toThrow();
    // Credentials in the URL would pass http://127.0.0.1:80@evil.net/ for loopback.
    expect(refused('http://127.0.0.1:80@evil.net/', ALLOW)).toMatch(/credentials/);
    // The URL is compared once normalised: dot segments cannot climb out of an allowed path.
    refused('https://api.example.com/hooks/../admin', ['https://api.example.com/hooks/']);
    refused('https://api.example.com/hooks/%2e%2e/admin', ['https://api.example.com/hooks/']);
    expect(refused('ftp://127.0.0.1:21/', ALLOW)).toMatch(/not an http or https URL/);
    expect(refused('not a url', ALLOW)).toMatch(/is not a URL/);
  });

  test('other bad settings are refused with their field', () => {
    const field = (make: () => unknown) => {
      try {
        make();
      } catch (err) {
        expect(err).toBeInstanceOf(ValidationError);
        return (err as ValidationError).details.field;
      }
      return null;
    };
    const url = `${base}/x`;
    expect(field(() => httpExecutor({ url, timeout: 0 }, { allow: ALLOW }))).toBe('timeout');
    expect(field(() => httpExecutor({ url, method: 'HEAD' as 'GET' }, { allow: ALLOW }))).toBe('method');
    expect(field(() => httpExecutor({ url, headers: { 'Idempotency-Key': 'x' } }, { allow: ALLOW }))).toBe(
      'headers.Idempotency-Key',
    );
    expect(field(() => httpExecutor({ url, headers: { 'bad header': 'x' } }, { allow: ALLOW }))).toBe(
      'headers',
    );
    expect(field(() => httpExecutor({ url }, { allow: ['api.example.com'] }))).toBe('allow[0]');
  });
});

test('parseRetryAfter reads seconds and HTTP dates', () => {
  const now = Date.UTC(2026, 0, 1);
  expect(parseRetryAfter(null, now)).toBeNull();
  expect(parseRetryAfter('0', now)).toBe(0);
  expect(parseRetryAfter(' 120 ', now)).toBe(120_000);
  expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
  expect(parseRetryAfter('Wed, 31 Dec 2025 00:00:00 GMT', now)).toBe(0);
  expect(parseRetryAfter('soon', now)).toBeNull();
  expect(parseRetryAfter('-5', now)).toBeNull();
});

function statusText(status: number): string {
  return { 500: 'Internal Server Error', 503: 'Service Unavailable', 408: 'Request Timeout' }[status] ?? '';
}
