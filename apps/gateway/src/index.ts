export { buildApp, type AppOptions } from './app.ts';
export { createGatewayDeps, type GatewayDeps } from './deps.ts';
export { startGateway, type RunningGateway } from './server.ts';
export { openApiDocument, serialiseOpenApi } from './openapi.ts';
export { startWebhookDispatcher, type WebhookDispatcher } from './webhooks/dispatcher.ts';
export { FileEvents } from './core/file-events.ts';
