/**
 * The console's shell: it asks `GET /v1/whoami` who the tab is (with the key of this tab's
 * sessionStorage, or none: `tock dev` and `--insecure` servers answer without one), shows the
 * sign-in form when the API wants a key, and otherwise the header (tenant, role, sign out), the
 * navigation and the page the URL's hash names. A key the API stops accepting (revoked) signs the
 * tab out.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, storedKey, storeKey, UNAUTHORIZED_EVENT } from './api.js';
import { ClusterPage } from './pages/cluster.js';
import { DeadPage } from './pages/dead.js';
import { JobPage } from './pages/job.js';
import { JobsPage } from './pages/jobs.js';
import { LimitsPage } from './pages/limits.js';
import { NotificationPage, NotificationsPage } from './pages/notifications.js';
import { NowPage } from './pages/now.js';
import { RunPage } from './pages/run.js';
import { SignIn } from './pages/sign-in.js';
import { useRoute } from './router.js';
import type { Route } from './routes.js';
import { type Session, session } from './session.js';
import type { WhoAmI } from './types.js';

type State =
  | { kind: 'loading' }
  | { kind: 'signed-out'; reason: string | null }
  | { kind: 'failed'; message: string }
  | { kind: 'in'; session: Session };

const NAV: { page: Route['page']; href: string; label: string }[] = [
  { page: 'jobs', href: '#/jobs', label: 'Jobs' },
  { page: 'now', href: '#/now', label: 'Runs now' },
  { page: 'dead', href: '#/dead', label: 'Dead letters' },
  { page: 'limits', href: '#/limits', label: 'Limits' },
  { page: 'notifications', href: '#/notifications', label: 'Notifications' },
  { page: 'cluster', href: '#/cluster', label: 'Cluster' },
];

/** The nav entry a page belongs to (a job's page and a run's are under Jobs, a notification's under Notifications). */
const section = (r: Route): Route['page'] =>
  r.page === 'job' || r.page === 'run' ? 'jobs' : r.page === 'notification' ? 'notifications' : r.page;

export function App() {
  const [state, setState] = useState<State>({ kind: 'loading' });

  useEffect(() => {
    api<WhoAmI>('/v1/whoami', { key: storedKey() })
      .then((who) => setState({ kind: 'in', session: session(who) }))
      .catch((err) => {
        if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
          storeKey(null);
          setState({ kind: 'signed-out', reason: null });
        } else setState({ kind: 'failed', message: err instanceof Error ? err.message : String(err) });
      });
    const onUnauthorized = () => {
      storeKey(null);
      setState({ kind: 'signed-out', reason: 'The API no longer accepts this key: sign in again.' });
    };
    window.addEventListener(UNAUTHORIZED_EVENT, onUnauthorized);
    return () => window.removeEventListener(UNAUTHORIZED_EVENT, onUnauthorized);
  }, []);

  if (state.kind === 'loading') return <p class="loading">Loading…</p>;
  if (state.kind === 'failed')
    return (
      <main id="main">
        <h1>Tock</h1>
        <p class="notice error" role="alert">
          The API did not answer: {state.message}
        </p>
      </main>
    );
  if (state.kind === 'signed-out')
    return (
      <SignIn reason={state.reason} onSignedIn={(who) => setState({ kind: 'in', session: session(who) })} />
    );
  return (
    <SignedIn
      session={state.session}
      signOut={() => {
        storeKey(null);
        setState({ kind: 'signed-out', reason: null });
      }}
    />
  );
}

function SignedIn({ session, signOut }: { session: Session; signOut: () => void }) {
  const route = useRoute();
  const main = useRef<HTMLElement>(null);
  const first = useRef(true);
  // A new page moves focus to its content, as a page load would, so keyboard and screen reader
  // users start there (not on the first render: the browser's own focus stays).
  useEffect(() => {
    if (first.current) first.current = false;
    else main.current?.focus();
  }, [route.page, 'id' in route ? route.id : '']);
  const { who } = session;
  return (
    <>
      {/* A button, not a link to #main: the hash names the page. */}
      <button type="button" class="skip" onClick={() => main.current?.focus()}>
        Skip to content
      </button>
      <header class="top">
        <span class="brand">Tock</span>
        <nav aria-label="Pages">
          <ul>
            {NAV.map((n) => (
              <li key={n.page}>
                <a href={n.href} aria-current={section(route) === n.page ? 'page' : undefined}>
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <p class="who">
          Tenant <strong data-testid="tenant">{who.tenant_id}</strong>, role{' '}
          <strong data-testid="role">{who.role}</strong>
          {who.auth === 'open' && <span class="muted"> (open mode: no key)</span>}
        </p>
        {who.auth === 'keys' && (
          <button type="button" onClick={signOut}>
            Sign out
          </button>
        )}
      </header>
      <main id="main" ref={main} tabIndex={-1}>
        <Page route={route} session={session} />
      </main>
    </>
  );
}

function Page({ route, session }: { route: Route; session: Session }) {
  switch (route.page) {
    case 'jobs':
      return <JobsPage session={session} />;
    case 'job':
      return <JobPage session={session} jobId={route.id} />;
    case 'run':
      return <RunPage session={session} runId={route.id} />;
    case 'dead':
      return <DeadPage session={session} />;
    case 'now':
      return <NowPage session={session} />;
    case 'limits':
      return <LimitsPage />;
    case 'notifications':
      return <NotificationsPage />;
    case 'notification':
      return <NotificationPage name={route.id} />;
    case 'cluster':
      return <ClusterPage session={session} />;
  }
}
