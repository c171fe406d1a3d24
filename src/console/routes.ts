/**
 * Pages by the URL's hash (`#/jobs/nightly`), so that the server serves one page for all of them
 * and the address bar, back button and bookmarks work. The hash names a page and an id only: never
 * a key. Pure, so the unit tests hold it without a browser.
 */

export type Route =
  | { page: 'jobs' }
  | { page: 'job'; id: string }
  | { page: 'run'; id: string }
  | { page: 'dead' }
  | { page: 'now' }
  | { page: 'limits' }
  | { page: 'notifications' }
  | { page: 'notification'; id: string }
  | { page: 'cluster' };

export function parseRoute(hash: string): Route {
  const parts = hash
    .replace(/^#\/?/, '')
    .split('/')
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    });
  const [first, id] = parts;
  if (first === 'jobs' && id) return { page: 'job', id };
  if (first === 'runs' && id) return { page: 'run', id };
  if (first === 'dead') return { page: 'dead' };
  if (first === 'now') return { page: 'now' };
  if (first === 'limits') return { page: 'limits' };
  if (first === 'notifications') return id ? { page: 'notification', id } : { page: 'notifications' };
  if (first === 'cluster') return { page: 'cluster' };
  return { page: 'jobs' };
}

export const jobHref = (id: string) => `#/jobs/${encodeURIComponent(id)}`;
export const runHref = (id: string) => `#/runs/${encodeURIComponent(id)}`;
export const notificationHref = (name: string) => `#/notifications/${encodeURIComponent(name)}`;
