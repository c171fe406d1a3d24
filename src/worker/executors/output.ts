/**
 * What the built-in executors keep of a command's output or a response body: the last 64 KiB,
 * never more, however much arrives (a chatty command must not grow the worker's memory). The
 * worker stores the same tail on the attempt, so an operator sees how a run ended.
 */

/** Bytes of output kept: the worker stores at most this much on an attempt. */
export const OUTPUT_TAIL_BYTES = 64 * 1024;

/**
 * A ring of the last `maxBytes` bytes written. Memory stays under twice `maxBytes`: whole chunks
 * are dropped from the front once the rest already holds enough.
 */
export class OutputTail {
  private chunks: Buffer[] = [];
  private held = 0;
  /** Bytes written in all, kept or not. */
  total = 0;

  constructor(readonly maxBytes = OUTPUT_TAIL_BYTES) {}

  write(chunk: Buffer | Uint8Array | string): void {
    const buf =
      typeof chunk === 'string'
        ? Buffer.from(chunk)
        : Buffer.isBuffer(chunk)
          ? chunk
          : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (buf.length === 0) return;
    this.total += buf.length;
    if (buf.length >= this.maxBytes) {
      // Copy the tail so the (possibly large) chunk it came from can be collected.
      this.chunks = [Buffer.from(buf.subarray(buf.length - this.maxBytes))];
      this.held = this.maxBytes;
      return;
    }
    this.chunks.push(buf);
    this.held += buf.length;
    while (this.chunks.length > 1 && this.held - this.chunks[0]!.length >= this.maxBytes) {
      this.held -= this.chunks.shift()!.length;
    }
  }

  /** The last `maxBytes` bytes (or fewer) as text. */
  text(maxBytes = this.maxBytes): string {
    const all = Buffer.concat(this.chunks);
    return decodeTail(all, Math.min(maxBytes, this.maxBytes));
  }
}

/**
 * The last `maxBytes` bytes of `buf` as UTF-8. A cut inside a multi-byte character drops that
 * character's leftover continuation bytes rather than showing a replacement character.
 */
export function decodeTail(buf: Buffer, maxBytes: number): string {
  let start = Math.max(0, buf.length - maxBytes);
  if (start > 0) {
    // UTF-8 continuation bytes are 0b10xxxxxx; a character has at most three of them.
    for (let i = 0; i < 3 && start < buf.length && (buf[start]! & 0xc0) === 0x80; i++) start++;
  }
  return buf.subarray(start).toString('utf8');
}

/** Room kept for the error's class name and anything the worker adds around the message. */
const MESSAGE_MARGIN = 512;

/**
 * An executor failure's message: the one-line summary first (the line logs and tables show), then
 * as much of the output's tail as fits, so that the whole message stays within the 64 KiB the
 * worker stores and the summary survives the worker's own cut to the last 64 KiB.
 */
export function failureMessage(summary: string, output: OutputTail, label = 'output'): string {
  const room = Math.max(0, OUTPUT_TAIL_BYTES - MESSAGE_MARGIN - Buffer.byteLength(summary));
  const tail = output.text(room);
  if (tail.trim() === '') return summary;
  const kept = Buffer.byteLength(tail);
  const what = output.total > kept ? `${label}, last ${kept} of ${output.total} bytes` : label;
  return `${summary}\n--- ${what} ---\n${tail}`;
}

/**
 * Finishes an executor's error for the worker, which stores its text and its `output`: the stack
 * becomes the message alone (the frames would point into Tock, not at anything the operator can act
 * on), and `output` carries the tail, as a successful run's output does.
 */
export function executorError<E extends Error>(err: E, output?: OutputTail): E & { output?: string } {
  err.stack = `${err.name}: ${err.message}`;
  if (output && output.total > 0) Object.assign(err, { output: output.text() });
  return err;
}
