import { describe, expect, it } from 'vitest';
import { cell, formatBlock, formatFields, formatTable, truncate } from '../../../src/cli/format/table.js';

describe('formatTable', () => {
  it('aligns columns two spaces apart, with no trailing spaces', () => {
    const out = formatTable(
      ['JOB', 'SCHEDULE', 'NEXT'],
      [
        ['nightly', '0 3 * * *', '2026-01-01T03:00:00.000Z'],
        ['hb', '@every 10s', null],
      ],
    );
    expect(out).toBe(
      [
        'JOB      SCHEDULE    NEXT',
        'nightly  0 3 * * *   2026-01-01T03:00:00.000Z',
        'hb       @every 10s  -',
        '',
      ].join('\n'),
    );
  });

  it('keeps each row on one line and counts characters, not UTF-16 units', () => {
    const out = formatTable(
      ['A', 'B'],
      [
        ['x\ny', '1'],
        ['→é', '2'],
      ],
    );
    expect(out).toBe('A    B\nx y  1\n→é   2\n');
  });

  it('prints an empty last column without trailing spaces', () => {
    expect(formatTable(['A', 'B'], [['long value', '']])).toBe('A           B\nlong value\n');
  });
});

describe('formatFields', () => {
  it('aligns names and shows null as -', () => {
    expect(
      formatFields([
        ['job_id', 'nightly'],
        ['next_run_at', null],
        ['payload', { a: 1 }],
      ]),
    ).toBe('job_id       nightly\nnext_run_at  -\npayload      {"a":1}\n');
  });
});

describe('cell and truncate', () => {
  it('renders values on one line and marks a cut', () => {
    expect(cell(true)).toBe('true');
    expect(cell(undefined)).toBe('-');
    expect(truncate('abcdef', 4)).toBe('abc…');
    expect(truncate('abc', 4)).toBe('abc');
  });

  it('makes terminal escape sequences in a cell harmless (an error a remote server sent)', () => {
    const error = 'bad \u001b[31mRED\u001b[0m \u0007bell \u009b2J';
    expect(cell(error)).toBe('bad \ufffd[31mRED\ufffd[0m \ufffdbell \ufffd2J');
    const table = formatTable(['LAST ERROR'], [[error]]);
    for (const control of ['\u001b', '\u0007', '\u009b']) expect(table).not.toContain(control);
    expect(formatFields([['error', error]])).not.toContain('\u001b');
  });
});

describe('formatBlock', () => {
  it('keeps the lines, indented under the title; nothing for no text', () => {
    expect(formatBlock('STACK', 'Error: boom\n    at f (a.js:1:2)\n')).toBe(
      'STACK\n  Error: boom\n      at f (a.js:1:2)\n',
    );
    expect(formatBlock('OUTPUT', null)).toBe('');
    expect(formatBlock('OUTPUT', '')).toBe('');
  });

  it('turns control characters (escape sequences, carriage returns) into U+FFFD; tabs stay', () => {
    expect(formatBlock('OUTPUT', '\u001b[31mred\u001b[0m\tok\r\nover\rwrite\u009b')).toBe(
      'OUTPUT\n  \ufffd[31mred\ufffd[0m\tok\n  over\ufffdwrite\ufffd\n',
    );
  });
});
