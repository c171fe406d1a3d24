/**
 * "Replay N matching" on the Dead letters page: asks the server how many dead runs the filter picks
 * (`POST /v1/runs/replay` with `dry_run`), shows that count in the confirmation, and only on
 * confirm replays them, a batch of 500 a request, following the cursor. One click replays at most
 * `MAX_BATCHES` batches; the report says when more are left.
 */
import { useRef, useState } from 'preact/hooks';
import { api } from './api.js';
import type { ReplayDeadAnswer } from './types.js';
import { message, type Report } from './ui.js';

/** Batches of 500 one confirmation replays at most (10,000 runs). */
const MAX_BATCHES = 20;

/** The filter of the bulk replay, as the API takes it (an empty field is no filter). */
export interface DeadFilter {
  job_id: string;
  error_contains: string;
}

const bodyOf = (f: DeadFilter) => ({
  job_id: f.job_id || undefined,
  error_contains: f.error_contains || undefined,
});

const runs = (n: number) => `${n} dead run${n === 1 ? '' : 's'}`;

/** What the filter says, for the question. */
function described(f: DeadFilter): string {
  const parts = [
    f.job_id && `of job ${f.job_id}`,
    f.error_contains && `whose last error holds "${f.error_contains}"`,
  ].filter(Boolean);
  return parts.length > 0 ? ` ${parts.join(' ')}` : '';
}

/** Replays what `filter` picks, batch after batch (at most `MAX_BATCHES`): the report of it. */
async function replayMatching(filter: DeadFilter): Promise<Report> {
  let replayed = 0;
  let skipped = 0;
  let cursor: string | null = null;
  try {
    for (let i = 0; i < MAX_BATCHES; i++) {
      const done: ReplayDeadAnswer = await api<ReplayDeadAnswer>('/v1/runs/replay', {
        method: 'POST',
        body: { ...bodyOf(filter), cursor: cursor ?? undefined },
      });
      replayed += done.replayed;
      skipped += done.skipped;
      cursor = done.next_cursor;
      if (cursor === null) break;
    }
  } catch (err) {
    return { text: `${message(err)} (replayed ${runs(replayed)} before it)`, ok: false };
  }
  const more = cursor === null ? '' : ' More match: replay again to go on.';
  const left = skipped > 0 ? ` ${skipped} were no longer dead and were left alone.` : '';
  return { text: `Replayed ${runs(replayed)}.${left}${more}`, ok: true };
}

export function BulkReplay({
  filter,
  report,
  changed,
}: {
  filter: DeadFilter;
  report: (r: Report) => void;
  changed: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const [counted, setCounted] = useState<ReplayDeadAnswer | null>(null);

  const count = async () => {
    setBusy(true);
    try {
      const answer = await api<ReplayDeadAnswer>('/v1/runs/replay', {
        method: 'POST',
        body: { ...bodyOf(filter), dry_run: true },
      });
      if (answer.matching === 0) report({ text: `No dead run${described(filter)} to replay.`, ok: true });
      else {
        setCounted(answer);
        dialog.current?.showModal();
      }
    } catch (err) {
      report({ text: message(err), ok: false });
    } finally {
      setBusy(false);
    }
  };

  const replay = async () => {
    dialog.current?.close();
    setBusy(true);
    try {
      report(await replayMatching(filter));
    } finally {
      setBusy(false);
      changed();
    }
  };

  const n = counted ? `${counted.more_matching ? 'more than ' : ''}${counted.matching}` : '';
  return (
    <>
      <button type="button" disabled={busy} onClick={count}>
        Replay matching…
      </button>
      <dialog ref={dialog} aria-label="Replay matching dead runs">
        <p>
          Replay {n} dead run{counted?.matching === 1 ? '' : 's'}
          {described(filter)}? Each is queued again for a fresh set of attempts.
        </p>
        <div class="dialog-buttons">
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button type="button" class="primary" onClick={replay}>
            Replay {n}
          </button>
        </div>
      </dialog>
    </>
  );
}
