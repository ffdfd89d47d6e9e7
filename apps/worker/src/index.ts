export { newWorkerId, startWorker, type RunningWorker, type WorkerOptions } from './worker.ts';
export { createBackend } from './backend.ts';
export { bootWorker, type BootedWorker } from './boot.ts';
