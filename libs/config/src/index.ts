export * from './config.ts';
export * from './tenant-limits.ts';
export * from './logger.ts';
export * from './tools.ts';
export * from './mcp-tools.ts';
export * from './host-allow-list.ts';
export * from './egress.ts';
