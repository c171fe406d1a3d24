/**
 * The run archive: where the pruner (and `POST /v1/runs/prune`) writes finished runs before it
 * deletes them, when a server is given one (`--prune-archive`). `JsonlArchive` appends them to
 * JSON Lines files, one per UTC day of the runs' slots (`runs-YYYY-MM-DD.jsonl`), and syncs each
 * file to disk before the delete commits: a run is in a file before it leaves the database. A crash
 * between the two leaves the run in both, and the next pass writes it again, so a file may hold a
 * run twice: readers keep the last line per `run_id`.
 */
import { constants } from 'node:fs';
import { access, mkdir, open, truncate } from 'node:fs/promises';
import path from 'node:path';

/** Where pruned runs go before they are deleted (`PostgresStoreOptions.archive`). */
export interface RunArchive {
  /**
   * Writes each day's lines (`YYYY-MM-DD` → JSON lines joined by newlines) durably, or rejects and
   * leaves none of them: the runs are deleted only once this resolves.
   */
  write(days: Readonly<Record<string, string>>): Promise<void>;
}

/** A day of the archive, as `pruneBatchArchived` names it (years of four digits or more). */
const DAY = /^\d{4,6}-\d{2}-\d{2}$/;

/** How long one write may take by default before it is given up, ms (`JsonlArchive.open`). */
export const ARCHIVE_WRITE_TIMEOUT_MS = 30_000;

/** The file of a day's runs in `dir`. */
export const archiveFile = (dir: string, day: string) => path.join(dir, `runs-${day}.jsonl`);

/** JSON Lines files in one directory, one per UTC day of the runs' slots. */
export class JsonlArchive implements RunArchive {
  /** Writes of this process, one at a time, so the lines of two batches never interleave. */
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    readonly dir: string,
    private readonly writeTimeoutMs: number,
  ) {}

  /**
   * The archive in `dir`, made if missing; an `Error` that says why when it cannot be made or
   * written to, before anything is pruned. A write that has not finished after `writeTimeoutMs` (a
   * file system that hangs) is given up: it rejects, so no run is deleted, and the pruner backs off.
   */
  static async open(dir: string, o: { writeTimeoutMs?: number } = {}): Promise<JsonlArchive> {
    if (typeof dir !== 'string' || dir.length === 0 || dir.includes('\0'))
      throw new Error('the archive directory must be a path');
    const resolved = path.resolve(dir);
    try {
      await mkdir(resolved, { recursive: true });
      await access(resolved, constants.W_OK);
    } catch (err) {
      throw new Error(`the archive directory ${resolved} cannot be written to: ${(err as Error).message}`);
    }
    return new JsonlArchive(resolved, o.writeTimeoutMs ?? ARCHIVE_WRITE_TIMEOUT_MS);
  }

  /**
   * After the writes before it (a write given up still holds its place until it ends, so lines
   * never interleave); rejects once `writeTimeoutMs` has passed, counted from its call.
   */
  write(days: Readonly<Record<string, string>>): Promise<void> {
    const next = this.queue.then(() => this.writeAll(days));
    this.queue = next.catch(() => {});
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the archive write did not finish within ${this.writeTimeoutMs} ms`)),
        this.writeTimeoutMs,
      );
      timer.unref();
    });
    return Promise.race([next, late]).finally(() => clearTimeout(timer));
  }

  /**
   * Appends each day's lines to its file and syncs it. On a failure, every file this write appended
   * to is cut back to its length before, so neither a partial line nor the lines of runs that stay
   * in the database are left behind.
   */
  private async writeAll(days: Readonly<Record<string, string>>): Promise<void> {
    const appended: { file: string; size: number }[] = [];
    try {
      for (const day of Object.keys(days).sort()) {
        if (!DAY.test(day)) throw new Error(`not a day of the archive: ${JSON.stringify(day)}`);
        const lines = days[day] as string;
        if (lines.length > 0) await this.append(archiveFile(this.dir, day), `${lines}\n`, appended);
      }
    } catch (err) {
      for (const { file, size } of appended) await truncate(file, size).catch(() => {});
      throw err;
    }
  }

  /** Appends `text` to `file` and syncs it (a new file's directory entry too); notes the file's length before in `appended`. */
  private async append(
    file: string,
    text: string,
    appended: { file: string; size: number }[],
  ): Promise<void> {
    const handle = await open(file, 'a');
    try {
      const size = (await handle.stat()).size;
      appended.push({ file, size });
      await handle.writeFile(text, 'utf8');
      await handle.sync();
      if (size === 0) await syncDirectory(this.dir);
    } finally {
      await handle.close();
    }
  }
}

/** Syncs a directory, so a file made in it survives a crash. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
