import { describe, expect, test } from 'vitest';
import { TockConnectionError } from '../../src/client/index.js';
import { createLogger } from '../../src/runtime/logger.js';

function recorded(): { lines: Record<string, unknown>[]; logger: ReturnType<typeof createLogger> } {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger('json', 'info', {
    destination: { write: (s: string) => lines.push(JSON.parse(s)) },
  });
  return { lines, logger };
}

describe('the process logger', () => {
  test('a connection error says its cause once, without a stack', () => {
    const { lines, logger } = recorded();
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    const fetchFailed = new TypeError('fetch failed', { cause: refused });
    const err = new TockConnectionError(
      'http://127.0.0.1:9/v1/leases',
      'cannot reach http://127.0.0.1:9/v1/leases: connect ECONNREFUSED 127.0.0.1:9',
      { cause: fetchFailed },
    );
    logger.error({ err }, 'claim failed; retrying with backoff');
    const logged = lines[0]!.err as Record<string, unknown>;
    expect(logged.message).toBe(
      'cannot reach http://127.0.0.1:9/v1/leases: connect ECONNREFUSED 127.0.0.1:9',
    );
    expect(logged.stack).toBeUndefined();
  });

  test('other errors keep their stack and add each cause not already said', () => {
    const { lines, logger } = recorded();
    const inner = new Error('disk full');
    logger.warn({ err: new Error('could not write: disk full', { cause: inner }) }, 'a');
    logger.warn({ err: new Error('could not write', { cause: inner }) }, 'b');
    expect((lines[0]!.err as { message: string }).message).toBe('could not write: disk full');
    expect((lines[1]!.err as { message: string }).message).toBe('could not write: disk full');
    expect((lines[1]!.err as { stack: string }).stack).toContain('disk full');
  });

  test("Fastify's own `Server listening at` line is dropped; Tock announces its URL itself", () => {
    const { lines, logger } = recorded();
    logger.info('Server listening at http://127.0.0.1:8080');
    logger.info('something else');
    expect(lines.map((l) => l.msg)).toEqual(['something else']);
  });
});
