import type { FileEntry } from '@sandgate/contracts';

/** One event of GET /v1/sessions/{id}/files/events, as followEvents hands it over. */
export interface FileStreamEvent {
  event: string;
  data: string;
}

/**
 * What a file event does to the files shown: a change to a file shown, or a deletion, is applied in place; a new file
 * (which needs its download link and type) or a gap in the events (`overflow`, `missed`) asks for the list again.
 */
export function applyFileEvent(items: FileEntry[], ev: FileStreamEvent): { items: FileEntry[]; reload: boolean } {
  if (ev.event !== 'created' && ev.event !== 'modified' && ev.event !== 'deleted') return { items, reload: true };
  const { path, size_bytes, modified_at } = JSON.parse(ev.data) as {
    path: string;
    size_bytes: number;
    modified_at: string;
  };
  if (ev.event === 'deleted') {
    // A deleted directory is one event for its own path: what was under it goes too.
    const left = items.filter((f) => f.path !== path && !f.path.startsWith(`${path}/`));
    return { items: left.length === items.length ? items : left, reload: false };
  }
  const at = items.findIndex((f) => f.path === path);
  if (at < 0) return { items, reload: true };
  const updated = items.slice();
  updated[at] = { ...items[at]!, size_bytes, modified_at };
  return { items: updated, reload: false };
}
