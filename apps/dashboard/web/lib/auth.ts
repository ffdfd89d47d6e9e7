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

/** `tenant`: a tenant's key (or open mode); `operator`: a key for the operator endpoints only. */
export type KeyCheck = 'tenant' | 'operator' | 'rejected' | 'unreachable';

const get = (path: string, key: string | null) =>
  fetch(path, { cache: 'no-store', headers: key ? { authorization: `Bearer ${key}` } : {} });

/**
 * Whether `key` (or no key, in open mode) is let in, and as what. A tenant key may list sessions (the
 * cheapest authenticated read); an operator key (SANDGATE_OPERATOR_KEYS) may not, but may read the
 * deployment's figures, so it opens the operator view alone.
 */
export async function checkKey(key: string | null): Promise<KeyCheck> {
  try {
    const res = await get('/v1/sessions?limit=1', key);
    if (res.ok) return 'tenant';
    if (res.status !== 401 && res.status !== 403) return 'unreachable';
    if (key && (await get('/v1/system/stats', key)).ok) return 'operator';
    return 'rejected';
  } catch {
    return 'unreachable';
  }
}
