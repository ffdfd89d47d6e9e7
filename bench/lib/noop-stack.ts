/**
 * Child-process entry for gateway-overhead: the real gateway and the real BullMQ worker in one process
 * (as `npm start` runs them), with a backend that does nothing. What remains is sandgate's own path:
 * HTTP, validation, Redis records, the queue, the worker's bookkeeping, the event stream and the wait.
 */
import { buildApp, createGatewayDeps } from '@sandgate/gateway';
import { createLogger, loadConfig } from '@sandgate/config';
import { Workspaces } from '@sandgate/storage';
import { newWorkerId, startWorker } from '@sandgate/worker';
import { noopBackend } from '../../test/noop-backend.ts';
import { serve } from './serve.ts';

/** BENCH_NOOP_ROLE=worker runs the no-op worker alone, beside a real gateway process (bench/profile.ts noop-split). */
async function main() {
  const workerOnly = process.env.BENCH_NOOP_ROLE === 'worker';
  const config = loadConfig();
  const log = createLogger(config, 'sandgate-noop');
  const workspaces = new Workspaces({
    dataDir: config.dataDir,
    owner: { uid: config.sandboxUid, gid: config.sandboxUid },
  });
  const deps = workerOnly ? null : await createGatewayDeps(config, log);
  const app = deps ? await buildApp(deps) : null;
  const worker = await startWorker({ config, log, backend: noopBackend, workspaces, id: newWorkerId() });
  await app?.listen({ host: config.host, port: config.port });
  return async () => {
    await app?.close();
    await worker.close();
    await deps?.close();
  };
}

serve(main);
