import { Agent as HttpsAgent, type AgentOptions } from 'node:https';
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

/** What a watch of Pods is told: each event, and its end (an error, or undefined when the server closed it). */
export interface PodWatchHandlers {
  event(type: string, object: k8s.V1Pod | k8s.V1Status): void;
  done(err: unknown): void;
}

/** The TLS settings of an agent, which decide whether two requests may share its connections. */
const TLS_KEYS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'servername', 'rejectUnauthorized'] as const;

/**
 * The namespaced core/v1 calls the Kubernetes backend makes, and nothing else (the chart's Role grants exactly
 * these: docs/kubernetes.md). Plain REST, and one watch of the deployment's Pods: no exec, attach, port-forward or
 * follow. Every call has a timeout; transient failures are retried with backoff, a definitive answer (4xx) never is.
 * Calls share kept-alive connections: the client makes a new agent, so a new TLS handshake, for every request.
 */
export class PodApi {
  readonly #core: k8s.CoreV1Api;
  readonly #kc: k8s.KubeConfig;
  readonly namespace: string;
  readonly #log: BackendLogger;
  /** Calls made, by verb and resource: what a run costs the API server. */
  readonly calls = new Map<string, number>();
  /** TLS connections opened for calls (not the watch): one per request without keep-alive. */
  connections = 0;
  /** When a call last got an answer that shows the API server serves this worker, and when one last failed so. */
  lastAnswerAt = 0;
  lastFailureAt = 0;
  #agent: { agent: HttpsAgent; key: string } | undefined;

  constructor(kc: k8s.KubeConfig, namespace: string, log: BackendLogger) {
    this.#core = kc.makeApiClient(k8s.CoreV1Api);
    this.#kc = kc;
    this.namespace = namespace;
    this.#log = log;
  }

  /**
   * The API server served this worker within `ms` (a call of it succeeded, or answered about the object it named),
   * and no call failed since (unreachable, refused, overloaded): a health probe would tell nothing new.
   */
  answeredWithin(ms: number): boolean {
    return this.lastAnswerAt > this.lastFailureAt && Date.now() - this.lastAnswerAt < ms;
  }

  /**
   * Watches the Pods of `labelSelector` from `resourceVersion` (with bookmarks; the server ends it after
   * `timeoutSeconds`). Resolves once the server has answered 200, with what stops it; rejects when it did not.
   */
  async watchPods(
    labelSelector: string,
    resourceVersion: string,
    timeoutSeconds: number,
    handlers: PodWatchHandlers,
  ): Promise<AbortController> {
    this.calls.set('watch pods', (this.calls.get('watch pods') ?? 0) + 1);
    const watch = new k8s.Watch(this.#kc);
    let started = false;
    let refused: { err: unknown } | undefined;
    const controller = await watch.watch(
      `/api/v1/namespaces/${encodeURIComponent(this.namespace)}/pods`,
      { labelSelector, resourceVersion, allowWatchBookmarks: true, timeoutSeconds },
      (type, object) => handlers.event(type, object as k8s.V1Pod | k8s.V1Status),
      (err: unknown) => {
        if (started) handlers.done(err ?? undefined);
        else refused = { err: err ?? new Error('the watch ended before it started') };
      },
    );
    // The library reports a refused watch (4xx, 5xx, unreachable) through `done`, before it returns.
    if (refused !== undefined) {
      this.#failed(refused.err);
      throw refused.err;
    }
    started = true;
    this.lastAnswerAt = Date.now();
    return controller;
  }

  createPod(body: k8s.V1Pod): Promise<k8s.V1Pod> {
    return this.#call('create pods', (o) => this.#core.createNamespacedPod({ namespace: this.namespace, body }, o));
  }

  readPod(name: string): Promise<k8s.V1Pod> {
    return this.#call('get pods', (o) => this.#core.readNamespacedPod({ name, namespace: this.namespace }, o));
  }

  listPods(labelSelector: string, _continue?: string, signal?: AbortSignal): Promise<k8s.V1PodList> {
    return this.#call(
      'list pods',
      (o) =>
        this.#core.listNamespacedPod(
          {
            namespace: this.namespace,
            labelSelector,
            limit: 500,
            ...(_continue ? { _continue } : {}),
          },
          o,
        ),
      signal ? { signal } : {},
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
              const agent = ctx.getAgent();
              if (agent instanceof HttpsAgent) ctx.setAgent(this.#keptAlive(agent));
              return new k8s.Observable(Promise.resolve(ctx));
            },
            post: (ctx) => new k8s.Observable(Promise.resolve(ctx)),
          },
        ],
        middlewareMergeStrategy: 'append',
      };
      try {
        const answer = await call(options);
        this.lastAnswerAt = Date.now();
        return answer;
      } catch (err) {
        this.#failed(err);
        if (!transient(err) || attempt + 1 >= attempts || signal?.aborted) throw err;
        this.#log.warn(
          { call: what, status: statusOf(err), attempt: attempt + 1, err: messageOf(err) },
          'retrying a Kubernetes API call',
        );
        await new Promise((r) => setTimeout(r, backoffMs(err, attempt)));
      }
    }
  }

  /** A failure that says the API server does not serve this worker now; any other answer (404, 409, 422…) does. */
  #failed(err: unknown): void {
    const status = statusOf(err) ?? (err as { statusCode?: unknown } | null)?.statusCode;
    if (typeof status !== 'number' || status === 401 || status === 403 || status === 429 || status >= 500) {
      this.lastFailureAt = Date.now();
    } else {
      this.lastAnswerAt = Date.now();
    }
  }

  /**
   * One kept-alive agent in place of the one the client made for this request (its own, fresh each time), as long as
   * the TLS settings are the same (credentials read again from a file may change them). Proxy agents are left alone.
   */
  #keptAlive(made: HttpsAgent): HttpsAgent {
    if (made.constructor !== HttpsAgent) return made;
    const options = (made as HttpsAgent & { options: AgentOptions }).options;
    const key = JSON.stringify(TLS_KEYS.map((k) => String(options[k] ?? '')));
    if (this.#agent?.key !== key) {
      this.#agent?.agent.destroy();
      const agent = new HttpsAgent({ ...options, keepAlive: true, keepAliveMsecs: 30_000, maxFreeSockets: 16 });
      const create = agent.createConnection.bind(agent);
      agent.createConnection = ((...args: Parameters<typeof create>) => {
        this.connections++;
        return create(...args);
      }) as typeof agent.createConnection;
      this.#agent = { agent, key };
    }
    return this.#agent.agent;
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.#agent?.agent.destroy();
    this.#agent = undefined;
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
