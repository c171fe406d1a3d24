/** How the console writes instants and durations: local time to the second, and ages in words. */

const pad = (n: number) => String(n).padStart(2, '0');

/** `2026-01-01 09:30:00`, in the browser's time zone. */
export function localTime(iso: string): string {
  const d = new Date(iso);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** `12 s ago`, `in 3 min`, `2 h ago`, `5 d ago`, from `nowMs`. */
export function age(iso: string, nowMs: number): string {
  const ms = new Date(iso).getTime() - nowMs;
  const s = Math.round(Math.abs(ms) / 1000);
  const words =
    s < 60
      ? `${s} s`
      : s < 3600
        ? `${Math.floor(s / 60)} min`
        : s < 86_400
          ? `${Math.floor(s / 3600)} h`
          : `${Math.floor(s / 86_400)} d`;
  return ms > 0 ? `in ${words}` : `${words} ago`;
}

/** A run's last instant worth an age: when it finished, else started, else was created. */
export function runInstant(r: { finished_at: string | null; started_at: string | null; created_at: string }) {
  return r.finished_at ?? r.started_at ?? r.created_at;
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
