import type { Logger } from 'pino';
import type { ExecutionBackend } from '@sandgate/backends';
import type { Config } from '@sandgate/config';
import { openWorkspaces } from '@sandgate/storage';
import { createBackend } from './backend.ts';
import { newWorkerId, startWorker, type RunningWorker } from './worker.ts';

export interface BootedWorker {
  worker: RunningWorker;
  backend: ExecutionBackend;
  /** Finishes the runs it holds (within the shutdown grace), then closes the backend. */
  close(): Promise<void>;
}

/**
 * The one way a worker starts, alone (`npm run start:worker`) or beside a gateway (`npm start`): the session
 * store, the backend SANDGATE_BACKEND names (checked before any job is taken), then the queue consumer.
 */
export async function bootWorker(config: Config, log: Logger): Promise<BootedWorker> {
  const workspaces = await openWorkspaces({
    dataDir: config.dataDir,
    owner: { uid: config.sandboxUid, gid: config.sandboxUid },
    sessionDiskBytes: config.sessionDiskBytes,
    warn: (message) => log.warn(message),
  });
  const id = newWorkerId();
  const backend = await createBackend(config, log, workspaces, id);
  await backend.check();
  const worker = await startWorker({ config, log, backend, workspaces, id });
  return {
    worker,
    backend,
    async close() {
      await worker.close();
      await backend.close();
      await workspaces.close();
    },
  };
}
