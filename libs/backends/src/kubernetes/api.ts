import * as k8s from '@kubernetes/client-node';
import { SandgateError } from '@sandgate/contracts';
import type { BackendLogger } from '../logger.ts';

/** How long one API call may take before it is abandoned (and, when transient, retried). */
export const CALL_TIMEOUT_MS = 10_000;
/** Attempts of one call that keeps failing transiently (429, 5xx, a reset or a timeout); a 4xx is never retried. */
export const CALL_ATTEMPTS = 3;
const BACKOFF_MS = 200;

/** The HTTP status of a failed API call, or undefined when it never got an answer (network, timeout). */
export function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/** The Status object's message of a failed call, for people. */
export function messageOf(err: unknown): string {
  const e = err as { body?: unknown; message?: string };
  const body = typeof e.body === 'string' ? safeJson(e.body) : e.body;
  const message = (body as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' ? message : (e.message ?? String(err)).split('\n')[0]!;
}

const safeJson = (raw: string): unknown => {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
};

const transient = (err: unknown): boolean => {
  const status = statusOf(err);
  return status === undefined || status === 429 || status >= 500;
};

/** The wait a 429 asks for (Retry-After, seconds), else exponential backoff. */
function backoffMs(err: unknown, attempt: number): number {
  const headers = (err as { headers?: Record<string, string> }).headers;
  const retryAfter = Number(headers?.['retry-after']);
  if (statusOf(err) === 429 && Number.isFinite(retryAfter)) return Math.min(5_000, retryAfter * 1000);
  return BACKOFF_MS * 2 ** attempt;
}

/**
 * The namespaced core/v1 calls the Kubernetes backend makes, and nothing else (the chart's Role grants exactly
 * these: docs/kubernetes.md). Plain REST only: no exec, attach, port-forward, watch or follow. Every call has a
 * timeout; transient failures are retried with backoff, a definitive answer (4xx) never is.
 */
export class PodApi {
  readonly #core: k8s.CoreV1Api;
  readonly namespace: string;
  readonly #log: BackendLogger;
  /** Calls made, by verb and resource: what a run costs the API server. */
  readonly calls = new Map<string, number>();

  constructor(kc: k8s.KubeConfig, namespace: string, log: BackendLogger) {
    this.#core = kc.makeApiClient(k8s.CoreV1Api);
    this.namespace = namespace;
    this.#log = log;
  }

  createPod(body: k8s.V1Pod): Promise<k8s.V1Pod> {
    return this.#call('create pods', (o) => this.#core.createNamespacedPod({ namespace: this.namespace, body }, o));
  }

  readPod(name: string): Promise<k8s.V1Pod> {
    return this.#call('get pods', (o) => this.#core.readNamespacedPod({ name, namespace: this.namespace }, o));
  }

  listPods(labelSelector: string, _continue?: string): Promise<k8s.V1PodList> {
    return this.#call('list pods', (o) =>
      this.#core.listNamespacedPod(
        {
          namespace: this.namespace,
          labelSelector,
          limit: 500,
          ...(_continue ? { _continue } : {}),
        },
        o,
      ),
    );
  }

  /** Deletes at once (grace 0); with `uid`, only that very Pod, never one made later under the same name. */
  async deletePod(name: string, uid?: string): Promise<void> {
    const body: k8s.V1DeleteOptions = { gracePeriodSeconds: 0, ...(uid ? { preconditions: { uid } } : {}) };
    await this.#call('delete pods', (o) =>
      this.#core.deleteNamespacedPod(
        {
          name,
          namespace: this.namespace,
          gracePeriodSeconds: 0,
          body,
        },
        o,
      ),
    );
  }

  readLog(name: string, container: string, opts: { sinceTime?: Date; limitBytes: number }): Promise<string> {
    return this.#call('get pods/log', (o) =>
      this.#core.readNamespacedPodLog(
        {
          name,
          namespace: this.namespace,
          container,
          timestamps: true,
          limitBytes: opts.limitBytes,
          ...(opts.sinceTime ? { sinceTime: opts.sinceTime.toISOString().replace(/\.\d+Z$/, 'Z') } : {}),
        } as k8s.CoreV1ApiReadNamespacedPodLogRequest,
        o,
      ),
    );
  }

  createSecret(body: k8s.V1Secret): Promise<k8s.V1Secret> {
    return this.#call('create secrets', (o) =>
      this.#core.createNamespacedSecret({ namespace: this.namespace, body }, o),
    );
  }

  replaceSecret(name: string, body: k8s.V1Secret): Promise<k8s.V1Secret> {
    return this.#call('update secrets', (o) =>
      this.#core.replaceNamespacedSecret({ name, namespace: this.namespace, body }, o),
    );
  }

  /**
   * At most one Pod of `labelSelector`, asked once (no retry) and dropped when `signal` aborts: the health probe, which
   * a worker makes every few seconds, so it is the cheapest call of a verb the Role grants already.
   */
  probe(labelSelector: string, signal: AbortSignal): Promise<k8s.V1PodList> {
    return this.#call(
      'list pods',
      (o) => this.#core.listNamespacedPod({ namespace: this.namespace, labelSelector, limit: 1 }, o),
      { attempts: 1, signal },
    );
  }

  async #call<T>(
    what: string,
    call: (options: k8s.ConfigurationOptions) => Promise<T>,
    { attempts = CALL_ATTEMPTS, signal }: { attempts?: number; signal?: AbortSignal } = {},
  ): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      this.calls.set(what, (this.calls.get(what) ?? 0) + 1);
      const timeout = AbortSignal.timeout(CALL_TIMEOUT_MS);
      const options: k8s.ConfigurationOptions = {
        middleware: [
          {
            pre: (ctx) => {
              ctx.setSignal(signal ? AbortSignal.any([signal, timeout]) : timeout);
              return new k8s.Observable(Promise.resolve(ctx));
            },
            post: (ctx) => new k8s.Observable(Promise.resolve(ctx)),
          },
        ],
        middlewareMergeStrategy: 'append',
      };
      try {
        return await call(options);
      } catch (err) {
        if (!transient(err) || attempt + 1 >= attempts) throw err;
        this.#log.warn(
          { call: what, status: statusOf(err), attempt: attempt + 1, err: messageOf(err) },
          'retrying a Kubernetes API call',
        );
        await new Promise((r) => setTimeout(r, backoffMs(err, attempt)));
      }
    }
  }
}

/** A failed call in a few words, as a health report gives it: `API server answered 403: pods is forbidden …`. */
export function apiProblem(err: unknown): string {
  const status = statusOf(err);
  return status === undefined
    ? `API server unreachable: ${messageOf(err)}`
    : `API server answered ${status}: ${messageOf(err)}`;
}

/** A failure of the cluster (not of the user's code), as the worker reports it: error, backend_unavailable. */
export function clusterError(err: unknown, doing: string): SandgateError {
  if (err instanceof SandgateError) return err;
  const status = statusOf(err);
  const how = status === undefined ? 'did not answer' : `answered ${status}`;
  return new SandgateError(
    'backend_unavailable',
    `The Kubernetes API server ${how} while ${doing}: ${messageOf(err)}`,
    { cause: err },
  );
}
