import { useEffect, useState } from 'preact/hooks';

/**
 * Hash routes (#/runs/exec_…): the gateway serves one static page, a reload keeps the place, and the
 * fragment never reaches a server log. Only ids go in it, never a key.
 */
export function useRoute(): string[] {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
}

export const href = (...parts: string[]) => `#/${parts.map(encodeURIComponent).join('/')}`;
export const navigate = (...parts: string[]) => {
  location.hash = href(...parts);
};
