export * from './config.ts';
export * from './tenant-limits.ts';
export * from './logger.ts';
export * from './tools.ts';
export * from './egress.ts';
export * from './templates.ts';
