/**
 * Plain-text output for people: aligned columns and `name  value` lists. Cells are single-line
 * (newlines and tabs become spaces), columns are separated by two spaces, and no line ends in
 * spaces, so the output reads in a terminal and greps and cuts cleanly.
 */

/**
 * `text` with every control character but newline and tab (an escape sequence, a bell) replaced
 * by U+FFFD: what a job's output, an error a remote server sent or a hostile argument holds must
 * not drive the operator's terminal.
 */
export function harmless(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters it removes
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, '\ufffd');
}

/**
 * One line of text: line breaks and tabs, which would break the alignment, become spaces; every
 * other control character (an escape sequence in an error a remote server sent, say) becomes
 * U+FFFD, so nothing a job's output holds can drive the operator's terminal.
 */
export function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return harmless(text.replace(/\s*[\r\n]+\s*/g, ' ').replace(/\t/g, ' '));
}

/** `1 run`, `2 runs`: a count with its noun (regular English plurals only). */
export function counted(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** Shortens `text` to `max` characters, marking the cut with `…`. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}

/** An aligned table with a header row; every line ends in a newline. */
export function formatTable(headers: readonly string[], rows: readonly (readonly unknown[])[]): string {
  const lines = [headers.map(cell), ...rows.map((r) => headers.map((_, i) => cell(r[i])))];
  const widths = headers.map((_, i) => Math.max(...lines.map((l) => [...(l[i] ?? '')].length)));
  return lines
    .map((l) =>
      l
        .map((c, i) => (i === l.length - 1 ? c : c + ' '.repeat((widths[i] ?? 0) - [...c].length)))
        .join('  ')
        .trimEnd(),
    )
    .map((l) => `${l}\n`)
    .join('');
}

/** `name  value` lines, names aligned; every line ends in a newline. */
export function formatFields(fields: readonly (readonly [string, unknown])[]): string {
  const width = Math.max(0, ...fields.map(([name]) => name.length));
  return fields.map(([name, value]) => `${`${name.padEnd(width)}  ${cell(value)}`.trimEnd()}\n`).join('');
}

/**
 * A titled section of text that keeps its lines (a stack, a handler's output): the title on a line
 * of its own, then each line indented by `indent` spaces; empty when `text` is null or empty.
 * Control characters other than tab and newline (escape sequences a handler printed, a carriage
 * return that would overwrite the line) become U+FFFD, so the text cannot drive the terminal.
 */
export function formatBlock(title: string, text: string | null | undefined, indent = 2): string {
  if (text === null || text === undefined || text === '') return '';
  const pad = ' '.repeat(indent);
  const lines = harmless(text.replace(/\r\n/g, '\n')).replace(/\n+$/, '').split('\n');
  return `${title}\n${lines.map((l) => `${pad}${l}`.trimEnd()).join('\n')}\n`;
}
