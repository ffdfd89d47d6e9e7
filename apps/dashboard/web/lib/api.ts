import type { Execution, FileEntry, Session, Template, Volume } from '@sandgate/contracts';

/**
 * A path of the API with every interpolated value encoded as one segment: an id taken from the address
 * bar (`#/runs/<id>`) cannot climb to another endpoint.
 */
export const apiPath = (strings: TemplateStringsArray, ...values: string[]): string =>
  strings.reduce((out, s, i) => out + s + (i < values.length ? encodeURIComponent(values[i]!) : ''), '');

/** Where a session's files are in the API. */
export const sessionFiles = (sessionId: string): string => apiPath`/v1/sessions/${sessionId}/files`;
/** Where a volume's files are in the API. */
export const volumeFiles = (name: string): string => apiPath`/v1/volumes/${name}/files`;

/** A problem+json answer (or a network failure) as the pages show it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
  ) {
    super(detail);
    this.name = 'ApiError';
  }
}

/** One page of a paginated list; `next` is null on the last page (or while the server does not paginate yet). */
export interface Page<T> {
  items: T[];
  next: string | null;
}

export type KeySource = () => string | null;

const LIST_LIMIT = 50;

/** Turns an absolute link of the API (its public URL may name another host) into a path on this origin. */
export const sameOrigin = (url: string): string => {
  const u = new URL(url, location.href);
  return `${u.pathname}${u.search}`;
};

async function problemOf(res: Response): Promise<ApiError> {
  const body = (await res.json().catch(() => null)) as { code?: string; detail?: string } | null;
  return new ApiError(
    res.status,
    body?.code ?? `http_${res.status}`,
    body?.detail ?? (res.statusText || 'request failed'),
  );
}

/** The REST API with the signed-in key in a header: never in a URL. */
export class Api {
  readonly #key: KeySource;
  constructor(key: KeySource) {
    this.#key = key;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    const key = this.#key();
    return { ...(key ? { authorization: `Bearer ${key}` } : {}), ...extra };
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(path, {
        method,
        cache: 'no-store',
        headers: this.headers(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (err) {
      throw new ApiError(0, 'network_error', `the gateway could not be reached (${(err as Error).message})`);
    }
    if (!res.ok) throw await problemOf(res);
    return (res.status === 204 ? undefined : await res.json()) as T;
  }

  async #page<T>(path: string, field: string, params: Record<string, string | undefined>, cursor?: string | null) {
    const q = new URLSearchParams({ limit: String(LIST_LIMIT) });
    for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
    if (cursor) q.set('cursor', cursor);
    const body = await this.request<Record<string, unknown>>('GET', `${path}?${q}`);
    return {
      items: (body[field] ?? []) as T[],
      next: (body.next_cursor as string | null | undefined) ?? null,
    } satisfies Page<T>;
  }

  sessions(cursor?: string | null): Promise<Page<Session>> {
    return this.#page('/v1/sessions', 'sessions', {}, cursor);
  }

  executions(filter: { session_id?: string; state?: string }, cursor?: string | null): Promise<Page<Execution>> {
    return this.#page('/v1/executions', 'executions', filter, cursor);
  }

  /** The files of `owner`: a session's (sessionFiles) or a volume's (volumeFiles) files path. */
  files(owner: string, cursor?: string | null): Promise<Page<FileEntry>> {
    return this.#page(owner, 'files', {}, cursor);
  }

  /** The tenant's volumes, by name (a tenant has few: one request holds them all). */
  async volumes(): Promise<Volume[]> {
    return (await this.request<{ volumes: Volume[] }>('GET', '/v1/volumes')).volumes;
  }

  /** The templates the tenant may make sessions of, by name. */
  async templates(): Promise<Template[]> {
    return (await this.request<{ templates: Template[] }>('GET', '/v1/templates')).templates;
  }

  /**
   * Uploads one file as multipart/form-data to `owner` (a files path). XMLHttpRequest, not fetch, because only it
   * reports upload progress; `onProgress` gets the fraction sent (0..1).
   */
  upload(
    owner: string,
    file: File,
    { overwrite = false, onProgress }: { overwrite?: boolean; onProgress(f: number): void },
  ) {
    return new Promise<FileEntry[]>((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', owner + (overwrite ? '?overwrite=true' : ''));
      for (const [k, v] of Object.entries(this.headers())) xhr.setRequestHeader(k, v);
      xhr.responseType = 'json';
      xhr.upload.onprogress = (e) => {
        if (e.lengthComputable) onProgress(e.loaded / e.total);
      };
      xhr.onload = () => {
        const body = xhr.response as { files?: FileEntry[]; code?: string; detail?: string } | null;
        if (xhr.status === 201) {
          onProgress(1);
          resolve(body?.files ?? []);
          return;
        }
        reject(new ApiError(xhr.status, body?.code ?? `http_${xhr.status}`, body?.detail ?? 'upload failed'));
      };
      xhr.onerror = () => reject(new ApiError(0, 'network_error', 'the upload was interrupted'));
      const form = new FormData();
      form.append('file', file, file.name);
      xhr.send(form);
    });
  }
}
