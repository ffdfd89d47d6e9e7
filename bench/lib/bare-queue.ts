/**
 * Child-process entry of the accept path's baseline: a bare BullMQ queue behind the plainest HTTP server, with no
 * sandgate code at all. What it does is the floor of sandgate's accept path — parse an HTTP request, `queue.add` —
 * on the same Redis, through the same client libraries, in a Node process started the same way:
 *   POST /add  queue.add, then 202: the floor of `POST /v1/executions` (accepted, not waited for);
 *   POST /run  queue.add, a BullMQ Worker in this process takes the job and completes it at once, then 200: the floor
 *              of `POST /v1/executions?wait=…` against a backend that does nothing.
 * The queue's options are sandgate's (one attempt, removed once ended) and so is the worker's concurrency; the job
 * is added with a job id, as sandgate adds its own. Nothing else: no records, no events, no limits, no auth.
 * Started as a stack's process (bench/lib/stack.ts, entry `bare`), it reads what a sandgate process would:
 * REDIS_URL, SANDGATE_REDIS_PREFIX, SANDGATE_HOST, SANDGATE_PORT, SANDGATE_WORKER_CONCURRENCY (default 2, as
 * sandgate's); `GET /readyz` answers 200 once the worker is ready.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Queue, Worker } from 'bullmq';
import { createRedis, queuePrefix } from '@sandgate/state';

const QUEUE = 'executions';

async function main() {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const prefix = queuePrefix(process.env.SANDGATE_REDIS_PREFIX ?? 'sgbare');
  const host = process.env.SANDGATE_HOST ?? '127.0.0.1';
  const port = Number(process.env.SANDGATE_PORT ?? 0);
  const concurrency = Number(process.env.SANDGATE_WORKER_CONCURRENCY || 2);
  const queue = new Queue(QUEUE, {
    connection: createRedis(url, 'sandgate-bench-bare-queue', { autoPipelining: false }),
    prefix,
    defaultJobOptions: { attempts: 1, removeOnComplete: true, removeOnFail: true },
  });
  const waiting = new Map<string, () => void>();
  const worker = new Worker(QUEUE, async () => ({ exit_code: 0, stdout: '1\n' }), {
    connection: createRedis(url, 'sandgate-bench-bare-worker', { autoPipelining: false }),
    prefix,
    concurrency,
  });
  worker.on('completed', (job) => {
    waiting.get(job.id!)?.();
    waiting.delete(job.id!);
  });
  await worker.waitUntilReady();

  const answer = (res: ServerResponse, status: number, body: unknown) => {
    const payload = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
    res.end(payload);
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url === '/readyz') return answer(res, 200, { status: 'ready' });
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const data = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as unknown;
    const id = `exec_${randomBytes(8).toString('hex')}`;
    if (req.url === '/add') {
      await queue.add('execute', data, { jobId: id });
      return answer(res, 202, { id, state: 'queued' });
    }
    if (req.url === '/run') {
      const done = new Promise<void>((resolve) => waiting.set(id, resolve));
      await queue.add('execute', data, { jobId: id });
      await done;
      return answer(res, 200, { id, state: 'completed' });
    }
    answer(res, 404, { code: 'not_found' });
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => answer(res, 500, { detail: String(err) }));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(port, host, r));
  const stop = async () => {
    server.close();
    await worker.close();
    await queue.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.stack : err);
  process.exit(1);
});
