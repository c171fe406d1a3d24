/**
 * The worker's executor configuration: a valid file builds working handlers; every invalid one is
 * refused whole, with a `ValidationError` naming the handler and the field.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ValidationError } from '../../src/core/index.js';
import { parseWorkerConfig, readWorkerConfig } from '../../src/worker/config.js';
import type { RunContext } from '../../src/worker/worker.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'tock-config-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const VALID = `
allow:
  - https://api.example.com/
  - "http://127.0.0.1:"
handlers:
  sync-invoices:
    http:
      url: https://api.example.com/invoices/sync
      headers: { Authorization: Bearer abc }
      timeout: 10s
  purge-cache:
    http: { method: DELETE, url: "http://127.0.0.1:9000/cache", timeout: 2500 }
  greet:
    exec:
      argv: [sh, -c, 'echo "hello $1 from $TOCK_JOB_ID"', sh, world]
      env: { GREETING: hi }
      timeout: 1m
      retry_exit_codes: [75, 111]
      permanent_exit_codes: others
  backup:
    exec: { argv: [/usr/local/bin/backup, --full], permanent_exit_codes: [2, 3] }
`;

function ctx(): RunContext {
  return {
    runId: 'run-1',
    tenantId: 'acme',
    jobId: 'greeting',
    scheduledFor: new Date('2026-01-01T00:00:00Z'),
    attempt: 1,
    payload: {},
    signal: new AbortController().signal,
    logger: pino({ level: 'silent' }),
    extendLease: async () => new Date(),
    progress: () => {},
    log: () => {},
  };
}

test('a valid configuration builds one handler per entry', async () => {
  const handlers = parseWorkerConfig(VALID);
  expect(Object.keys(handlers)).toEqual(['sync-invoices', 'purge-cache', 'greet', 'backup']);
  for (const h of Object.values(handlers)) expect(typeof h).toBe('function');
  expect(await handlers.greet!(ctx())).toEqual({ output: 'hello world from greeting\n' });
});

test('readWorkerConfig reads a file and names it in errors', async () => {
  const file = path.join(dir, 'worker.yaml');
  await writeFile(file, VALID);
  expect(Object.keys(await readWorkerConfig(file))).toHaveLength(4);
  await writeFile(file, 'handlers:\n  x:\n    exec: { argv: [] }\n');
  await expect(readWorkerConfig(file)).rejects.toThrow(
    `worker config ${file}: handler "x": exec.argv must be a non-empty list of strings`,
  );
  await expect(readWorkerConfig(path.join(dir, 'missing.yaml'))).rejects.toThrow(
    /^cannot read worker config .*missing\.yaml: ENOENT/,
  );
});

function refusal(text: string): ValidationError {
  try {
    parseWorkerConfig(text);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error(`accepted:\n${text}`);
}

const handler = (name: string, body: string) =>
  `allow: [https://api.example.com/]\nhandlers:\n  ${name}:\n${body
    .trim()
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n')}\n`;

describe('each invalid handler is refused, naming the handler and the field', () => {
  const cases: [what: string, text: string, field: string, message: RegExp][] = [
    ['an unknown executor', handler('h', 'shell: { command: ls }'), 'shell', /is not an executor/],
    [
      'two executors',
      handler('h', 'http: { url: "https://api.example.com/" }\nexec: { argv: [ls] }'),
      'executor',
      /exactly one of http or exec/,
    ],
    ['no executor', handler('h', '{}'), 'executor', /exactly one of http or exec/],
    ['a handler that is not a mapping', handler('h', '"curl https://x"'), 'executor', /as a mapping/],
    [
      'an invalid handler name',
      handler('"bad name"', 'exec: { argv: [ls] }'),
      'name',
      /name must be 1-200 characters/,
    ],
    [
      'an unknown http field',
      handler('h', 'http: { url: "https://api.example.com/", body: "{}" }'),
      'http.body',
      /is not a known field/,
    ],
    ['http without url', handler('h', 'http: { method: GET }'), 'http.url', /is required/],
    [
      'a url outside the allow-list',
      handler('h', 'http: { url: "https://evil.example/hook" }'),
      'http.url',
      /"https:\/\/evil\.example\/hook" is outside this worker's allow-list \(https:\/\/api\.example\.com\/\)/,
    ],
    [
      'a url with credentials',
      handler('h', 'http: { url: "https://u:p@api.example.com/" }'),
      'http.url',
      /credentials/,
    ],
    [
      'a lower-case method',
      handler('h', 'http: { url: "https://api.example.com/", method: post }'),
      'http.method',
      /must be one of GET, POST, PUT, PATCH, DELETE/,
    ],
    [
      'a timeout that is no duration',
      handler('h', 'http: { url: "https://api.example.com/", timeout: soon }'),
      'http.timeout',
      /is not a duration/,
    ],
    [
      'a fractional timeout',
      handler('h', 'http: { url: "https://api.example.com/", timeout: 1.5 }'),
      'http.timeout',
      /whole number/,
    ],
    [
      'a header that is not a string',
      handler('h', 'http: { url: "https://api.example.com/", headers: { X-Retries: 3 } }'),
      'http.headers.X-Retries',
      /must be a string/,
    ],
    [
      'a reserved header',
      handler('h', 'http: { url: "https://api.example.com/", headers: { Tock-Run-Id: x } }'),
      'http.headers.Tock-Run-Id',
      /set by the executor/,
    ],
    ['an empty argv', handler('h', 'exec: { argv: [] }'), 'exec.argv', /non-empty list/],
    ['no argv', handler('h', 'exec: { cwd: /tmp }'), 'exec.argv', /is required/],
    ['argv as a string', handler('h', 'exec: { argv: "ls -l" }'), 'exec.argv', /non-empty list/],
    ['a non-string argument', handler('h', 'exec: { argv: [sleep, 5] }'), 'exec.argv[1]', /must be a string/],
    ['an empty program', handler('h', 'exec: { argv: [""] }'), 'exec.argv[0]', /must name a program/],
    [
      'an unknown exec field',
      handler('h', 'exec: { argv: [ls], shell: true }'),
      'exec.shell',
      /is not a known field/,
    ],
    [
      'an env value that is not a string',
      handler('h', 'exec: { argv: [ls], env: { COUNT: 3 } }'),
      'exec.env.COUNT',
      /must be a string/,
    ],
    [
      'a missing cwd',
      handler('h', 'exec: { argv: [ls], cwd: /no/such/dir }'),
      'exec.cwd',
      /is not a directory/,
    ],
    [
      'a quoted exit code',
      handler('h', 'exec: { argv: [ls], retry_exit_codes: ["75"] }'),
      'exec.retry_exit_codes[0]',
      /must be an integer/,
    ],
    [
      'exit code 0',
      handler('h', 'exec: { argv: [ls], permanent_exit_codes: [0] }'),
      'exec.permanent_exit_codes[0]',
      /from 1 to 255/,
    ],
    [
      'permanent_exit_codes: all',
      handler('h', 'exec: { argv: [ls], permanent_exit_codes: all }'),
      'exec.permanent_exit_codes',
      /list of exit codes or "others"/,
    ],
    [
      'a code both retried and permanent',
      handler('h', 'exec: { argv: [ls], permanent_exit_codes: [75] }'),
      'exec.permanent_exit_codes',
      /retry_exit_codes also lists/,
    ],
    ['a zero timeout', handler('h', 'exec: { argv: [ls], timeout: 0 }'), 'exec.timeout', /positive/],
  ];

  test.each(cases)('%s', (_what, text, field, message) => {
    const err = refusal(text);
    const name = text.match(/^ {2}(.+):$/m)![1]!.replace(/^"|"$/g, '');
    expect(err.details).toEqual({ handler: name, field });
    expect(err.message).toMatch(
      new RegExp(`^worker config: handler "${name}": ${field.replace(/[.[\]]/g, '\\$&')} `),
    );
    expect(err.message).toMatch(message);
  });

  test('the first bad handler refuses the whole file', () => {
    const err = refusal(`${handler('good', 'exec: { argv: [ls] }')}  bad:\n    exec: { argv: [] }\n`);
    expect(err.details).toEqual({ handler: 'bad', field: 'exec.argv' });
  });
});

describe('the file itself', () => {
  test.each([
    ['not YAML', 'handlers: [unclosed', /is not valid YAML/, undefined],
    [
      'a duplicate handler',
      'handlers:\n  a: { exec: { argv: [ls] } }\n  a: { exec: { argv: [pwd] } }\n',
      /is not valid YAML.*unique/s,
      undefined,
    ],
    ['not a mapping', '- a\n- b\n', /the file must be a mapping/, 'the file'],
    ['empty', '', /the file must be a mapping/, 'the file'],
    [
      'an unknown top-level field',
      'allowed: []\nhandlers: { a: { exec: { argv: [ls] } } }\n',
      /allowed is not a known field/,
      'allowed',
    ],
    ['no handlers', 'allow: []\n', /handlers is required/, 'handlers'],
    ['no handler', 'handlers: {}\n', /handlers is empty/, 'handlers'],
    [
      'allow not a list',
      'allow: https://api.example.com/\nhandlers: { a: { exec: { argv: [ls] } } }\n',
      /allow must be a list/,
      'allow',
    ],
    [
      'a bad prefix',
      'allow: [https://api.example.com/, api.example.com]\nhandlers: { a: { exec: { argv: [ls] } } }\n',
      /allow\[1\] "api\.example\.com" is not a URL prefix/,
      'allow[1]',
    ],
  ])('%s', (_what, text, message, field) => {
    const err = refusal(text);
    expect(err.message).toMatch(/^worker config/);
    expect(err.message).toMatch(message);
    expect(err.details.field).toBe(field);
  });

  test('an unquoted prefix ending in a colon gets a hint (YAML reads it as a mapping)', () => {
    const err = refusal('allow:\n  - http://127.0.0.1:\nhandlers: { a: { exec: { argv: [ls] } } }\n');
    expect(err.message).toBe(
      'worker config: allow[0] must be a string (quote a prefix that ends in a colon: "http://127.0.0.1:")',
    );
  });

  test('exec handlers need no allow-list', () => {
    expect(Object.keys(parseWorkerConfig('handlers:\n  list: { exec: { argv: [ls] } }\n'))).toEqual(['list']);
  });
});
