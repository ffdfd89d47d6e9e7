export * from './host-allow-list.ts';
export * from './egress.ts';
export * from './tool-calls.ts';
export * from './mcp-tools.ts';
