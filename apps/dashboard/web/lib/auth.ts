/**
 * The API key is entered once and kept in session storage (gone when the tab closes); it travels only
 * in the Authorization header, never in a URL.
 */
const KEY = 'sandgate.key';

export const storedKey = (): string | null => sessionStorage.getItem(KEY);
export const storeKey = (key: string): void => sessionStorage.setItem(KEY, key);
/** Signs out: the key and everything kept for this tab (run output, notebook cells) go. */
export const forgetKey = (): void => {
  for (const k of Object.keys(sessionStorage)) if (k.startsWith('sandgate.')) sessionStorage.removeItem(k);
};

export type KeyCheck = 'ok' | 'rejected' | 'unreachable';

/**
 * Whether `key` (or no key, in open mode) is let in: asks for one session, the cheapest authenticated read.
 * A 403 is a key the gateway knows that may not list sessions (an operator key): it is let in, and the
 * pages it may not use say so.
 */
export async function checkKey(key: string | null): Promise<KeyCheck> {
  try {
    const res = await fetch('/v1/sessions?limit=1', {
      cache: 'no-store',
      headers: key ? { authorization: `Bearer ${key}` } : {},
    });
    if (res.status === 401) return 'rejected';
    return res.ok || res.status === 403 ? 'ok' : 'unreachable';
  } catch {
    return 'unreachable';
  }
}
