/**
 * The web console's static files: `GET /` is its page, `GET /console/<file>` its script and style
 * sheet, as `npm run build` bundles them into `dist/console/` (scripts/build-console.mjs). They are
 * public (no `permission`: the page asks for a key itself and keeps it in the tab's
 * sessionStorage); everything the console shows comes from the `/v1` API under the caller's key.
 *
 * The files are read once, when the app is built, and served from memory (gzipped too, for clients
 * that accept it). Every answer carries a strict Content-Security-Policy: scripts, styles and
 * requests from this origin only, no inline script or style, no framing. The page is revalidated
 * on every load (`no-cache`); its assets have a content hash in their names, so they may be cached
 * for a year (`immutable`). With no built console (a checkout before `npm run build`), `GET /`
 * answers 503 saying so.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { RouteOptions, RoutePlugin } from '../types.js';

/** Where `npm run build` writes the console: `dist/console/` of the package, from src/ or dist/. */
export const DEFAULT_CONSOLE_DIR = fileURLToPath(new URL('../../../dist/console/', import.meta.url));

/** No inline script or style, nothing from another origin, no framing, no plugins. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.map': 'application/json; charset=utf-8',
};

/** A file name with a content hash (`app-3F2A9QXK.js`), which esbuild gives the bundles. */
const HASHED = /-[A-Z0-9]{8}\.[a-z]+$/;

interface ConsoleFile {
  body: Buffer;
  gzipped: Buffer;
  type: string;
  cacheControl: string;
}

export interface ConsoleOptions extends RouteOptions {
  /** The built console's directory. Default {@link DEFAULT_CONSOLE_DIR}. */
  dir?: string;
}

/** The console's files by name, read from `dir`; empty when it holds no built console. */
export function readConsole(dir: string): Map<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return files;
  }
  for (const name of names) {
    const full = path.join(dir, name);
    const type = TYPES[path.extname(name)];
    if (type === undefined || !statSync(full).isFile()) continue;
    const body = readFileSync(full);
    files.set(name, {
      body,
      gzipped: gzipSync(body),
      type,
      cacheControl: HASHED.test(name) ? 'public, max-age=31536000, immutable' : 'no-cache',
    });
  }
  return files;
}

function send(request: FastifyRequest, reply: FastifyReply, file: ConsoleFile) {
  const accepts = String(request.headers['accept-encoding'] ?? '');
  const gzip = /\bgzip\b/.test(accepts);
  reply
    .header('content-type', file.type)
    .header('cache-control', file.cacheControl)
    .header('vary', 'accept-encoding')
    .header('content-security-policy', CONSOLE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cross-origin-opener-policy', 'same-origin');
  if (gzip) reply.header('content-encoding', 'gzip');
  return reply.send(gzip ? file.gzipped : file.body);
}

export const consoleRoutes: RoutePlugin<ConsoleOptions> = async (app, o) => {
  const files = readConsole(o.dir ?? DEFAULT_CONSOLE_DIR);

  app.get('/', { schema: { hide: true } }, async (request, reply) => {
    const page = files.get('index.html');
    if (page) return send(request, reply, page);
    return reply
      .code(503)
      .type('text/plain; charset=utf-8')
      .send('The web console is not built: run `npm run build` in the tock checkout.\n');
  });

  app.get(
    '/console/:file',
    { schema: { hide: true, params: Type.Object({ file: Type.String({ maxLength: 200 }) }) } },
    async (request, reply) => {
      const file = request.params.file === 'index.html' ? undefined : files.get(request.params.file);
      if (file) return send(request, reply, file);
      return reply
        .code(404)
        .send({ error: { code: 'not_found', message: `no console file ${request.params.file}` } });
    },
  );
};
