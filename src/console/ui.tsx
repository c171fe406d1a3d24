/**
 * The console's small shared pieces: instants with their age, a run's state, a status line that
 * screen readers announce, a button that asks before it acts (a modal `<dialog>`: focus moves into
 * it, Escape cancels, focus returns to the button), and the newest-first pager of cursor lists.
 */
import type { ComponentChildren } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';
import { age, localTime } from './format.js';

/** An instant as local time, its age beside it, the exact ISO instant in `datetime`. */
export function When({ iso, now, empty = '—' }: { iso: string | null; now: number; empty?: string }) {
  if (iso === null) return <span class="muted">{empty}</span>;
  return (
    <time dateTime={iso} title={iso}>
      {localTime(iso)} <span class="muted">({age(iso, now)})</span>
    </time>
  );
}

export function StateBadge({ state }: { state: string }) {
  return <span class={`badge state-${state}`}>{state}</span>;
}

export interface Report {
  text: string;
  ok: boolean;
}

/** The last action's outcome, announced politely (role=status) or as an alert when it failed. */
export function Notice({ report }: { report: Report | null }) {
  return (
    <div class="notice-slot" aria-live="polite">
      {report && (
        <p class={report.ok ? 'notice ok' : 'notice error'} role={report.ok ? 'status' : 'alert'}>
          {report.text}
        </p>
      )}
    </div>
  );
}

/** A failed load, said plainly; a 403 says which key is needed. */
export function LoadError({ error }: { error: ApiError | null }) {
  if (!error) return null;
  const hint = error.status === 429 ? ' (slowing down: the API asks for fewer requests)' : '';
  return (
    <p class="notice error" role="alert">
      Could not load: {error.message}
      {hint}
    </p>
  );
}

export const message = (err: unknown) =>
  err instanceof ApiError ? `${err.message} (${err.code})` : err instanceof Error ? err.message : String(err);

interface ConfirmProps {
  /** The button's text. */
  label: string;
  /** What the dialog asks. */
  question: ComponentChildren;
  /** The dialog's confirming button. Default `label`. */
  confirmLabel?: string;
  danger?: boolean;
  /** The action; its answer is the report of success. */
  act: () => Promise<string>;
  report: (r: Report) => void;
}

/** A button that opens a confirmation dialog and, on confirm, acts and reports the outcome. */
export function ConfirmButton({ label, question, confirmLabel, danger, act, report }: ConfirmProps) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const confirm = async () => {
    dialog.current?.close();
    setBusy(true);
    try {
      report({ text: await act(), ok: true });
    } catch (err) {
      report({ text: message(err), ok: false });
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button
        type="button"
        class={danger ? 'danger' : undefined}
        disabled={busy}
        onClick={() => dialog.current?.showModal()}
      >
        {label}
      </button>
      <dialog ref={dialog} aria-label={label}>
        <p>{question}</p>
        <div class="dialog-buttons">
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button type="button" class={danger ? 'danger' : 'primary'} onClick={confirm}>
            {confirmLabel ?? label}
          </button>
        </div>
      </dialog>
    </>
  );
}

/** Cursor pages, newest first: the first page, and the next while there is one. */
export function usePager() {
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const cursor = cursors[cursors.length - 1] ?? null;
  return {
    cursor,
    page: cursors.length,
    next: (c: string) => setCursors([...cursors, c]),
    previous: () => setCursors(cursors.length > 1 ? cursors.slice(0, -1) : cursors),
    first: () => setCursors([null]),
  };
}

export function Pager({
  pager,
  nextCursor,
  what,
  labels = ['Newest', 'Newer', 'Older'],
}: {
  pager: ReturnType<typeof usePager>;
  nextCursor: string | null | undefined;
  what: string;
  /** The first page's, the previous page's and the next page's buttons. */
  labels?: [string, string, string];
}) {
  return (
    <nav class="pager" aria-label={`Pages of ${what}`}>
      <button type="button" disabled={pager.page === 1} onClick={pager.first}>
        {labels[0]}
      </button>
      <button type="button" disabled={pager.page === 1} onClick={pager.previous}>
        {labels[1]}
      </button>
      <span>Page {pager.page}</span>
      <button type="button" disabled={!nextCursor} onClick={() => nextCursor && pager.next(nextCursor)}>
        {labels[2]}
      </button>
    </nav>
  );
}

/** A job id or run id as a monospace link. */
export function IdLink({ href, id }: { href: string; id: string }) {
  return (
    <a href={href} class="id">
      {id}
    </a>
  );
}
