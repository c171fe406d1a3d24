/**
 * Signing in: the key is checked with `GET /v1/whoami` before it is kept (in this tab's
 * sessionStorage only). A worker key may not read, so it cannot sign in; the form says which keys
 * can.
 */
import { useState } from 'preact/hooks';
import { ApiError, api, storeKey } from '../api.js';
import type { WhoAmI } from '../types.js';

export function SignIn({ onSignedIn, reason }: { onSignedIn: (who: WhoAmI) => void; reason: string | null }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(reason);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    const trimmed = key.trim();
    if (!trimmed) {
      setError('Enter an API key.');
      return;
    }
    setBusy(true);
    try {
      const who = await api<WhoAmI>('/v1/whoami', { key: trimmed });
      storeKey(trimmed);
      setKey('');
      onSignedIn(who);
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) setError('That key is unknown or revoked.');
      else if (err instanceof ApiError && err.status === 403)
        setError('This key may not read (a worker key?): sign in with a reader, operator or admin key.');
      else setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main id="main" class="sign-in">
      <h1>Sign in to Tock</h1>
      <p>
        Use an API key (<code>tock keys create</code> makes one). It is kept for this tab only, and forgotten
        when you sign out or close the tab.
      </p>
      <form onSubmit={submit}>
        <label for="key">API key</label>
        <input
          id="key"
          name="key"
          type="password"
          autocomplete="off"
          spellcheck={false}
          value={key}
          onInput={(e) => setKey((e.target as HTMLInputElement).value)}
          aria-describedby={error ? 'sign-in-error' : undefined}
          aria-invalid={error ? true : undefined}
        />
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
      </form>
      {error && (
        <p id="sign-in-error" class="notice error" role="alert">
          {error}
        </p>
      )}
    </main>
  );
}
