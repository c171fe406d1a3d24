import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { badCharIn, badTextAt, describeBadText, sanitiseText, splitErrorText } from '../../src/core/text.js';

/** What PostgreSQL would refuse, judged independently of the module: a UTF-8 round trip changes a lone surrogate. */
function storable(s: string): boolean {
  return !s.includes('\u0000') && Buffer.from(s, 'utf8').toString('utf8') === s;
}

describe('sanitiseText', () => {
  it('replaces NUL and lone surrogates with U+FFFD and keeps pairs', () => {
    expect(sanitiseText('binary\u0000output')).toBe('binary\uFFFDoutput');
    expect(sanitiseText('a\uD800b')).toBe('a\uFFFDb');
    expect(sanitiseText('a\uDC00b')).toBe('a\uFFFDb');
    expect(sanitiseText('\uDC00\uD800')).toBe('\uFFFD\uFFFD');
    expect(sanitiseText('end\uD83D')).toBe('end\uFFFD');
    expect(sanitiseText('emoji \uD83D\uDE00 ok')).toBe('emoji \uD83D\uDE00 ok');
    expect(sanitiseText('')).toBe('');
  });

  it('always gives storable text of the same length, unchanged when it was storable', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const out = sanitiseText(s);
        expect(storable(out)).toBe(true);
        expect(out.length).toBe(s.length);
        if (storable(s)) expect(out).toBe(s);
        expect(badCharIn(s) === null).toBe(storable(s));
      }),
    );
  });
});

describe('badTextAt', () => {
  it('finds nothing in clean JSON', () => {
    expect(badTextAt({ a: [1, 'x', { b: null, c: true }], d: -0.5 }, 'payload')).toBeNull();
    expect(badTextAt('plain')).toBeNull();
    expect(badTextAt(undefined)).toBeNull();
  });

  it('names the path of the first bad string, key or number', () => {
    expect(badTextAt({ a: [1, 2, { b: 'x\u0000' }] }, 'payload')).toEqual({
      path: 'payload.a[2].b',
      problem: 'nul',
      inKey: false,
    });
    expect(badTextAt({ ok: 1, 'bad\u0000key': 1 }, 'payload')).toEqual({
      path: 'payload["bad\\u0000key"]',
      problem: 'nul',
      inKey: true,
    });
    expect(badTextAt({ a: '\uDC00' }, 'payload')?.problem).toBe('lone_surrogate');
    expect(badTextAt({ n: JSON.parse('1e309') }, 'payload')).toEqual({
      path: 'payload.n',
      problem: 'non_finite',
      inKey: false,
    });
    expect(badTextAt([Number.NaN])?.path).toBe('[0]');
    expect(badTextAt('x\u0000', 'output')?.path).toBe('output');
    expect(badTextAt({ 'with space': ['\u0000'] })?.path).toBe('["with space"][0]');
  });

  it('reports the first in document order', () => {
    expect(badTextAt({ a: { b: 'fine', c: '\u0000' }, d: '\u0000' })?.path).toBe('a.c');
  });

  it('walks deep nesting without overflowing the stack, and cycles once', () => {
    let deep: unknown = '\u0000';
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(badTextAt(deep)?.problem).toBe('nul');
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(badTextAt(cyclic)).toBeNull();
  });

  it('agrees with a UTF-8 round trip on any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary' }), (v) => {
        const text = JSON.stringify(v) ?? '';
        const stringsOk = storable(text) && !text.includes('\\u0000') && !/\\ud[89a-f]/i.test(text);
        expect(badTextAt(v) === null).toBe(stringsOk);
      }),
    );
  });

  it('describes the problem with the path', () => {
    const bad = badTextAt({ output: 'a\u0000' });
    expect(describeBadText(bad!)).toBe('output contains U+0000 (NUL), which PostgreSQL cannot store');
    expect(describeBadText({ path: 'priority', problem: 'non_finite', inKey: false })).toMatch(
      /^priority is not a finite number/,
    );
  });
});

describe('splitErrorText', () => {
  it('splits a stack at its first frame: the message before it, the stack whole', () => {
    const stack = 'TypeError: x is not a function\n  (second line)\n    at f (a.js:1:2)\n    at g (b.js:3:4)';
    expect(splitErrorText(stack)).toEqual({
      message: 'TypeError: x is not a function\n  (second line)',
      stack,
    });
  });

  it('leaves a text without frames whole, as the message', () => {
    expect(splitErrorText('upstream 500\n  at fetch')).toEqual({
      message: 'upstream 500\n  at fetch',
      stack: null,
    });
    expect(splitErrorText('')).toEqual({ message: '', stack: null });
  });
});
