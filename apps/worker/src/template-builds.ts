import { Worker, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { TemplateBuildError, type ExecutionBackend } from '@sandgate/backends';
import type { Config } from '@sandgate/config';
import {
  BUILD_LEASE_MS,
  EventWriter,
  TemplateStore,
  buildQueueName,
  createRedis,
  queuePrefix,
  type BuildJob,
  type Keys,
  type LuaRedis,
} from '@sandgate/state';

/** The end of a build's log kept for its template (build.log_tail, the 422 of a failed build). */
const TAIL_BYTES = 8192;

/**
 * A build's log on its way to Redis (the `log` events of its stream): everything up to SANDGATE_TEMPLATE_LOG_BYTES,
 * then only its end, which a failure is usually about, written when the build ends.
 */
class BuildLog {
  #written = 0;
  #dropped = 0;
  #tail = '';

  readonly #writer: EventWriter;
  readonly #maxBytes: number;
  constructor(writer: EventWriter, maxBytes: number) {
    this.#writer = writer;
    this.#maxBytes = maxBytes;
  }

  write(text: string): void {
    this.#tail = (this.#tail + text).slice(-TAIL_BYTES);
    const bytes = Buffer.byteLength(text);
    if (this.#written + bytes <= this.#maxBytes) {
      this.#written += bytes;
      this.#writer.log(text);
    } else {
      this.#dropped += bytes;
    }
  }

  /** The log's end, for the template; what was left out of the stream goes into it now, after a note. */
  async end(): Promise<string> {
    if (this.#dropped > 0) {
      this.#writer.log(`\n[… ${this.#dropped} bytes of log left out (SANDGATE_TEMPLATE_LOG_BYTES); its end: …]\n`);
      this.#writer.log(this.#tail);
    }
    await this.#writer.flush();
    return this.#tail;
  }
}

export interface TemplateBuildsOptions {
  config: Config;
  log: Logger;
  backend: ExecutionBackend;
  redis: LuaRedis;
  k: Keys;
  workerId: string;
}

/**
 * Builds templates' images, one at a time, from the build queue: a worker whose backend builds images (Docker) takes
 * them; the gateway queued them. The build's log goes to its stream as it comes
 * (GET /v1/templates/{name}/build/events), its lease is renewed while it runs, and its end is recorded on every
 * template waiting for it.
 */
export class TemplateBuilds {
  readonly #store: TemplateStore;
  readonly #stop = new AbortController();
  #worker: Worker<BuildJob> | undefined;
  #connection: ReturnType<typeof createRedis> | undefined;

  readonly #o: TemplateBuildsOptions;
  constructor(o: TemplateBuildsOptions) {
    this.#o = o;
    this.#store = new TemplateStore(o.redis, o.k);
  }

  async start(): Promise<void> {
    if (!this.#o.backend.buildTemplate) return;
    this.#connection = createRedis(this.#o.config, 'sandgate-worker-builds', { autoPipelining: false });
    this.#worker = new Worker<BuildJob>(
      buildQueueName(this.#o.config.queueName),
      async (job: Job<BuildJob>) => {
        if (job.name === 'prune') return void (await this.prune());
        if (job.data.build_id) await this.build(job.data.build_id);
      },
      {
        connection: this.#connection,
        prefix: queuePrefix(this.#o.config.redisPrefix),
        concurrency: 1,
        // A build whose worker died is not started again by BullMQ: its lease lapses and it ends as lost (the
        // template says so; POST it again to build anew).
        maxStalledCount: 0,
        lockDuration: BUILD_LEASE_MS,
      },
    );
    this.#worker.on('error', (err) => this.#o.log.error({ err }, 'build queue error'));
    await this.#worker.waitUntilReady();
  }

  async build(id: string): Promise<void> {
    const { backend, config, log: wlog } = this.#o;
    const build = await this.#store.build(id);
    if (!build || build.state !== 'building') return;
    const log = wlog.child({ build_id: id, recipe: build.hash.slice(0, 12) });
    await this.#store.takeBuild(id, build.hash, this.#o.workerId);
    const lease = setInterval(
      () => void this.#store.renew(id, build.hash).catch((err: unknown) => log.warn({ err }, 'build lease')),
      BUILD_LEASE_MS,
    );
    const out = new BuildLog(new EventWriter(this.#o.redis, this.#store.buildEventsKey(id)), config.templateLogBytes);
    const timeout = AbortSignal.timeout(config.templateBuildTimeoutMs);
    const started = Date.now();
    log.info('template build started');
    try {
      out.write(`building on worker ${this.#o.workerId}\n`);
      const made = await backend.buildTemplate!(
        { hash: build.hash, spec: build.spec },
        (text) => out.write(text),
        AbortSignal.any([timeout, this.#stop.signal]),
      );
      const logTail = await out.end();
      const durationMs = Date.now() - started;
      await this.#store.finish(id, build.hash, {
        state: 'ready',
        image: made.image,
        cached: made.cached,
        durationMs,
        logTail,
      });
      log.info({ image: made.image, cached: made.cached, durationMs }, 'template built');
    } catch (err) {
      const error = timeout.aborted
        ? `the build took longer than ${config.templateBuildTimeoutMs / 1000} s (SANDGATE_TEMPLATE_BUILD_TIMEOUT_S)`
        : err instanceof TemplateBuildError
          ? err.message
          : `the build could not run: ${(err as Error).message}`;
      out.write(`\n${error}\n`);
      const logTail = await out.end().catch(() => '');
      await this.#store.finish(id, build.hash, { state: 'failed', error, logTail, durationMs: Date.now() - started });
      log.warn({ err, error }, 'template build failed');
    } finally {
      clearInterval(lease);
    }
  }

  /** Removes the images of recipes no template has any more. */
  async prune(): Promise<void> {
    if (!this.#o.backend.pruneTemplateImages) return;
    const keep = new Set((await this.#store.list()).map((t) => t.hash));
    const removed = await this.#o.backend.pruneTemplateImages(keep);
    if (removed.length > 0) this.#o.log.info({ removed }, 'removed unused template images');
  }

  /** Stops taking builds; one under way is stopped (it ends as failed, and can be asked for again). */
  async close(): Promise<void> {
    this.#stop.abort(new Error('the worker is stopping'));
    await this.#worker?.close();
    this.#connection?.disconnect();
  }
}
