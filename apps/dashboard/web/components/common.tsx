import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../lib/api.ts';

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  const text =
    error instanceof ApiError ? `${error.message} (${error.code})` : String((error as Error).message ?? error);
  return (
    <p class="error" role="alert">
      {text}
    </p>
  );
}

export function StateBadge({ state }: { state: string }) {
  return <span class={`badge state-${state}`}>{state}</span>;
}

export function Panel({
  title,
  actions,
  children,
  label,
}: {
  title: ComponentChildren;
  actions?: ComponentChildren;
  children: ComponentChildren;
  label?: string;
}) {
  return (
    <section class="panel" aria-label={label}>
      <header class="panel-head">
        <h2>{title}</h2>
        {actions && <div class="actions">{actions}</div>}
      </header>
      {children}
    </section>
  );
}

/** Calls `fn` now and every `everyMs` while the page is visible; `refresh()` calls it at once. */
export function usePoll(fn: () => Promise<void>, everyMs: number, deps: unknown[]): { refresh(): void } {
  const latest = useRef(fn);
  latest.current = fn;
  const refresh = useCallback(() => {
    void latest.current();
  }, []);
  useEffect(() => {
    refresh();
    const t = setInterval(() => {
      if (document.visibilityState === 'visible') refresh();
    }, everyMs);
    return () => clearInterval(t);
  }, deps);
  return { refresh };
}

/** A list that grows page by page through the API's `next_cursor`. */
export function usePaged<T>(
  load: (cursor: string | null) => Promise<{ items: T[]; next: string | null }>,
  deps: unknown[],
) {
  const [items, setItems] = useState<T[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [pages, setPages] = useState(1);
  const reload = useCallback(async () => {
    // Refreshing re-reads as many pages as are shown, so "load more" survives the live refresh.
    try {
      let all: T[] = [];
      let cursor: string | null = null;
      for (let i = 0; i < pages; i++) {
        const page = await load(cursor);
        all = all.concat(page.items);
        cursor = page.next;
        if (!cursor) break;
      }
      setItems(all);
      setNext(cursor);
      setError(null);
    } catch (err) {
      setError(err);
    }
  }, [...deps, pages]);
  /** Changes the items shown in place (a live event), without reading them again. */
  const patch = useCallback((fn: (items: T[]) => T[]) => setItems((shown) => (shown === null ? shown : fn(shown))), []);
  return { items, next, error, reload, patch, more: () => setPages((p) => p + 1) };
}

export function LoadMore({ next, onMore }: { next: string | null; onMore(): void }) {
  return next ? (
    <p class="more">
      <button type="button" onClick={onMore}>
        Load more
      </button>
    </p>
  ) : null;
}

/**
 * The dashboard's one markup for a list: a table of `items`, one `row` each, under `columns` (and a last, unlabelled
 * column for each row's buttons when `actions`); `empty` in its place when there are none, nothing while they load.
 */
export function ListTable<T>({
  label,
  columns,
  items,
  empty,
  actions = false,
  row,
}: {
  label: string;
  columns: string[];
  items: T[] | null | undefined;
  empty?: ComponentChildren;
  actions?: boolean;
  row(item: T): ComponentChildren;
}) {
  if (!items) return null;
  if (items.length === 0) return empty ? <p class="muted empty">{empty}</p> : null;
  return (
    <div class="table-scroll">
      <table class="list" aria-label={label}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c}>
                {c}
              </th>
            ))}
            {actions && (
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>{items.map(row)}</tbody>
      </table>
    </div>
  );
}
