/**
 * The HTTP reference (`docs/http-api.md`), written from the OpenAPI document the API serves at
 * `/openapi.json`, which Fastify builds from the same TypeBox schemas that validate requests. So
 * the page cannot list a field the API refuses or miss one it takes. `openApiDocument` builds the
 * app without a database (nothing is called on the store until a request arrives); the rendering
 * is deterministic (paths sorted, methods in a fixed order, no dates). `npm run docs` writes the
 * page; `test/docs/reference.test.ts` fails when the committed page differs.
 */
import pino from 'pino';
import { ID_PATTERN, SystemClock } from '../core/index.js';
import type { Store } from '../store/index.js';
import { buildApp } from './app.js';
import { Metrics } from './metrics.js';

/** An OpenAPI 3 document, walked as plain JSON. */
// biome-ignore lint/suspicious/noExplicitAny: the document is JSON of a known but large shape, read field by field
type Json = any;

const GENERATED = '<!-- Generated from the OpenAPI document (src/api) by `npm run docs`. Do not edit. -->';
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** The OpenAPI document of the API, as `GET /openapi.json` serves it. */
export async function openApiDocument(): Promise<Json> {
  // No request is made, so no store method is called: any call would be a bug here.
  const store = new Proxy({} as Store, {
    get: (_target, name) => {
      throw new Error(`openApiDocument: the store was used (${String(name)})`);
    },
  });
  const app = await buildApp({
    store,
    clock: new SystemClock(),
    logger: pino({ level: 'silent' }),
    metrics: new Metrics({ processMetrics: false }),
    auth: 'keys',
    readiness: async () => ({ database: false, migrations: false }),
  });
  try {
    await app.ready();
    return structuredClone(app.swagger());
  } finally {
    await app.close();
  }
}

function cell(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').replaceAll('|', '\\|');
}

function table(header: string[], rows: string[][]): string[] {
  return [
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ];
}

/** A schema's type in a few words: `string`, `integer`, `array of object`, `"skip" or "fire_once"`. */
function typeOf(s: Json): string {
  if (s === undefined) return '';
  if (s.anyOf ?? s.oneOf) return (s.anyOf ?? s.oneOf).map(typeOf).join(' or ');
  if (s.const !== undefined) return `\`${JSON.stringify(s.const)}\``;
  if (s.enum) return s.enum.map((v: unknown) => `\`${JSON.stringify(v)}\``).join(', ');
  const base = s.type === 'array' ? `array of ${typeOf(s.items)}` : (s.type ?? 'any JSON');
  return s.nullable ? `${base} or null` : base;
}

const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

/** A pattern in words where it is a common one (an id, a uuid), else as it is. */
function patternOf(pattern: string): string {
  if (pattern === ID_PATTERN) return 'an id: `A-Z a-z 0-9 . _ : -`, not `.` or `..`';
  if (pattern === UUID_PATTERN) return 'a uuid';
  return `\`${pattern}\``;
}

/** Bounds and formats, in the words of the schema: `1-200 chars`, `0-100`, `date-time`. */
function constraints(s: Json): string {
  if (s === undefined) return '';
  const parts: string[] = [];
  const range = (min: unknown, max: unknown, unit: string) => {
    if (min !== undefined && max !== undefined) parts.push(`${min}–${max}${unit}`);
    else if (min !== undefined) parts.push(`≥ ${min}${unit}`);
    else if (max !== undefined) parts.push(`≤ ${max}${unit}`);
  };
  range(s.minimum, s.maximum, '');
  range(s.minLength, s.maxLength, ' chars');
  range(s.minItems, s.maxItems, ' items');
  if (s.format) parts.push(s.format);
  if (s.pattern) parts.push(patternOf(s.pattern));
  for (const alt of s.anyOf ?? s.oneOf ?? []) {
    const c = constraints(alt);
    if (c !== '') parts.push(c);
  }
  return parts.join(', ');
}

function descriptionOf(s: Json): string {
  if (s === undefined) return '';
  return s.description ?? (s.anyOf ?? s.oneOf ?? []).map(descriptionOf).find((d: string) => d !== '') ?? '';
}

