import { writeFile, mkdir } from 'node:fs/promises';
import { openApiDocument, serialiseOpenApi } from '@sandgate/gateway';

/** `npm run openapi`: regenerates openapi/openapi.json from the routes (needs Redis, like the gateway). */
const doc = await openApiDocument(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
await mkdir(new URL('../openapi/', import.meta.url), { recursive: true });
await writeFile(new URL('../openapi/openapi.json', import.meta.url), serialiseOpenApi(doc));
console.log('wrote openapi/openapi.json');
