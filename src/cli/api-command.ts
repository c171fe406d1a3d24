/**
 * What every command that speaks the HTTP API shares: the client its `--url`, `--key` and
 * `--timeout` make, `--json` output, one readable line for an API error, and paging.
 */
import type { Command } from 'commander';
import { TockApiError, TockClient } from '../client/index.js';
import type { apiClient } from './options/groups.js';
import type { OptionsOf } from './options/spec.js';

/** The options every API command has (`apiClient` in options/groups.ts). */
export type ApiOptions = OptionsOf<typeof apiClient>;

export function clientOf(o: ApiOptions): TockClient {
  return new TockClient({ url: o.url, key: o.key, timeoutMs: o.timeout });
}

export function write(text: string): void {
  process.stdout.write(text);
}

export function printJson(doc: unknown): void {
  write(`${JSON.stringify(doc, null, 2)}\n`);
}

/** `404 not_found: job "x" does not exist`, with a hint when a key is missing. */
export function apiMessage(err: TockApiError, keyGiven: boolean): string {
  const hint = err.status === 401 && !keyGiven ? ' (no key given: pass --key or set TOCK_KEY)' : '';
  return `${err.status} ${err.code}: ${err.message}${hint}`;
}

/**
 * Wraps a command's action: API errors become one readable message (bin/tock.js prints it as
 * `tock: <message>` and exits 1).
 */
export function apiAction<A extends unknown[]>(
  fn: (...args: A) => Promise<void>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      if (err instanceof TockApiError) {
        const cmd = args[args.length - 1] as Command;
        throw new Error(apiMessage(err, Boolean(cmd.opts().key)));
      }
      throw err;
    }
  };
}

/** Fetches one page, or with `all` every page from `cursor` on, following `next_cursor`. */
export async function pages<T>(
  all: boolean,
  cursor: string | undefined,
  fetchPage: (cursor: string | undefined) => Promise<{ items: T[]; next_cursor: string | null }>,
): Promise<{ items: T[]; next_cursor: string | null }> {
  const items: T[] = [];
  let next = cursor;
  for (;;) {
    const page = await fetchPage(next);
    items.push(...page.items);
    if (!all || page.next_cursor === null) return { items, next_cursor: page.next_cursor };
    next = page.next_cursor;
  }
}

/** On stderr, how to get the next page, when there is one. */
export function moreHint(command: string, nextCursor: string | null): void {
  if (nextCursor !== null) process.stderr.write(`more: ${command} --cursor ${nextCursor} (or --all)\n`);
}
