/**
 * URL allow-lists: the prefixes a process may send requests to (the HTTP executor's targets, the
 * webhooks of notifications), so that no definition a tenant writes can point Tock at an arbitrary
 * host. Pure: parses and compares strings, opens nothing.
 */
import { ValidationError } from './errors.js';

function invalid(field: string, reason: string): ValidationError {
  return new ValidationError(`${field} ${reason}`, { field });
}

/**
 * Checks the allow-list's prefixes and returns them normalised (scheme and host lower-cased, as
 * the URL parser writes them). A prefix must name at least a scheme and a host.
 */
export function validateAllowList(allow: unknown, field = 'allow'): string[] {
  if (!Array.isArray(allow)) throw invalid(field, 'must be a list of URL prefixes');
  return allow.map((prefix, i) => {
    const at = `${field}[${i}]`;
    if (typeof prefix !== 'string') {
      // YAML reads an unquoted `- http://127.0.0.1:` as a mapping: say how to write it.
      const hint =
        typeof prefix === 'object' && prefix !== null
          ? ' (quote a prefix that ends in a colon: "http://127.0.0.1:")'
          : '';
      throw invalid(at, `must be a string${hint}`);
    }
    const m = /^(https?):\/\/([^/?#@\s]+)(.*)$/i.exec(prefix);
    if (!m || /\s/.test(m[3]!)) {
      throw invalid(
        at,
        `"${prefix}" is not a URL prefix such as https://api.example.com/ or http://127.0.0.1:`,
      );
    }
    return `${m[1]!.toLowerCase()}://${m[2]!.toLowerCase()}${m[3]}`;
  });
}

function matchesPrefix(href: string, prefix: string): boolean {
  if (!href.startsWith(prefix)) return false;
  // A prefix with a path, or one ending in the port's colon, is a plain prefix; one ending inside
  // the host must end where the host (and port) end.
  if (prefix.indexOf('/', prefix.indexOf('//') + 2) !== -1 || prefix.endsWith(':')) return true;
  const next = href[prefix.length];
  return next === undefined || next === '/' || next === '?' || next === '#';
}

/**
 * Parses `url` and checks it against the allow-list (already validated). Credentials in the URL
 * are refused: they would let `http://127.0.0.1:80@evil.net/` pass for a loopback address.
 */
export function checkAllowedUrl(
  url: unknown,
  allow: readonly string[],
  field = 'url',
  whose = "this worker's",
): URL {
  if (typeof url !== 'string' || url === '') throw invalid(field, 'must be a URL');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid(field, `"${url}" is not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw invalid(field, `"${url}" is not an http or https URL`);
  if (parsed.username !== '' || parsed.password !== '')
    throw invalid(field, `"${url}" carries credentials; send them in a header instead`);
  if (!allow.some((prefix) => matchesPrefix(parsed.href, prefix))) {
    throw invalid(
      field,
      `"${url}" is outside ${whose} allow-list (${allow.length === 0 ? 'empty' : allow.join(', ')})`,
    );
  }
  return parsed;
}
