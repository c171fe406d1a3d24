/**
 * What PostgreSQL refuses to store, found before it is sent. A `text` column refuses U+0000
 * (SQLSTATE 22021); `jsonb` refuses the escapes `\u0000` and an unpaired UTF-16 surrogate
 * (22P05, 22P02), in values and in object keys. node-postgres writes a lone surrogate in `text` as
 * U+FFFD without a word, so that is a silent change rather than an error. And JSON has no
 * `Infinity`: `JSON.parse('1e309')` gives one and `JSON.stringify` writes it as `null`.
 *
 * Two answers, chosen per field by the caller (docs/architecture.md, "Text PostgreSQL refuses"):
 * input a caller can correct is refused (`badTextAt`, then a `ValidationError` naming the field);
 * a handler's result, which would otherwise be lost, is kept with U+FFFD in place of what cannot be
 * stored (`sanitiseText`). Pure: no I/O.
 */

/** U+0000, a high surrogate not followed by a low one, or a low surrogate not preceded by a high one. */
const REFUSED_SOURCE =
  '\\u0000|[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]';
const REFUSED_ONE = new RegExp(REFUSED_SOURCE);

/** Why a value cannot be stored as it is. */
export type BadTextProblem = 'nul' | 'lone_surrogate' | 'non_finite';

export interface BadText {
  /** Where, as a path into the value: `payload.a[2].b`, `output`, `jobs[0].payload["x y"]`. */
  path: string;
  problem: BadTextProblem;
  /** True when the offending string is an object key (the path then ends with that key). */
  inKey: boolean;
}

/** The string's first character PostgreSQL refuses, or null when it has none. */
export function badCharIn(s: string): 'nul' | 'lone_surrogate' | null {
  // The common case, clean text, without the regex: isWellFormed() is false exactly when the
  // string has an unpaired surrogate.
  if (s.isWellFormed() && !s.includes('\u0000')) return null;
  const m = REFUSED_ONE.exec(s);
  if (!m) return null;
  return m[0] === '\u0000' ? 'nul' : 'lone_surrogate';
}

/** `s` with each U+0000 and each unpaired surrogate replaced by U+FFFD; other text unchanged. */
export function sanitiseText(s: string): string {
  // toWellFormed() replaces each unpaired surrogate with U+FFFD, as PostgreSQL needs.
  return (s.includes('\u0000') ? s.replaceAll('\u0000', '\uFFFD') : s).toWellFormed();
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function segment(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  if (IDENTIFIER.test(key)) return parent === '' ? key : `${parent}.${key}`;
  // JSON.stringify escapes NUL and lone surrogates, so the path itself is printable.
  return `${parent}[${JSON.stringify(key)}]`;
}

interface Frame {
  value: unknown;
  parent: Frame | null;
  key: string | number | null;
}

function pathOf(frame: Frame, root: string): string {
  const keys: (string | number)[] = [];
  for (let f: Frame | null = frame; f?.key !== null && f !== null; f = f.parent) keys.push(f.key);
  let path = root;
  for (let i = keys.length - 1; i >= 0; i--) path = segment(path, keys[i]!);
  return path;
}

/**
 * The first string (in document order) or object key in a JSON-ish value that holds U+0000 or an
 * unpaired surrogate, or the first number that is not finite; null when there is none. `root`
 * names the value (`payload`): the path starts with it. Iterative, so a deeply nested body cannot
 * overflow the stack; an object met twice (a cycle) is walked once.
 */
export function badTextAt(value: unknown, root = ''): BadText | null {
  const stack: Frame[] = [{ value, parent: null, key: null }];
  const seen = new Set<object>();
  while (stack.length > 0) {
    const frame = stack.pop()!;
    const v = frame.value;
    if (typeof v === 'string') {
      const problem = badCharIn(v);
      if (problem) return { path: pathOf(frame, root), problem, inKey: false };
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) return { path: pathOf(frame, root), problem: 'non_finite', inKey: false };
    } else if (typeof v === 'object' && v !== null && !seen.has(v)) {
      seen.add(v);
      const children: Frame[] = [];
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) children.push({ value: v[i], parent: frame, key: i });
      } else {
        for (const [k, child] of Object.entries(v)) {
          const keyProblem = badCharIn(k);
          if (keyProblem) {
            return {
              path: pathOf({ value: child, parent: frame, key: k }, root),
              problem: keyProblem,
              inKey: true,
            };
          }
          children.push({ value: child, parent: frame, key: k });
        }
      }
      // Reversed onto the stack, so the first child is walked first.
      for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
    }
  }
  return null;
}

/** A sentence for a `ValidationError`: what is wrong at `bad.path`, and why it is refused. */
export function describeBadText(bad: BadText): string {
  const where = bad.path === '' ? 'the value' : bad.path;
  switch (bad.problem) {
    case 'nul':
      return `${where}${bad.inKey ? ' (a key)' : ''} contains U+0000 (NUL), which PostgreSQL cannot store`;
    case 'lone_surrogate':
      return `${where}${bad.inKey ? ' (a key)' : ''} contains an unpaired UTF-16 surrogate, which is not valid Unicode text`;
    case 'non_finite':
      return `${where} is not a finite number (JSON has no Infinity or NaN; send a number within ±1.7976931348623157e308)`;
  }
}

/** The most characters of output, error or release-reason text kept on an attempt: its last 64 KiB. */
export const RESULT_TEXT_MAX_CHARS = 64 * 1024;

/**
 * Result text as it is stored: its last `RESULT_TEXT_MAX_CHARS` characters, sanitised (after the
 * cut, which may leave half a surrogate pair at the start).
 */
export function resultText(text: string): string {
  return sanitiseText(
    text.length > RESULT_TEXT_MAX_CHARS ? text.slice(text.length - RESULT_TEXT_MAX_CHARS) : text,
  );
}

/** The first line of a V8 stack's frames: four spaces and `at `. */
const STACK_FRAME = /\n {4}at /;

/**
 * An error text that may hold a whole stack (what workers before attempts kept the stack apart
 * sent as the error) as its message and its stack: the message is the text before the first
 * `    at ` line, the stack the whole text. A text with no such line is all message.
 */
export function splitErrorText(text: string): { message: string; stack: string | null } {
  const at = text.search(STACK_FRAME);
  return at < 0 ? { message: text, stack: null } : { message: text.slice(0, at), stack: text };
}
