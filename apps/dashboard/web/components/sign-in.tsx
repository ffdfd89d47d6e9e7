import { useState } from 'preact/hooks';
import { checkKey } from '../lib/auth.ts';

/** The one place a key is typed; it goes to session storage and into headers, never into a URL. */
export function SignIn({ onKey }: { onKey(key: string, role: 'tenant' | 'operator'): void }) {
  const [key, setKey] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    const check = await checkKey(key.trim());
    setBusy(false);
    if (check === 'tenant' || check === 'operator') onKey(key.trim(), check);
    else setProblem(check === 'rejected' ? 'This API key is not valid.' : 'The gateway could not be reached.');
  };
  return (
    <main class="sign-in" id="main">
      <h1>sandgate</h1>
      <form onSubmit={submit} class="card" method="post" action="#">
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autocomplete="current-password"
          required
          minLength={16}
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
          aria-describedby="key-help"
          autofocus
        />
        <p id="key-help" class="muted">
          Kept in this tab only (session storage) and sent as a header.
        </p>
        {problem && (
          <p class="error" role="alert">
            {problem}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