/** The fields of an object schema, nested objects and arrays of objects flattened as `a.b`, `a[].b`. */
function fields(schema: Json, prefix = ''): string[][] {
  const out: string[][] = [];
  const required = new Set<string>(schema?.required ?? []);
  for (const [name, s] of Object.entries<Json>(schema?.properties ?? {})) {
    const path = `${prefix}${name}`;
    out.push([`\`${path}\``, typeOf(s), required.has(name) ? 'yes' : '', constraints(s), descriptionOf(s)]);
    if (s.type === 'object' && s.properties) out.push(...fields(s, `${path}.`));
    if (s.type === 'array' && s.items?.type === 'object') out.push(...fields(s.items, `${path}[].`));
  }
  return out;
}

function fieldTable(schema: Json): string[] {
  const rows = fields(schema);
  if (rows.length === 0) return [`Type: ${typeOf(schema)}.`, ''];
  return [...table(['field', 'type', 'required', 'bounds', 'meaning'], rows), ''];
}

function operation(method: string, path: string, op: Json): string[] {
  const out = [`### ${method.toUpperCase()} ${path}`, '', op.summary ?? '', ''];
  if (op.description) out.push(op.description, '');
  const params: Json[] = op.parameters ?? [];
  if (params.length > 0) {
    out.push(
      ...table(
        ['parameter', 'in', 'type', 'required', 'bounds', 'meaning'],
        params.map((p) => [
          `\`${p.name}\``,
          p.in,
          typeOf(p.schema),
          p.required ? 'yes' : '',
          constraints(p.schema),
          p.description ?? descriptionOf(p.schema),
        ]),
      ),
      '',
    );
  }
  const body = op.requestBody?.content?.['application/json']?.schema;
  if (body) out.push('Request body (JSON; unknown fields are refused):', '', ...fieldTable(body));
  for (const [status, response] of Object.entries<Json>(op.responses ?? {})) {
    if (status === '4XX' || status === '5XX') continue;
    const schema = response.content?.['application/json']?.schema;
    out.push(`Answer \`${status}\`${schema ? ':' : ', no body.'}`, '');
    if (schema) out.push(...fieldTable(schema));
  }
  return out;
}

/** `docs/http-api.md`: every operation of the document with its parameters, body and answers. */
export function httpReference(doc: Json): string {
  const paths = Object.keys(doc.paths ?? {}).sort();
  const operations = paths.flatMap((path) =>
    METHODS.filter((m) => doc.paths[path][m]).map((m) => ({ method: m, path, op: doc.paths[path][m] })),
  );
  const anchor = (method: string, path: string) =>
    `${method} ${path}`
      .toLowerCase()
      .replace(/[^a-z0-9 _-]/g, '')
      .replaceAll(' ', '-');
  const error =
    doc.paths[paths[0] ?? '']?.[METHODS.find((m) => doc.paths[paths[0] ?? '']?.[m]) ?? '']?.responses?.['4XX']
      ?.content?.['application/json']?.schema;
  const out = [
    GENERATED,
    '',
    `# HTTP API (${doc.info?.title ?? ''} ${doc.info?.version ?? ''})`,
    '',
    'JSON over HTTP, snake_case, under `/v1`. A running server serves this document as OpenAPI 3 at',
    '`/openapi.json`. Every `/v1` request needs `Authorization: Bearer <key>` (`tock dev` and',
    '`tock server --insecure` take none); roles, errors, limits and the operational endpoints are in',
    '[operations.md](operations.md#http-api).',
    '',
    'To write a worker in any language (the four calls, the lease rules, what to do on 409), see',
    '[workers-any-language.md](workers-any-language.md).',
    '',
    ...table(
      ['method, path', 'what it does'],
      operations.map(({ method, path, op }) => [
        `[\`${method.toUpperCase()} ${path}\`](#${anchor(method, path)})`,
        op.summary ?? '',
      ]),
    ),
    '',
    '## Errors',
    '',
    'Every error answer (4xx, 5xx) has this body:',
    '',
    ...fieldTable(error),
    '## Operations',
    '',
    ...operations.flatMap(({ method, path, op }) => operation(method, path, op)),
  ];
  return `${out.join('\n').trimEnd()}\n`;
}
