export { Sandgate, type SandgateOptions, type RunOptions } from './sandgate.js';
export { SandgateApiError } from './errors.js';
export { resizeTerminal, type TerminalOptions } from './terminal.js';
export { tailEvents, type TailOptions } from './events.js';
export { watchMetrics, type WatchMetricsOptions } from './metrics.js';
export type { UploadSource } from './files.js';
/** The generated SDK: one function per operation of openapi/openapi.json, and every type of the document. */
export * from './generated/index.js';
export { createClient, createConfig, type Client } from './generated/client/index.js';
