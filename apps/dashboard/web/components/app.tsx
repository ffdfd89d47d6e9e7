import { useEffect, useMemo, useState } from 'preact/hooks';
import { Api } from '../lib/api.ts';
import { checkKey, forgetKey, storedKey, storeKey } from '../lib/auth.ts';
import { ApiContext } from '../lib/context.ts';
import { href, useRoute } from '../lib/router.ts';
import { NewRunPage } from './new-run-page.tsx';
import { NotebookPage } from './notebook-page.tsx';
import { OperatorPage } from './operator-page.tsx';
import { RunPage } from './run-page.tsx';
import { RunsPage } from './runs-page.tsx';
import { SessionPage } from './session-page.tsx';
import { SessionsPage } from './sessions-page.tsx';
import { SignIn } from './sign-in.tsx';
import { VolumePage, VolumesPage } from './volumes-page.tsx';

type Auth =
  | { mode: 'checking' }
  | { mode: 'open' }
  | { mode: 'key'; key: string; role: 'tenant' | 'operator' }
  | { mode: 'signed-out' }
  | { mode: 'unreachable' };

const NAV = [
  ['sessions', 'Sessions'],
  ['volumes', 'Volumes'],
  ['runs', 'Runs'],
  ['new', 'New run'],
  ['operator', 'Operator'],
] as const;

function Page({ route, operatorOnly }: { route: string[]; operatorOnly: boolean }) {
  const [section = 'sessions', id] = route;
  // An operator key reads the deployment's figures and nothing of any tenant.
  if (operatorOnly) return <OperatorPage />;
  if (section === 'sessions' && id) return <SessionPage id={id} />;
  if (section === 'volumes' && id) return <VolumePage name={id} />;
  if (section === 'volumes') return <VolumesPage />;
  if (section === 'runs' && id) return <RunPage id={id} />;
  if (section === 'runs') return <RunsPage />;
  if (section === 'new') return <NewRunPage />;
  if (section === 'notebook' && id) return <NotebookPage id={id} />;
  if (section === 'operator') return <OperatorPage />;
  return <SessionsPage />;
}

/** Works out whether the gateway wants a key (open mode needs none), then shows the pages. */
export function App() {
  const [auth, setAuth] = useState<Auth>({ mode: 'checking' });
  const route = useRoute();
  const api = useMemo(() => new Api(() => (auth.mode === 'key' ? auth.key : null)), [auth]);

  useEffect(() => {
    (async () => {
      const key = storedKey();
      const check = key ? await checkKey(key) : null;
      if (key && (check === 'tenant' || check === 'operator')) return setAuth({ mode: 'key', key, role: check });
      if (key) forgetKey();
      const open = await checkKey(null);
      setAuth(
        open === 'tenant' ? { mode: 'open' } : open === 'rejected' ? { mode: 'signed-out' } : { mode: 'unreachable' },
      );
    })();
  }, []);

  if (auth.mode === 'checking')
    return (
      <main id="main" class="loading" aria-busy="true">
        Loading…
      </main>
    );
  if (auth.mode === 'unreachable')
    return (
      <main id="main">
        <p class="error" role="alert">
          The gateway could not be reached.
        </p>
      </main>
    );
  if (auth.mode === 'signed-out')
    return (
      <SignIn
        onKey={(key, role) => {
          storeKey(key);
          setAuth({ mode: 'key', key, role });
        }}
      />
    );
  const operatorOnly = auth.mode === 'key' && auth.role === 'operator';
  const section = operatorOnly ? 'operator' : (route[0] ?? 'sessions');
  const nav = operatorOnly ? NAV.filter(([path]) => path === 'operator') : NAV;
  return (
    <ApiContext.Provider value={api}>
      <a
        class="skip"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={href('sessions')}>
          sandgate
        </a>
        <nav aria-label="main">
          <ul>
            {nav.map(([path, label]) => (
              <li key={path}>
                <a
                  href={href(path)}
                  aria-current={
                    section === path || (path === 'sessions' && section === 'notebook') ? 'page' : undefined
                  }
                >
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          {auth.mode === 'open' ? (
            <span class="muted" title="no API keys configured">
              open mode
            </span>
          ) : (
            <button
              type="button"
              onClick={() => {
                forgetKey();
                setAuth({ mode: 'signed-out' });
              }}
            >
              Sign out
            </button>
          )}
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Page key={route.join('/')} route={route} operatorOnly={operatorOnly} />
      </main>
    </ApiContext.Provider>
  );
}
